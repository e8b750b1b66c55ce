"""A local look at the rendered boards: a static file server on 127.0.0.1.

The site needs no server (open ``leaderboards/site/index.html`` directly); this one only saves a
click. It serves the whole leaderboards folder, so the entries' links to their files work too, but
only regular files that really lie in it: a symbolic link that leads out of the folder, a hidden
file (``.lock``, a staging folder) or a folder (no listings) is answered 404.
"""

from __future__ import annotations

import functools
import os
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentbench_rl.leaderboard.render import INDEX, SITE
from agentbench_rl.leaderboard.store import check_root


class _SiteHandler(SimpleHTTPRequestHandler):
    """Regular files under the served folder only; no listings, no logging."""

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the command prints the address once instead."""

    def send_head(self) -> Any:
        """Answer 404 unless the path is a regular file whose real path lies under the root."""
        path = self.translate_path(self.path)
        root = os.path.realpath(self.directory)
        real = os.path.realpath(path)
        relative = os.path.relpath(real, root)
        hidden = any(part.startswith(".") for part in Path(relative).parts)
        if relative.startswith(os.pardir) or hidden or not os.path.isfile(real):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path: Any) -> None:
        """No listings."""
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")


def make_server(root: Path, port: int = 8000, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server of ``root`` (not started); ``port=0`` picks a free port.

    Example:
        >>> make_server(Path("x"))
        Traceback (most recent call last):
        ...
        ValueError: x/site/index.html does not exist; run agentbench-rl leaderboard render
    """
    root = check_root(root)
    if not (root / SITE / INDEX).is_file():
        raise ValueError(
            f"{root / SITE / INDEX} does not exist; run agentbench-rl leaderboard render"
        )
    handler = functools.partial(_SiteHandler, directory=str(root))
    return ThreadingHTTPServer((host, port), handler)


def site_url(server: ThreadingHTTPServer) -> str:
    """The address of the page a server from :func:`make_server` serves."""
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/{SITE}/{INDEX}"
