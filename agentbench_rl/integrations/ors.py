"""Our envs behind the Open Reward Standard: ``agentbench-rl serve-env --protocol ors``.

The app is the ``ors-sdk``'s own (``ors.Server``: HTTP with server-sent events, ``/{env}/splits``,
``/{env}/tasks``, a session per task made by ``/create`` and played by ``/{env}/call``); this
module gives it the env, as an ``ors.Environment``:

- **splits and tasks**: the served split (``serve-env --split``), its task list from the pinned
  split (``{"task_id": ..., "split": ...}`` per task; a split without a fixed list, Sokoban's
  ``train``, answers ``get_task(split, n)`` with ``train-n`` and lists nothing);
- **a session per (task, seed)**: the task spec names the task and, optionally, the reset seed
  (``{"task_id": "test-0003", "seed": 12}``; the harness sends ``episode_seed(seed, task)``);
  the session's env is made and reset when the session is set up;
- **the prompt** is the first observation; **the tool** ``act`` takes one action (the env's
  action text; ``admissible_actions`` in the answer's metadata lists the valid ones) and answers
  the next observation with the reward and ``finished`` inline, and the whole step in
  ``metadata``: the wire fields of :mod:`agentbench_rl.envs.remote` (the observation's text and
  frame, reward, terminated, truncated, the env's whole ``info``: hashes, canonical action,
  validity), so a client can play the episode exactly as a local one (``eval --env-server
  ors+http://...``). ``expert`` answers the env's expert move (for reference agents);
- **limits**: at most ``max_sessions`` sessions at once (a session past that is refused at
  ``/create`` with a 503 and one line); session ids issued by the server only, and a ping that
  does not keep an idle session (:class:`SessionGate`); the token, bounded and timed heads and
  bodies of :mod:`agentbench_rl.integrations.guard`; a step after the end is the tool's answer
  (``refused`` in its metadata), a bad task the setup's one-line error and one line in the
  server's log, never the server's end.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, TypedDict, Unpack

# The SDK logs every request at info level, and each failed setup as three errors with their
# tracebacks (read when it is imported): a server of ours logs one line per refused session
# itself (ServedTask.setup), as its OpenEnv server does.
os.environ.setdefault("ORS_LOG_LEVEL", "CRITICAL")

from ors import Environment, Server, TextBlock, ToolOutput, tool
from ors.types import ImageBlock, Split
from pydantic import BaseModel, Field
from starlette.types import Message, Scope, Send

from agentbench_rl.core.text import printable
from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.remote import PASSED_ERRORS, encode_step
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.integrations.guard import Guard
from agentbench_rl.integrations.serving import (
    DEFAULT_PORT,
    running,
    serve_until_stopped,
    uvicorn_server,
)

DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
DEFAULT_BODY_TIMEOUT_S = 10.0
MAX_ACTION_CHARS = 4096
#: One line per refused session (the SDK's own logs are silenced above).
LOG = logging.getLogger("agentbench_rl.serve")
#: ORS's split types, by our split names (anything else is a validation split).
SPLIT_TYPES = {"train": "train", "test": "test"}


class Act(BaseModel):
    """One action: the raw text the env's ``step`` takes."""

    action: str = Field(max_length=MAX_ACTION_CHARS)


class ServedTask(Environment):
    """One session: an env of the served spec, reset on the session's task and seed.
    :func:`ors_environment_class` binds the spec (a class per env, as ORS names envs by class)."""

    spec: ClassVar[EnvSpec]
    max_sessions: ClassVar[int]
    live: ClassVar[set[int]]  # the sessions set up and not torn down
    turns: ClassVar[threading.Lock]  # held around every env call of a thread-unsafe env

    def __init__(self, task_spec: Any = None, secrets: Any = None) -> None:
        super().__init__(task_spec=dict(task_spec or {}), secrets=dict(secrets or {}))
        self.env: TextAgentEnv[Any] | None = None
        self.first: dict[str, Any] = {}

    @classmethod
    def name(cls) -> str:
        return cls.spec.name

    @classmethod
    def list_splits(cls) -> list[Split]:
        split = cls.spec.split
        return [Split(name=split, type=SPLIT_TYPES.get(split, "validation"))]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        if not cls.spec.fixed():
            raise NotImplementedError(f"split '{split}' has no fixed task list")
        return [{"task_id": task, "split": split} for task in cls.spec.tasks()]

    @classmethod
    async def num_tasks(cls, split: str) -> int:
        return len(cls.list_tasks(split))

    @classmethod
    async def get_task(cls, split: str, index: int) -> dict[str, Any]:
        if cls.spec.fixed():
            tasks = cls.spec.tasks()
            if not 0 <= index < len(tasks):
                raise IndexError(index)
            return {"task_id": tasks[index], "split": split}
        if index < 0:
            raise IndexError(index)
        return {"task_id": f"{split}-{index}", "split": split}

    def setup(self) -> None:
        """Make the env and reset it on the task (``ValueError`` in one line for a bad task
        spec, an unknown task or a full server, and that line in the server's log)."""
        try:
            self._setup()
        except Exception as problem:
            LOG.warning("session refused: %s", printable(str(problem))[:300])
            raise

    def _setup(self) -> None:
        spec = self.task_spec
        unknown = sorted(set(spec) - {"task_id", "split", "seed"})
        if unknown or not isinstance(spec.get("task_id"), str):
            raise ValueError(
                "a task spec is {'task_id': str, 'split'?: str, 'seed'?: int}, got "
                f"{sorted(spec)}"
            )
        seed = spec.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be a whole number, got {seed!r}")
        if spec.get("split", self.spec.split) != self.spec.split:
            raise ValueError(f"this server serves split '{self.spec.split}', not {spec['split']!r}")
        with self.turns:
            if len(self.live) >= self.max_sessions:
                raise ValueError(f"the server holds {self.max_sessions} sessions: close one first")
            self.live.add(id(self))
        try:
            with self.turns:
                self.env = self.spec.make()
                observation, info = self.env.reset(seed=seed, options={"task_id": spec["task_id"]})
                self.first = self._fields(observation, 0.0, False, False, info)
        except Exception:
            self.teardown()
            raise

    def teardown(self) -> None:
        with self.turns:
            self.live.discard(id(self))
            if self.env is not None:
                self.env.close()
                self.env = None

    def get_prompt(self) -> list[TextBlock | ImageBlock]:
        """The first observation (its text, its frame), the whole first answer in ``detail``
        with what is served (``served``: the step limit and the env options, which a client
        checks against its own)."""
        assert self.env is not None
        served = {"max_steps": self.env.max_steps, "options": dict(self.spec.kwargs)}
        return self._blocks({**self.first, "served": served})

    @tool
    def act(self, params: Act) -> ToolOutput:
        """Take one action: the env's action text (the answer's metadata lists the admissible
        actions). Answers the next observation, the reward, whether the episode finished, and
        the whole step in metadata (hashes, canonical action, validity)."""
        assert self.env is not None
        with self.turns:
            try:
                fields = self._fields(*self.env.step(params.action))
            except tuple(PASSED_ERRORS.values()) as refusal:
                return _refused(refusal)
        finished = bool(fields["terminated"] or fields["truncated"])
        return ToolOutput(
            blocks=self._blocks(fields), metadata=fields, reward=fields["reward"], finished=finished
        )

    @tool
    def expert(self) -> ToolOutput:
        """The env's expert move now (for reference agents; a trained agent does not call it)."""
        assert self.env is not None
        with self.turns:
            try:
                move = self.env.expert_action()
            except tuple(PASSED_ERRORS.values()) as refusal:
                return _refused(refusal)
        return ToolOutput(blocks=[TextBlock(text=move)], metadata={"expert_action": move})

    def _fields(
        self, observation: Any, reward: float, terminated: bool, truncated: bool, info: Any
    ) -> dict[str, Any]:
        assert self.env is not None
        choices = [] if self.env.episode_over else self.env.user_choices()
        return encode_step(observation, reward, terminated, truncated, info, choices)

    def _blocks(self, fields: dict[str, Any]) -> list[TextBlock | ImageBlock]:
        blocks: list[TextBlock | ImageBlock] = [TextBlock(text=fields["text"], detail=fields)]
        if fields.get("frame") is not None:
            blocks.append(ImageBlock(data=_png(fields["frame"]), mimeType="image/png"))
        return blocks


def _refused(refusal: Exception) -> ToolOutput:
    """The env's refusal (an action after the end, an expert without a move) as the tool's
    answer, as a tool's error goes back to an agent: its text, and ``refused`` in the metadata
    (the error's type and line), from which our client raises it again. Not an exception: the
    SDK would log a client's mistake as a server error, with its traceback."""
    name = type(refusal).__name__
    return ToolOutput(
        blocks=[TextBlock(text=f"{name}: {refusal}")],
        metadata={"refused": {"error": name, "message": str(refusal)}},
    )


def _png(frame: dict[str, Any]) -> str:
    """A wire frame (raw uint8, base64, with its shape) as a base64 PNG, for an image block."""
    import numpy as np
    from PIL import Image

    pixels = np.frombuffer(base64.b64decode(frame["data"]), dtype=np.uint8).reshape(frame["shape"])
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def ors_environment_class(spec: EnvSpec, max_sessions: int = DEFAULT_MAX_SESSIONS) -> type:
    """The ``ors.Environment`` class of ``spec``'s env."""
    thread_safe = env_class(spec.name).thread_safe
    attributes = {
        "spec": spec,
        "max_sessions": max_sessions,
        "live": set(),
        # a thread-safe env still counts its sessions under a lock
        "turns": threading.Lock() if thread_safe else threading.RLock(),
    }
    return type(spec.name.title().replace("_", ""), (ServedTask,), attributes)


class SessionGate:
    """The guard's hook on the SDK's sessions:

    - ``/create`` past ``max_sessions`` is a 503 with one line, before the SDK makes a session
      that would fail its setup (the count is the SDK's own session table, so a session whose
      setup failed holds its slot until its client deletes it, as ours do at once);
    - session ids are the server's: ``/create`` is refused (403) under an ``X-Session-ID`` this
      server did not issue from ``/create_session`` (the SDK's and openreward's clients ask for
      one first), or issued once already, so no client names, and so plays or closes, a
      session another made; the last :data:`ISSUED_IDS` ids issued are kept;
    - a ``/ping`` does not keep a session: the SDK's reaper deletes a session 15 minutes after
      its last request, and a ping no longer counts as one (four pinged, idle sessions locked
      a server of four), only requests that play.
    """

    def __init__(
        self, environment: type[ServedTask], sessions: dict[str, Any], last_seen: dict[str, float]
    ) -> None:
        self.environment, self.sessions, self.last_seen = environment, sessions, last_seen
        self.issued: OrderedDict[str, None] = OrderedDict()
        self.played: dict[str, float] = {}

    def refusal(self, scope: Scope, body: bytes) -> dict[str, Any] | None:
        if scope["path"] != "/create" or scope["method"] != "POST":
            return None
        limit = self.environment.max_sessions
        if max(len(self.sessions), len(self.environment.live)) >= limit:
            return {"status": 503, "detail": f"the server holds {limit} sessions: close one first"}
        sid = _session_id(scope)
        if sid is None or sid not in self.issued:
            return {
                "status": 403,
                "detail": "this server issues session ids (POST /create_session): "
                f"X-Session-ID {printable(sid or '')[:64]!r} is not one it issued",
            }
        del self.issued[sid]
        return None

    def remember(self, scope: Scope, body: bytes, send: Send) -> Send:
        sid, path = _session_id(scope), scope["path"]
        if path == "/create_session":
            return self._issuing(send)
        if path == "/ping" and sid:
            return self._not_kept_by(sid, send)
        if sid:
            self.played[sid] = time.monotonic()
            if len(self.played) > 4 * ISSUED_IDS:  # forget the sessions gone
                self.played = {k: v for k, v in self.played.items() if k in self.sessions}
        return send

    def _issuing(self, send: Send) -> Send:
        async def watched(message: Message) -> None:
            if message["type"] == "http.response.body":
                for sid in re.findall(rb"data: ?([0-9a-f-]{36})", message.get("body", b"")):
                    self.issued[sid.decode()] = None
                    while len(self.issued) > ISSUED_IDS:
                        self.issued.popitem(last=False)
            await send(message)

        return watched

    def _not_kept_by(self, sid: str, send: Send) -> Send:
        async def watched(message: Message) -> None:
            await send(message)
            answered = message["type"] == "http.response.body" and not message.get("more_body")
            if answered and sid in self.last_seen:  # the SDK set it to now: back to the last play
                self.last_seen[sid] = self.played.get(sid, self.last_seen[sid])

        return watched


#: The session ids issued by ``/create_session`` and not yet used, kept at most.
ISSUED_IDS = 1024


def _session_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"x-session-id":
            return str(value.decode("latin-1").strip())
    return None


def create_ors_app(
    spec: EnvSpec,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT_S,
    token: str | None = None,
) -> Any:
    """The ORS app of ``spec``'s env behind the guard (the env is made once here, so a bad
    name, split or option fails before the port opens)."""
    for name, value in (("max_sessions", max_sessions), ("max_message_bytes", max_message_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if not body_timeout > 0:
        raise ValueError(f"body_timeout must be > 0 seconds, got {body_timeout!r}")
    if token is not None and not token:
        raise ValueError("token must not be empty")
    spec.make().close()
    environment = ors_environment_class(spec, max_sessions)
    server = Server([environment], return_errors="exception")
    # ors-sdk 0.1 keeps its sessions and their last requests in these tables (pinned <0.2 in
    # the openenv extra)
    gate = SessionGate(environment, server._active_envs, server._last_ping)
    return Guard(server.app, max_message_bytes, body_timeout, token, gate)


def _uvicorn_server(spec: EnvSpec, host: str, port: int, log_level: str, limits: OrsLimits) -> Any:
    timeout = limits.get("body_timeout", DEFAULT_BODY_TIMEOUT_S)
    return uvicorn_server(create_ors_app(spec, **limits), host, port, log_level, timeout)


class OrsLimits(TypedDict, total=False):
    """The limits :func:`create_ors_app` takes (each left out: its default)."""

    max_sessions: int
    max_message_bytes: int
    body_timeout: float
    token: str | None


@contextlib.contextmanager
def running_ors_server(spec: EnvSpec, **limits: Unpack[OrsLimits]) -> Iterator[str]:
    """An ORS server of ``spec``'s env on a free port of 127.0.0.1, in a thread, for as long as
    the ``with`` block runs; yields its URL (``ors+http://127.0.0.1:PORT``, what ``eval
    --env-server`` takes)."""

    def make(port: int) -> Any:
        return _uvicorn_server(spec, "127.0.0.1", port, "error", limits)

    with running(make, f"{spec.name} ORS") as port:
        yield f"ors+http://127.0.0.1:{port}"


def serve_ors(
    spec: EnvSpec,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    ready: Callable[[str], None] | None = None,
    **limits: Unpack[OrsLimits],
) -> None:
    """Serve ``spec``'s env over ORS until interrupted (the app built and the address bound
    before ``ready(url)`` is called)."""
    server = _uvicorn_server(spec, host, port, "warning", limits)
    serve_until_stopped(server, host, port, lambda bound: f"ors+http://{host}:{bound}", ready)
