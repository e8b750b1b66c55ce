"""Local networking helpers: one free port for a server started on this machine."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port of ``host`` that nothing listens on now (the OS picks it; a server started
    right after may take it).

    Example:
        >>> 0 < free_port() < 65536
        True
    """
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
