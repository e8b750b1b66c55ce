"""Local networking helpers: a free port, and whether a server can bind an address (asked
before it says it serves, so a taken port or a foreign host is one line, not a traceback)."""

from __future__ import annotations

import errno
import ipaddress
import socket

#: The hosts that only this machine reaches.
LOOPBACK_NAMES = ("localhost",)


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


def bind_problem(host: str, port: int, error: OSError) -> str:
    """What to tell a user whose server could not bind ``host:port``.

    Example:
        >>> bind_problem("127.0.0.1", 8000, OSError(errno.EADDRINUSE, "Address in use"))
        'port 8000 on 127.0.0.1 is taken; pass another --port (--port 0: a free one)'
    """
    if error.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is taken; pass another --port (--port 0: a free one)"
    if error.errno == errno.EADDRNOTAVAIL or isinstance(error, socket.gaierror):
        return f"cannot serve on {host}: not an address of this machine (--host)"
    if error.errno == errno.EACCES:
        return f"cannot serve on port {port}: ports below 1024 need privileges (--port)"
    return f"cannot serve on {host}:{port} ({error.strerror or error})"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (``SO_REUSEADDR``, as servers bind) for a server
    to take over, so the address is checked, and held, before the server says it serves;
    ``ValueError`` with :func:`bind_problem`'s line when it cannot be bound.

    Example:
        >>> listening_socket("127.0.0.1", 0).close()
        >>> listening_socket("no-such-host.invalid", 8000)
        Traceback (most recent call last):
        ...
        ValueError: cannot serve on no-such-host.invalid: not an address of this machine (--host)
    """
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        )[0]
        # the protocol too: asyncio sets TCP_NODELAY only on sockets that name IPPROTO_TCP, and
        # without it a reply written in two parts waits 40 ms for the peer's delayed ACK
        listener = socket.socket(family, kind, protocol)
    except OSError as error:
        raise ValueError(bind_problem(host, port, error)) from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        listener.close()
        raise ValueError(bind_problem(host, port, error)) from None
    return listener


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach a server bound to ``host``.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
