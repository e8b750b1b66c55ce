"""A local look at the rendered boards: a static file server on 127.0.0.1.

The site needs no server (open ``leaderboards/site/index.html`` directly); this one only saves a
click. It serves the whole leaderboards folder, so the entries' links work too, but only regular
files that really lie in it: a symbolic link that leads out of the folder, a hidden file
(``.lock``, a staging folder) or a folder is answered 404, except a filed submission's folder
(the one an entry links to), which is answered with a page listing its files (those same
regular files only). ``/`` leads to the boards' page (``site/index.html``).
"""

from __future__ import annotations

import functools
import html
import io
import os
import urllib.parse
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentbench_rl.core.net import bind_problem
from agentbench_rl.leaderboard.render import INDEX, SITE
from agentbench_rl.leaderboard.schema import METADATA_FILE
from agentbench_rl.leaderboard.store import check_root


class _SiteHandler(SimpleHTTPRequestHandler):
    """Regular files under the served folder only; no listings, no logging."""

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the command prints the address once instead."""

    def _inside(self, path: str) -> str | None:
        """The real path of ``path`` if it lies under the root and nothing on the way is hidden."""
        root = os.path.realpath(self.directory)
        real = os.path.realpath(path)
        relative = os.path.relpath(real, root)
        hidden = any(part.startswith(".") for part in Path(relative).parts)
        return None if relative.startswith(os.pardir) or hidden else real

    def send_head(self) -> Any:
        """Answer 404 unless the path is a regular file under the root, or a submission's folder
        (listed by :meth:`list_directory`)."""
        if urllib.parse.urlsplit(self.path).path == "/":  # the boards' page, one click saved
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", f"/{SITE}/{INDEX}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        real = self._inside(self.translate_path(self.path))
        is_entry = real is not None and os.path.isfile(os.path.join(real, METADATA_FILE))
        if real is None or not (os.path.isfile(real) or (is_entry and self.path.endswith("/"))):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path: Any) -> Any:
        """A submission's files: the regular files under the root only, by name."""
        names = sorted(
            name
            for name in os.listdir(path)
            if (inside := self._inside(os.path.join(path, name))) is not None
            and os.path.isfile(inside)
            and not os.path.islink(os.path.join(path, name))
        )
        title = html.escape(urllib.parse.unquote(self.path))
        items = "".join(
            f'<li><a href="{urllib.parse.quote(name)}">{html.escape(name)}</a></li>'
            for name in names
        )
        page = (
            f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"</head><body><h1>{title}</h1><ul>{items}</ul></body></html>\n"
        ).encode()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        return io.BytesIO(page)


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
    try:
        return ThreadingHTTPServer((host, port), handler)
    except OSError as error:
        raise ValueError(bind_problem(host, port, error)) from None


def site_url(server: ThreadingHTTPServer) -> str:
    """The address of the page a server from :func:`make_server` serves."""
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/{SITE}/{INDEX}"
