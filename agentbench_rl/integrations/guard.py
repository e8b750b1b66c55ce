"""The limits a public port needs, in front of any served env's app (OpenEnv's, the Open Reward
Standard's): ASGI middleware, so each protocol's own app stays as its SDK builds it.

- with a ``token``, every route and the WebSocket handshake need ``Authorization: Bearer
  <token>`` or ``X-API-Key: <token>`` (the Open Reward Standard's clients send that one; 401 /
  close 1008 otherwise; compared in constant time);
- a request body of at most ``limit`` bytes, whole within ``body_timeout`` seconds (413 and 408,
  before the app reads any of it); a WebSocket message of at most ``limit`` bytes (close 1009);
- a WebSocket message that is JSON but not an object gets an error answer and the session goes
  on;
- a protocol hook (``sessions``) may refuse a request that would open a session past its limit,
  and watch the answers to those it lets in;
- each request's head (its line and headers) whole within ``body_timeout`` seconds too, which
  uvicorn does not bound (:func:`head_deadline_protocol`; a client dripping its headers held a
  connection forever).

Everything it refuses is one line to the client and nothing in the server's log.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the servers' extra: this module is imported where it may be missing
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbench_rl.envs.remote import TOKEN_VARIABLE


def server_token(given: str | None = None) -> str | None:
    """The token a server requires: ``given`` (``--token``), else ``AGENTBENCH_SERVER_TOKEN``,
    else none; ``ValueError`` for an empty ``--token`` (which would silently mean none).

    Example:
        >>> server_token("")
        Traceback (most recent call last):
        ...
        ValueError: --token '' is empty: omit --token to serve without one
    """
    if given is not None and not given.strip():
        raise ValueError(f"--token {given!r} is empty: omit --token to serve without one")
    return given or os.environ.get(TOKEN_VARIABLE) or None


def check_session_limits(max_sessions: int, max_detached_sessions: int) -> None:
    """``ValueError`` for detached sessions beyond the sessions they are counted in.

    Example:
        >>> check_session_limits(4, 100)
        Traceback (most recent call last):
        ...
        ValueError: --max-detached-sessions 100 is over --max-sessions 4, of which they are a part
    """
    if max_detached_sessions > max_sessions:
        raise ValueError(
            f"--max-detached-sessions {max_detached_sessions} is over --max-sessions "
            f"{max_sessions}, of which they are a part"
        )


def head_deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11) with a deadline on each request's head: a connection
    whose request line and headers have not all arrived ``seconds`` after it opened, or after its
    previous answer, is closed. uvicorn bounds the time between requests only once a first
    answer went out, and the body's deadline (:class:`Guard`) starts after the head."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadline(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _expire(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # a whole head arrived: the body's own deadline takes over

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._disarm()
            super().handle_websocket_upgrade(event)

        def on_response_complete(self) -> None:
            self._arm()  # before the next pipelined request is read (it disarms again)
            super().on_response_complete()

    return HeadDeadline


class SessionHook(Protocol):
    """What a protocol tells the guard of its sessions (see the module docstring)."""

    def refusal(self, scope: Scope, body: bytes) -> dict[str, Any] | None:
        """The JSON answer refusing this request (``None``: let it in)."""

    def remember(self, scope: Scope, body: bytes, send: Send) -> Send:
        """``send``, watching the answer to a request let in."""


class Guard:
    """ASGI middleware: the token, the bounded and timed bodies and messages, and the
    protocol's session hook (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        body_timeout: float,
        token: str | None,
        sessions: SessionHook | None = None,
    ) -> None:
        self.app, self.limit, self.body_timeout = app, limit, body_timeout
        self.token, self.sessions = token, sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        headers = dict(scope.get("headers") or [])
        bearer = hmac.compare_digest(
            headers.get(b"authorization", b""), f"Bearer {self.token}".encode()
        )
        key = hmac.compare_digest(headers.get(b"x-api-key", b""), self.token.encode())
        return bearer or key

    # ------------------------------------------------------------------ HTTP
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._authorised(scope):
            await answer(send, 401, "a bearer token is required (Authorization: Bearer ...)")
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.limit:
            await answer(send, 413, f"request body over {self.limit} bytes")
            return
        try:
            body = await asyncio.wait_for(self._read_body(receive), self.body_timeout)
        except _TooLarge:
            await answer(send, 413, f"request body over {self.limit} bytes")
            return
        except TimeoutError:
            await answer(send, 408, f"request body not complete within {self.body_timeout:g} s")
            return
        except _Gone:
            return
        if self.sessions is not None:
            refusal = self.sessions.refusal(scope, body)
            if refusal is not None:
                await send_json(send, refusal.pop("status", 200), refusal)
                return
            send = self.sessions.remember(scope, body, send)
        await self.app(scope, _replay(body), send)

    async def _read_body(self, receive: Receive) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # ------------------------------------------------------------------ WebSocket
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.websockets import WebSocketDisconnect

        if not self._authorised(scope):
            await receive()  # the handshake
            await send({"type": "websocket.close", "code": 1008})  # refused: 403
            return

        async def checked() -> Message:
            while True:
                message = await receive()
                text = message.get("text")
                data = message.get("bytes") or (text.encode() if text else b"")
                if len(data) > self.limit:
                    raise _TooLarge
                if message["type"] != "websocket.receive" or not data:
                    return message
                try:
                    parsed = json.loads(data)
                except ValueError:
                    return message  # the protocol answers its own invalid-JSON error
                if isinstance(parsed, dict):
                    return message
                reason = f"a message must be a JSON object, not a {type(parsed).__name__}"
                error = {"type": "error", "data": {"message": reason, "code": "INVALID_JSON"}}
                await send({"type": "websocket.send", "text": json.dumps(error)})

        try:
            await self.app(scope, checked, send)
        except WebSocketDisconnect:
            return
        except _TooLarge:
            await send({"type": "websocket.close", "code": 1009})


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the app asks again only to see a disconnect
        return {"type": "http.disconnect"}

    return receive


async def send_json(send: Send, status: int, content: Mapping[str, object]) -> None:
    """One JSON answer."""
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def answer(send: Send, status: int, line: str) -> None:
    """One line, as FastAPI's errors carry it (``{"detail": line}``)."""
    await send_json(send, status, {"detail": line})
