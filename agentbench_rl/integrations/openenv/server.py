"""Our envs behind OpenEnv's server: ``agentbench-rl serve-env --env sokoban --split test``.

The app is openenv-core's own (``HTTPEnvServer`` and its routes: ``/ws`` sessions with their
``reset``/``step``/``state`` messages, the stateless HTTP ``/reset``, ``/step``, ``/state``,
``/health``, ``/schema``, and ``/mcp``); this module gives it the env, as an OpenEnv
``Environment`` with typed ``Action``/``Observation``/``State`` models, and the limits a public
port needs:

- one env instance per session, at most ``max_sessions`` at once (a session past that gets
  OpenEnv's ``CAPACITY_REACHED`` error), each closed after ``idle_timeout`` seconds without a
  reset or a step: only playing renews a session, never a keep-alive (``state``, ``tools/list``);
- sessions made over HTTP (``POST /mcp`` ``openenv/session/create``, no connection holds them)
  count against their own small limit, ``max_detached_sessions``, so no client without a
  connection can lock the WebSocket clients out, and they expire as idle ones do;
- with a ``token`` (``--token`` or ``AGENTBENCH_SERVER_TOKEN``), every route and the WebSocket
  handshake need ``Authorization: Bearer <token>`` (our clients send it from the same variable);
- a request body or WebSocket message of at most ``max_message_bytes``, and a request body
  whole within ``body_timeout`` seconds (413 and 408 otherwise, before the app reads any of it);
- a bad message (not JSON, not a JSON object, an unknown task id, a step before a reset or after
  the episode ended) gets an error answer, over HTTP a 4xx with one line: nothing a client sends
  stops the server, another session or its own, and nothing it sends logs a traceback.

What an answer carries is the wire format of :mod:`agentbench_rl.envs.remote`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, TypedDict, Unpack

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Scope, Send

from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.remote import PASSED_ERRORS, encode_step
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.integrations.guard import Guard, check_session_limits
from agentbench_rl.integrations.serving import (
    DEFAULT_PORT,
    running,
    serve_until_stopped,
    uvicorn_server,
)

DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_DETACHED_SESSIONS = 4
DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20  # an action is at most 4,096 characters; a frame ~40 kB
DEFAULT_BODY_TIMEOUT_S = 10.0


class Command(Action):
    """What the agent says: the raw text the env's ``step`` takes."""

    command: str


class StepAnswer(Observation):
    """One answer of the env: the wire fields of :func:`~agentbench_rl.envs.remote.encode_step`
    (``reward`` is OpenEnv's own field; its ``done`` is terminated or truncated)."""

    text: str
    frame: dict[str, Any] | None = None
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    user_choices: list[str] = Field(default_factory=list)


class ServedState(State):
    """What the session's env is, and where its episode stands."""

    env: str
    split: str
    max_steps: int
    options: dict[str, Any]
    task_id: str | None = None
    observation_text: str | None = None
    expert_action: str | None = None  # computed when asked: a planner's move can take seconds


#: The env's refusals the client raises again as their own type.
REFUSALS = tuple(PASSED_ERRORS.values())


class Refused(RuntimeError):
    """The env refused what a client sent, named so the client raises it again
    (``PASSED_ERRORS``); over plain HTTP it is a 400 with the same line."""


def _passed(error: Exception) -> Refused:
    return Refused(f"{type(error).__name__}: {error}")


class ServedEnv(Environment[Command, StepAnswer, ServedState]):
    """One of our envs as an OpenEnv ``Environment``; :func:`served_env_class` binds the spec."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True  # every session has its own env
    spec: ClassVar[EnvSpec]
    turns: ClassVar[contextlib.AbstractContextManager[Any]]  # held around every env call

    def __init__(self) -> None:
        super().__init__()
        with self.turns:
            self.env: TextAgentEnv[Any] = self.spec.make()
        #: When this session last played (a reset or a step): what keeps it alive.
        self.last_played = time.time()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **unknown: Any,
    ) -> StepAnswer:
        """``env.reset(seed=seed, options={"task_id": task_id})``; OpenEnv's ``episode_id`` is
        not used (an episode is named by its task and seed)."""
        self.last_played = time.time()
        try:
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
                raise ValueError(f"seed must be a whole number, got {seed!r}")
            # Other keywords are reset options, which the env checks as it does locally.
            options = {"task_id": task_id, **unknown} if task_id is not None or unknown else None
            with self.turns:
                observation, info = self.env.reset(seed=seed, options=options)
                return self._answer(observation, 0.0, False, False, info)
        except REFUSALS as error:
            raise _passed(error) from error

    def step(self, action: Command, timeout_s: float | None = None, **_: Any) -> StepAnswer:
        self.last_played = time.time()
        try:
            with self.turns:
                return self._answer(*self.env.step(action.command))
        except REFUSALS as error:
            raise _passed(error) from error

    def _answer(
        self, observation: Any, reward: float, terminated: bool, truncated: bool, info: Any
    ) -> StepAnswer:
        """The wire's answer, with the choices a user has now (called holding ``turns``)."""
        choices = [] if self.env.episode_over else self.env.user_choices()
        fields = encode_step(observation, reward, terminated, truncated, info, choices)
        return StepAnswer(**fields, done=terminated or truncated)

    @property
    def state(self) -> ServedState:
        with self.turns:
            return self._state()

    def _state(self) -> ServedState:
        live = self.env.task_id is not None and not self.env.episode_over
        expert = None
        if live:
            try:
                expert = self.env.expert_action()
            except (NotImplementedError, ValueError):
                expert = None
        return ServedState(
            env=self.spec.name,
            split=self.spec.split,
            max_steps=self.env.max_steps,
            options=dict(self.spec.kwargs),
            task_id=self.env.task_id,
            step_count=self.env.steps,
            observation_text=self.env.observation_text() if self.env.task_id else None,
            expert_action=expert,
        )

    def close(self) -> None:
        with self.turns:
            self.env.close()


def served_env_class(spec: EnvSpec) -> type[ServedEnv]:
    """The ``Environment`` class of ``spec``'s env (a class, as OpenEnv's factory wants one).

    The calls of an env that is not thread-safe take one lock (OpenEnv runs sessions' steps in
    their own threads, its HTTP routes in a pool, and ``state`` on the event loop).
    """
    thread_safe = env_class(spec.name).thread_safe
    attributes = {
        "spec": spec,
        "turns": contextlib.nullcontext() if thread_safe else threading.RLock(),
    }
    return type(f"Served{spec.name.title().replace('_', '')}", (ServedEnv,), attributes)


class PlayedSessionsServer(HTTPEnvServer):
    """openenv-core's server, but a session is renewed only by playing: openenv counts any MCP
    call (``tools/list`` every few seconds) as activity, which kept a session that plays
    nothing alive past the idle timeout. The sessions made over HTTP are remembered, so the
    middleware can count them against their own limit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.detached: set[str] = set()  # sessions made by POST /mcp openenv/session/create

    def _update_session_activity(self, session_id: str, increment_step: bool = False) -> None:
        info = self._session_info.get(session_id)
        env = self._sessions.get(session_id)
        if info is None or not isinstance(env, ServedEnv):
            return
        info.last_activity_at = env.last_played  # set by reset and step only
        if increment_step:
            info.step_count += 1

    def detached_count(self) -> int:
        """The sessions made over HTTP that are still open."""
        self.detached &= set(self._sessions)
        return len(self.detached)


class DetachedSessions:
    """The guard's hook for OpenEnv's sessions made over HTTP (``POST /mcp``
    ``openenv/session/create``): they count against ``limit``, a request past it is answered
    with a JSON-RPC error, and a made session's id is remembered."""

    def __init__(self, server: PlayedSessionsServer, limit: int) -> None:
        self.server, self.limit = server, limit

    def refusal(self, scope: Scope, body: bytes) -> dict[str, Any] | None:
        """The answer refusing a session-making request past the limit (``None``: let it in)."""
        if not (scope["path"] == "/mcp" and scope["method"] == "POST" and _creates(body)):
            return None
        if self.server.detached_count() < self.limit:
            return None
        return _rpc_error(json.loads(body).get("id"), self.limit)

    def remember(self, scope: Scope, body: bytes, send: Send) -> Send:
        """``send``, noting the session id of the answer to a session-making request."""
        if not (scope["path"] == "/mcp" and scope["method"] == "POST" and _creates(body)):
            return send
        parts: list[bytes] = []

        async def remembered(message: Message) -> None:
            if message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    with contextlib.suppress(ValueError, AttributeError, TypeError):
                        made = json.loads(b"".join(parts))["result"]["session_id"]
                        self.server.detached.add(str(made))
            await send(message)

        return remembered


def _creates(body: bytes) -> bool:
    try:
        request = json.loads(body)
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("method") == "openenv/session/create"


def _rpc_error(request_id: Any, limit: int) -> dict[str, Any]:
    reason = (
        f"sessions without a connection are limited to {limit} at once; play over the "
        "WebSocket /ws, or close one (openenv/session/close)"
    )
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": reason}}


async def _refused(request: Request, error: Exception) -> JSONResponse:
    """The env's refusal on a plain HTTP route (``/step`` before ``/reset``, an unknown task):
    a 400 with its one line, no traceback."""
    return JSONResponse({"detail": str(error)}, status_code=400)


def create_server_app(
    spec: EnvSpec,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_detached_sessions: int = DEFAULT_MAX_DETACHED_SESSIONS,
    body_timeout: float = DEFAULT_BODY_TIMEOUT_S,
    token: str | None = None,
) -> ASGIApp:
    """OpenEnv's app for ``spec``'s env, with the limits (module docstring).

    The env is made once here, so a bad name, split or option fails before the port opens.
    """
    numbers = (
        ("max_sessions", max_sessions),
        ("max_message_bytes", max_message_bytes),
        ("max_detached_sessions", max_detached_sessions),
    )
    for name, value in numbers:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    for name, seconds in (("idle_timeout", idle_timeout), ("body_timeout", body_timeout)):
        if not seconds > 0:
            raise ValueError(f"{name} must be > 0 seconds, got {seconds!r}")
    if token is not None and not token:
        raise ValueError("token must not be empty")
    check_session_limits(max_sessions, max_detached_sessions)
    spec.make().close()
    from fastapi import FastAPI

    app = FastAPI(title=f"agentbench-rl {spec.name}/{spec.split}")
    app.add_exception_handler(Refused, _refused)
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout)
    server = PlayedSessionsServer(
        served_env_class(spec), Command, StepAnswer, concurrency_config=config
    )
    server.register_routes(app)
    detached = DetachedSessions(server, max_detached_sessions)
    return Guard(app, max_message_bytes, body_timeout, token, detached)


class ServerLimits(TypedDict, total=False):
    """The limits :func:`create_server_app` takes (each left out: its default)."""

    max_sessions: int
    idle_timeout: float
    max_message_bytes: int
    max_detached_sessions: int
    body_timeout: float
    token: str | None


@contextlib.contextmanager
def running_server(spec: EnvSpec, **limits: Unpack[ServerLimits]) -> Iterator[str]:
    """A server of ``spec``'s env on a free port of 127.0.0.1, in a thread of this process, for
    as long as the ``with`` block runs; yields its URL (the tests' and ``bench envs``' server).

    Example:
        >>> with running_server(EnvSpec(name="sokoban", split="test")) as url:
        ...     env = EnvSpec(name="sokoban", split="test").make(server=url)
        ...     env.reset(seed=0, options={"task_id": "test-0000"})[1]["task_id"]
        'test-0000'
    """

    def make(port: int) -> Any:
        return _uvicorn_server(spec, "127.0.0.1", port, "error", limits)

    with running(make, f"{spec.name} env") as port:
        yield f"http://127.0.0.1:{port}"


def serve(
    spec: EnvSpec,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    ready: Callable[[str], None] | None = None,
    **limits: Unpack[ServerLimits],
) -> None:
    """Serve ``spec``'s env until interrupted (uvicorn, one process). The app is built and the
    address bound first, so a bad env, option, host or a taken port is a ``ValueError`` before
    ``ready(url)`` is called (the command prints "serving ..." there), and a client may
    connect as soon as it is."""
    server = _uvicorn_server(spec, host, port, "warning", limits)
    serve_until_stopped(server, host, port, lambda bound: f"http://{host}:{bound}", ready)


def _uvicorn_server(
    spec: EnvSpec, host: str, port: int, log_level: str, limits: ServerLimits
) -> Any:
    """uvicorn serving :func:`create_server_app` with ``limits``; its WebSocket frames are
    bounded by the same message size as the app's."""
    app = create_server_app(spec, **limits)
    size = limits.get("max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES)
    timeout = limits.get("body_timeout", DEFAULT_BODY_TIMEOUT_S)
    return uvicorn_server(app, host, port, log_level, timeout, ws_max_size=size)


__all__ = [
    "Command",
    "ServedEnv",
    "ServedState",
    "StepAnswer",
    "create_server_app",
    "running_server",
    "serve",
    "served_env_class",
]
