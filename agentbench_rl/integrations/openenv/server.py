"""Our envs behind OpenEnv's server: ``agentbench-rl serve-env --env sokoban --split test``.

The app is openenv-core's own (``HTTPEnvServer`` and its routes: ``/ws`` sessions with their
``reset``/``step``/``state`` messages, the stateless HTTP ``/reset``, ``/step``, ``/state``,
``/health``, ``/schema``); this module gives it the env, as an OpenEnv ``Environment`` with
typed ``Action``/``Observation``/``State`` models, and the limits a public port needs:

- one env instance per WebSocket session, at most ``max_sessions`` at once (a session past
  that gets OpenEnv's ``CAPACITY_REACHED`` error), each closed after ``idle_timeout`` seconds
  without a reset or step;
- a message or request body of at most ``max_message_bytes``;
- a bad message (malformed JSON, an unknown task id, a step after the episode ended) gets an
  error answer in its own session; nothing a client sends stops the server or another session.

What an answer carries is the wire format of :mod:`agentbench_rl.envs.remote`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
from pydantic import Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from agentbench_rl.core.net import free_port
from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.remote import PASSED_ERRORS, encode_step
from agentbench_rl.envs.spec import EnvSpec

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20  # an action is at most 4,096 characters; a frame ~40 kB


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


def _passed(error: Exception) -> RuntimeError:
    """The env's refusal, named so the client raises it again (``PASSED_ERRORS``)."""
    return RuntimeError(f"{type(error).__name__}: {error}")


class ServedEnv(Environment[Command, StepAnswer, ServedState]):
    """One of our envs as an OpenEnv ``Environment``; :func:`served_env_class` binds the spec."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True  # every session has its own env
    spec: ClassVar[EnvSpec]
    turns: ClassVar[contextlib.AbstractContextManager[Any]]  # held around every env call

    def __init__(self) -> None:
        super().__init__()
        with self.turns:
            self.env: TextAgentEnv[Any] = self.spec.make()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **unknown: Any,
    ) -> StepAnswer:
        """``env.reset(seed=seed, options={"task_id": task_id})``; OpenEnv's ``episode_id`` is
        not used (an episode is named by its task and seed)."""
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


class BodyLimit:
    """ASGI middleware: a request body or WebSocket message over ``limit`` bytes is refused
    (413, or the socket closed with 1009) before the app reads it whole; and a client that
    closed its socket first is not an error (OpenEnv's session closes the socket again after
    the client's ``close`` message, which raises once the client has gone)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http":
            declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
            if declared.isdigit() and int(declared) > self.limit:
                await _refuse_http(send)
                return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            body = message.get("body") or message.get("bytes") or message.get("text") or b""
            seen = len(body) if scope["type"] == "websocket" else seen + len(body)
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, bounded, send)
        except WebSocketDisconnect:
            return
        except _TooLarge:
            if scope["type"] == "http":
                await _refuse_http(send)
            else:
                await send({"type": "websocket.close", "code": 1009})


class _TooLarge(Exception):
    pass


async def _refuse_http(send: Send) -> None:
    await send({"type": "http.response.start", "status": 413, "headers": []})
    await send({"type": "http.response.body", "body": b"request body too large"})


def create_server_app(
    spec: EnvSpec,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> ASGIApp:
    """OpenEnv's app for ``spec``'s env, with the limits (module docstring).

    The env is made once here, so a bad name, split or option fails before the port opens.
    """
    for name, value in (("max_sessions", max_sessions), ("max_message_bytes", max_message_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if not idle_timeout > 0:
        raise ValueError(f"idle_timeout must be > 0 seconds, got {idle_timeout!r}")
    spec.make().close()
    from fastapi import FastAPI

    app = FastAPI(title=f"agentbench-rl {spec.name}/{spec.split}")
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout)
    server = HTTPEnvServer(served_env_class(spec), Command, StepAnswer, concurrency_config=config)
    server.register_routes(app)
    return BodyLimit(app, max_message_bytes)


@contextlib.contextmanager
def running_server(spec: EnvSpec, **limits: Any) -> Iterator[str]:
    """A server of ``spec``'s env on a free port of 127.0.0.1, in a thread of this process, for
    as long as the ``with`` block runs; yields its URL (the tests' and ``bench envs``' server).

    Example:
        >>> with running_server(EnvSpec(name="sokoban", split="test")) as url:
        ...     env = EnvSpec(name="sokoban", split="test").make(server=url)
        ...     env.reset(seed=0, options={"task_id": "test-0000"})[1]["task_id"]
        'test-0000'
    """
    port = free_port()
    server = _uvicorn_server(spec, "127.0.0.1", port, "error", limits)
    thread = threading.Thread(target=server.run, name="agentbench-serve-env", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the server of {spec.name} did not start on port {port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def serve(
    spec: EnvSpec,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    **limits: Any,
) -> None:
    """Serve ``spec``'s env until interrupted (uvicorn, one process)."""
    _uvicorn_server(spec, host, port, "warning", limits).run()


def _uvicorn_server(
    spec: EnvSpec, host: str, port: int, log_level: str, limits: dict[str, Any]
) -> Any:
    """uvicorn serving :func:`create_server_app` with ``limits``; its WebSocket frames are
    bounded by the same message size as the app's."""
    import uvicorn

    app = create_server_app(spec, **limits)
    size = limits.get("max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES)
    config = uvicorn.Config(app, host=host, port=port, ws_max_size=size, log_level=log_level)
    return uvicorn.Server(config)


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
