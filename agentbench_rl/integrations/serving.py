"""Running a served env's app: uvicorn with the guard's head deadline, in a thread for tests and
benches or in the foreground for ``serve-env``, the same way for every protocol (OpenEnv's, the
Open Reward Standard's).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from agentbench_rl.core.net import free_port, listening_socket
from agentbench_rl.integrations.guard import head_deadline_protocol

#: The port ``serve-env`` binds unless told otherwise.
DEFAULT_PORT = 8000


def uvicorn_server(
    app: Any, host: str, port: int, log_level: str, body_timeout: float, **config: Any
) -> Any:
    """uvicorn serving ``app``, each request's head due within ``body_timeout`` seconds as its
    body is (``config``: more of ``uvicorn.Config``'s settings)."""
    import uvicorn

    http = head_deadline_protocol(body_timeout)
    settings = uvicorn.Config(app, host=host, port=port, log_level=log_level, http=http, **config)
    return uvicorn.Server(settings)


@contextlib.contextmanager
def running(make: Callable[[int], Any], what: str) -> Iterator[int]:
    """The server ``make(port)`` builds on a free port of 127.0.0.1, in a thread of this
    process, for as long as the ``with`` block runs; yields the port (``ConnectionError`` when
    it does not start)."""
    port = free_port()
    server = make(port)
    thread = threading.Thread(target=server.run, name=f"agentbench-{what}", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise ConnectionError(f"the {what} server did not start on port {port}")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def serve_until_stopped(
    server: Any,
    host: str,
    port: int,
    url: Callable[[int], str],
    ready: Callable[[str], None] | None,
) -> None:
    """Bind ``host:port`` first (a taken port or a foreign host is one line before anything is
    served), call ``ready`` with the URL, then serve until interrupted."""
    listener = listening_socket(host, port)
    if ready is not None:
        ready(url(listener.getsockname()[1] if port == 0 else port))
    server.run(sockets=[listener])
