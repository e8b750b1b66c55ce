"""A served env, played as if it were local: the client half of ``agentbench-rl serve-env``.

The server (:mod:`agentbench_rl.integrations.openenv`) puts one of our envs behind OpenEnv's
protocol: a WebSocket session per env instance whose messages are ``reset``, ``step`` and
``state``. :class:`RemoteEnv` is a Gymnasium env speaking that protocol through openenv-core's
own client (``EnvClient``), so the harness and the trainer play a served env unchanged:
``make("sokoban", split="test", server="http://127.0.0.1:8000")``.

What crosses the wire is written once, here, and read by both halves (:func:`encode_step`,
:func:`decode_step`): the observation (its text; a frame as raw ``uint8`` bytes, base64, with
its shape), the reward, ``terminated``/``truncated`` and the whole ``info`` dict. JSON keeps
every one of them exactly (strings, booleans, ints, and floats by their shortest repr), so a
served episode is the local episode, byte for byte (``tests/integrations/test_openenv.py``).

Class-level questions (the splits, a split's task ids and categories, checksums) are answered
by the local env class of the same name, as the harness asks them before anything is played;
a served env only plays. A server that requires a token (``serve-env --token``) gets it from
``AGENTBENCH_SERVER_TOKEN``; a server that stops answering mid-run is a ``ConnectionError``
naming it (the harness's journal keeps every finished episode for ``--resume``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import os
import re
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, ClassVar, TypeVar, cast

import numpy as np
from gymnasium import spaces

from agentbench_rl.core.text import printable
from agentbench_rl.envs.base import (
    EpisodeEndedError,
    StepInfo,
    StepResult,
    TextAgentEnv,
    text_space,
)
from agentbench_rl.extras import install_hint

#: The ``reset`` keywords the server takes beside OpenEnv's own ``seed`` and ``episode_id``.
RESET_KEYWORDS = ("task_id",)
#: Exceptions the server's env raises on bad input, sent as ``"<name>: <message>"`` and raised
#: again by the client as the same type, so a served env refuses what a local one refuses.
PASSED_ERRORS: dict[str, type[Exception]] = {
    "ValueError": ValueError,
    "EpisodeEndedError": EpisodeEndedError,
}
MISSING_EXTRA = f"a served env needs openenv-core: {install_hint('openenv')}"
#: The variable holding the bearer token a server requires and its clients send.
TOKEN_VARIABLE = "AGENTBENCH_SERVER_TOKEN"


class ServerGone(ConnectionError):
    """A server that stopped answering, or answers what its protocol does not (it died, the
    network did, or what listens there is not the server asked for)."""


T = TypeVar("T")


class TokenRefused(PermissionError):
    """The server refused the client's token: one line saying which variable to set."""


def encode_observation(observation: Any) -> dict[str, Any]:
    """An env's observation as the wire's fields: ``text``, and ``frame`` for an image.

    Example:
        >>> encode_observation("grid")
        {'text': 'grid', 'frame': None}
    """
    if isinstance(observation, str):
        return {"text": observation, "frame": None}
    if isinstance(observation, dict) and set(observation) == {"image", "text"}:
        image = np.ascontiguousarray(observation["image"], dtype=np.uint8)
        frame = {"shape": list(image.shape), "data": base64.b64encode(image.data).decode()}
        return {"text": observation["text"], "frame": frame}
    raise TypeError(f"cannot send an observation of type {type(observation).__name__}")


def decode_observation(fields: dict[str, Any]) -> Any:
    """The observation :func:`encode_observation` sent.

    Example:
        >>> image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
        >>> back = decode_observation(encode_observation({"image": image, "text": "t"}))
        >>> bool((back["image"] == image).all()), back["text"]
        (True, 't')
    """
    frame = fields.get("frame")
    if frame is None:
        return fields["text"]
    data = np.frombuffer(base64.b64decode(frame["data"]), dtype=np.uint8)
    return {"image": data.reshape(frame["shape"]).copy(), "text": fields["text"]}


def encode_step(
    observation: Any,
    reward: float,
    terminated: bool,
    truncated: bool,
    info: dict[str, Any],
    user_choices: Sequence[str] = (),
) -> dict[str, Any]:
    """One answer of the env (a reset has reward 0 and neither flag) as the wire's fields, with
    the choices a user has now (``env.user_choices()``: what the ``random`` agent draws from)."""
    return {
        **encode_observation(observation),
        "reward": float(reward),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "info": info,
        "user_choices": list(user_choices),
    }


def decode_step(fields: dict[str, Any]) -> StepResult:
    """``(observation, reward, terminated, truncated, info)`` from :func:`encode_step`'s fields.

    Example:
        >>> decode_step(encode_step("o", 1.0, True, False, {"won": True}))
        ('o', 1.0, True, False, {'won': True})
    """
    return (
        decode_observation(fields),
        float(fields["reward"]),
        bool(fields["terminated"]),
        bool(fields["truncated"]),
        cast(StepInfo, dict(fields["info"])),  # what the server's env returned
    )


class _EventLoop:
    """One event loop on a daemon thread for every remote env of the process, so many envs'
    requests are in flight at once (:func:`step_all`) while each env's API stays blocking."""

    _loop: ClassVar[asyncio.AbstractEventLoop | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def run(cls, coroutine: Coroutine[Any, Any, T]) -> T:
        with cls._lock:
            if cls._loop is None or not cls._loop.is_running():
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                threading.Thread(target=serve, name="agentbench-remote-envs", daemon=True).start()
                started.wait()
                cls._loop = loop
        return asyncio.run_coroutine_threadsafe(coroutine, cls._loop).result()


@functools.cache
def _client_class() -> type:
    """openenv-core's ``EnvClient`` for our wire fields (imported on first use: an extra; the
    class is made once)."""
    try:
        from openenv.core.client_types import StepResult
        from openenv.core.env_client import EnvClient
        from websockets.asyncio.client import connect
    except ImportError as missing:
        raise ImportError(MISSING_EXTRA) from missing

    class ServedEnvClient(EnvClient[str, dict[str, Any], dict[str, Any]]):
        _ws: Any  # openenv's open connection, or None

        async def connect(self) -> ServedEnvClient:
            """openenv's connection, with the server's token when one is set (its own client
            sends no headers)."""
            if self._ws is not None:
                return self
            token = os.environ.get(TOKEN_VARIABLE)
            headers = {"Authorization": f"Bearer {token}"} if token else None
            try:
                self._ws = await connect(
                    self._ws_url,
                    open_timeout=self._connect_timeout,
                    max_size=self._max_message_size,
                    additional_headers=headers,
                    proxy=None,  # a served env is reached directly, as the openai: agent is
                )
            except Exception as error:  # websockets' handshake errors have no common base
                raise ConnectionError(f"Failed to connect to {self._ws_url}: {error}") from None
            return self

        def _step_payload(self, action: str) -> dict[str, Any]:
            return {"command": action}

        def _parse_result(self, payload: dict[str, Any]) -> Any:
            # OpenEnv lifts the reward out of the observation; the wire fields hold it again
            fields = {**payload["observation"], "reward": payload["reward"]}
            return StepResult(fields, payload["reward"], payload["done"])

        def _parse_state(self, payload: dict[str, Any]) -> dict[str, Any]:
            return payload

    return ServedEnvClient


def _request(coroutine: Coroutine[Any, Any, T], server: str) -> T:
    """Run a client call on the shared loop; the server env's own errors are raised again as
    their type (see :data:`PASSED_ERRORS`), a server that stopped answering as a
    ``ConnectionError`` naming ``server``, any other server error as the client raised it."""
    from websockets.exceptions import ConnectionClosed

    try:
        return _EventLoop.run(coroutine)
    except (ConnectionClosed, OSError, asyncio.TimeoutError) as error:
        if isinstance(error, ConnectionError) and str(error).startswith("Failed to connect"):
            raise  # never connected: the message names the URL already
        reason = str(error) or type(error).__name__
        raise ServerGone(f"the env server {server} stopped answering ({reason})") from None
    except RuntimeError as error:
        message = str(error).removeprefix("Server error: ").rsplit(" (code: ", 1)[0]
        name, _, text = message.partition(": ")
        if name in PASSED_ERRORS:
            raise PASSED_ERRORS[name](text) from None
        raise


class RemoteEnv(TextAgentEnv[Any]):
    """A served env: the local env's API, each call one message to the server.

    ``env_name``, ``split``, ``max_steps`` and the env options are checked against what the
    server serves when the env connects, so a client never plays another env than the one it
    names; no server at the URL is a ``ConnectionError`` naming it. Use
    :func:`remote_env` to make one (it subclasses per env, for the class-level questions).
    """

    local: ClassVar[type[TextAgentEnv[Any]]]

    def __init__(
        self,
        server: str,
        split: str = "test",
        max_steps: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(split=split, max_steps=max_steps)
        self.server = server
        self._client = _client_class()(base_url=server, message_timeout_s=600.0)
        self._last: dict[str, Any] = {}  # the last answer's info, its text, its user choices
        self._text = ""
        self._choices: list[str] = []
        served = _request(self._client.state(), server)
        wanted = {
            "env": self.env_name,
            "split": split,
            "max_steps": self.max_steps,
            "options": json.loads(json.dumps(options or {}, default=str)),  # as the wire has it
        }
        for key, value in wanted.items():
            if served.get(key) != value:
                self.close()  # the session is the server's: give it back
                raise ValueError(
                    f"server {server} serves {key} {served.get(key)!r}, not {value!r} "
                    f"(it serves {served.get('env')}/{served.get('split')})"
                )

    # The class-level questions go to the local class of the same name.
    @classmethod
    def splits(cls) -> Sequence[str]:
        return cls.local.splits()

    @classmethod
    def task_ids(cls, split: str) -> list[str]:
        return cls.local.task_ids(split)

    @classmethod
    def split_checksum(cls, split: str) -> str:
        return cls.local.split_checksum(split)

    @classmethod
    def task_categories(cls, split: str) -> Any:
        return cls.local.task_categories(split)

    # Gymnasium's API, over the wire.
    def reset(  # type: ignore[override]  # as TextAgentEnv's: a StepInfo is a dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, StepInfo]:
        keywords: dict[str, Any] = {"seed": seed}
        if options is not None:
            if not isinstance(options, dict):
                raise ValueError(f"{self.env_name}: reset options must be a dict")
            keywords.update(options)
        fields = _request(self._client.reset(**keywords), self.server).observation
        self._keep(fields)
        observation, _, _, _, info = decode_step(fields)
        self.task_id, self.steps, self._ended = info["task_id"], 0, False
        if isinstance(observation, dict):  # a frame env: its space, as the local env has it
            image = spaces.Box(0, 255, observation["image"].shape, dtype=np.uint8)
            self.observation_space = spaces.Dict({"image": image, "text": text_space()})
        return observation, info

    def step(self, action: str) -> StepResult:  # type: ignore[override]  # as reset's
        return self._stepped(_request(self._client.step(action), self.server).observation)

    async def step_async(self, action: str) -> dict[str, Any]:
        """The wire fields of :meth:`step`, as a coroutine on the shared loop (what
        :func:`step_all` gathers)."""
        fields: dict[str, Any] = (await self._client.step(action)).observation
        return fields

    def _stepped(self, fields: dict[str, Any]) -> StepResult:
        """A step's answer, counted as the local env counts its steps."""
        self._keep(fields)
        answer = decode_step(fields)
        self.steps += 1
        self._ended = answer[2] or answer[3]
        return answer

    def _keep(self, fields: dict[str, Any]) -> None:
        """What the env's other methods read until the next answer."""
        self._last, self._text = fields["info"], fields["text"]
        self._choices = list(fields["user_choices"])

    def close(self) -> None:
        if self._client._ws is not None:
            with contextlib.suppress(Exception):  # a server gone already: nothing to close
                _EventLoop.run(self._client.close())

    # What the harness and the agents read of a live env: the last answer's info, or the server.
    def admissible_actions(self) -> list[str]:
        return list(self._last.get("admissible_actions", []))

    def won(self) -> bool:
        return bool(self._last.get("won", False))

    def category(self) -> str:
        return str(self._last.get("category", ""))

    def score(self) -> float:
        return float(self._last.get("score", 0.0))

    def expert_action(self) -> str:
        state = _request(self._client.state(), self.server)
        if state.get("expert_action") is None:
            raise ValueError(f"{self.env_name}: the server's env has no expert move now")
        return str(state["expert_action"])

    def user_choices(self) -> list[str]:
        return list(self._choices)

    def observation_text(self) -> str:
        return self._text

    # The local env's abstract steps: a remote env never runs them.
    def _sample_task_id(self) -> str:
        raise NotImplementedError("a served env draws its tasks on the server")

    def _load_task(self, task_id: str) -> None:
        raise NotImplementedError("a served env loads its tasks on the server")

    def _apply(self, action: str) -> Any:
        raise NotImplementedError("a served env applies actions on the server")

    def _observation(self) -> Any:
        raise NotImplementedError("a served env's observation comes with its answers")

    def _obs_hash(self) -> str:
        return str(self._last["obs_hash"])

    def _state_hash(self) -> str:
        return str(self._last["state_hash"])


async def _gather(coroutines: list[Coroutine[Any, Any, T]]) -> list[T]:
    return list(await asyncio.gather(*coroutines))


def step_all(envs: Sequence[TextAgentEnv[Any]], actions: Sequence[str]) -> list[StepResult]:
    """``envs[k].step(actions[k])`` for every k; served envs' requests all in flight at once.

    Example:
        >>> from agentbench_rl.envs import make
        >>> env = make("sokoban", split="test"); _ = env.reset(options={"task_id": "test-0000"})
        >>> step_all([env], ["up"])[0][4]["action_canonical"]
        'up'
    """
    answers: list[Any] = [None] * len(envs)
    served: dict[int, RemoteEnv] = {}
    for k, env in enumerate(envs):
        if isinstance(env, RemoteEnv):
            served[k] = env
        else:
            answers[k] = env.step(actions[k])
    if served:
        server = next(iter(served.values())).server
        results = _request(
            _gather([env.step_async(actions[k]) for k, env in served.items()]), server
        )
        for (k, env), fields in zip(served.items(), results, strict=True):
            answers[k] = env._stepped(fields)
    return answers


ORS_SCHEME = "ors+"
#: The longest one call to an ORS server may take, a session's creation included.
ORS_DEADLINE_S = 60.0
#: The most bytes one answer of an ORS server may hold, its event stream whole (an observation
#: with a frame is tens of KB): past it the answer is refused as it streams, not kept.
ORS_MAX_ANSWER_BYTES = 32 * 2**20
MISSING_ORS = f"a server of the Open Reward Standard needs ors-sdk: {install_hint('openenv')}"


class ORSRemoteEnv(RemoteEnv):
    """A served env over the Open Reward Standard (``serve-env --protocol ors``; the URL
    ``ors+http://HOST:PORT``), through ``ors-sdk``'s own client: an episode is an ORS session
    made for its task and reset seed, a step the ``act`` tool; the answers carry the same wire
    fields as OpenEnv's (in the prompt's ``detail`` and the tool's ``metadata``), so an episode
    comes out exactly as a local one. The token goes as ``X-API-Key``, as ORS clients send it."""

    def __init__(
        self,
        server: str,
        split: str = "test",
        max_steps: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        TextAgentEnv.__init__(self, split=split, max_steps=max_steps)
        try:
            import ors.client  # noqa: F401  # the SDK, checked before anything is asked of it
        except ImportError as missing:
            raise ImportError(MISSING_ORS) from missing
        self.server = server
        self._base = server.removeprefix(ORS_SCHEME)
        self._wanted = {
            "max_steps": self.max_steps,
            "options": json.loads(json.dumps(options or {}, default=str)),
        }
        self._token = os.environ.get(TOKEN_VARIABLE)
        self._http: Any = None  # our aiohttp session (bounded answers), made on the shared loop
        self._session: Any = None
        self._last, self._text, self._choices = {}, "", []
        splits = self._call(self._environment().list_splits())
        if split not in splits:
            raise ValueError(
                f"server {server} serves {self.env_name} split(s) {splits}, not {split!r}"
            )

    def _environment(self) -> Any:
        """The SDK's handle of the served env, over an HTTP session of ours: each answer bounded
        by :data:`ORS_MAX_ANSWER_BYTES`, and closed by :meth:`close` (the SDK's own sessions
        are closed only when collected)."""
        from ors.client.environment import AsyncEnvironment

        if self._http is None:
            self._http = _EventLoop.run(_bounded_http(self._base))
        return AsyncEnvironment(name=self.env_name, client=self._http, api_key=self._token)

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """A client call on the shared loop within :data:`ORS_DEADLINE_S` (an endless, cut or
        dripping event stream ends there; the SDK's own retries happen inside it); the server's
        refusals raised again as their type, every other failure one line naming the server
        (:func:`_ors_failure`)."""
        deadline = ORS_DEADLINE_S
        try:
            return _EventLoop.run(asyncio.wait_for(coroutine, deadline))
        except Exception as error:  # aiohttp's, the SDK's and a garbled answer's share no base
            raise _ors_failure(error, self.server, deadline) from None

    def reset(  # type: ignore[override]  # as TextAgentEnv's: a StepInfo is a dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, StepInfo]:
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"{self.env_name}: reset options must be a dict")
        task_id = (options or {}).get("task_id")
        if task_id is None:
            raise ValueError(
                f"{self.env_name}: an ORS session plays a named task (options task_id)"
            )
        self._end_episode()
        spec: dict[str, Any] = {"task_id": task_id, "split": self.split}
        if seed is not None:
            spec["seed"] = seed
        self._session, blocks = self._call(_ors_open(self._environment(), spec))
        fields = dict(blocks[0].detail)
        served = fields.pop("served", {})
        for key, value in self._wanted.items():
            if served.get(key) != value:
                self._end_episode()
                raise ValueError(
                    f"server {self.server} serves {key} {served.get(key)!r}, not {value!r}"
                )
        self._keep(fields)
        observation, _, _, _, info = decode_step(fields)
        self.task_id, self.steps, self._ended = info["task_id"], 0, False
        if isinstance(observation, dict):
            image = spaces.Box(0, 255, observation["image"].shape, dtype=np.uint8)
            self.observation_space = spaces.Dict({"image": image, "text": text_space()})
        return observation, info

    def step(self, action: str) -> StepResult:  # type: ignore[override]  # as reset's
        return self._stepped(self._call(self.step_async(action)))

    async def step_async(self, action: str) -> dict[str, Any]:
        if self._session is None:
            raise EpisodeEndedError(f"{self.env_name}: step() before reset()")
        output = await self._session.call_tool("act", {"action": action})
        return _answered(output.metadata)

    def expert_action(self) -> str:
        if self._session is None:
            raise ValueError(f"{self.env_name}: no episode to ask the expert about")
        output = self._call(self._session.call_tool("expert", {}))
        return str(_answered(output.metadata)["expert_action"])

    def _end_episode(self) -> None:
        """Close the episode's ORS session, if one is open."""
        if self._session is not None:
            session, self._session = self._session, None
            with contextlib.suppress(Exception):  # a server gone already: nothing to close
                _EventLoop.run(asyncio.wait_for(session.__aexit__(None, None, None), 10.0))

    def close(self) -> None:
        """End the episode and close the HTTP session (a later reset opens another)."""
        self._end_episode()
        if self._http is not None:
            http, self._http = self._http, None
            with contextlib.suppress(Exception):
                _EventLoop.run(asyncio.wait_for(http.close(), 10.0))


def _ors_failure(error: BaseException, server: str, deadline: float) -> Exception:
    """One exception, one line, for anything an ORS call raised: the server env's own refusal
    (inside the SDK's error text) as its type; a token the server refused as
    :class:`TokenRefused`; a timeout, a dead connection or an answer that is not the standard's
    as :class:`ServerGone`, naming ``server``."""
    if type(error) in PASSED_ERRORS.values():  # raised here already (a refusal in an answer)
        return error  # type: ignore[return-value]
    message = str(error)
    refusal = re.search(rf"({'|'.join(PASSED_ERRORS)}): (.*?)(?:\"}}|['\"], url=|$)", message)
    if refusal is not None:
        text = refusal.group(2).replace("\\'", "'").replace('\\"', '"')
        return PASSED_ERRORS[refusal.group(1)](text)
    status = getattr(error, "status", None)
    if type(error).__name__ == "AuthenticationError" or status in (401, 403):
        return TokenRefused(
            f"the env server {server} refused the token (HTTP {status or 401}): set "
            f"{TOKEN_VARIABLE} to the token it was started with"
        )
    if isinstance(error, asyncio.TimeoutError | TimeoutError):
        return ServerGone(f"the env server {server} gave no complete answer within {deadline:g} s")
    if type(error).__name__ == "AnswerTooLarge":  # envs.bounded_http's, which imports aiohttp
        return ServerGone(f"the env server {server} answered more than the client reads ({error})")
    first = printable(message.strip().split("\n")[0])[:200] or type(error).__name__
    if isinstance(error, OSError) or type(error).__name__ in _CONNECTION_FAILURES:
        return ServerGone(f"the env server {server} stopped answering ({first})")
    return ServerGone(
        f"the env server {server} answered what is not the Open Reward Standard "
        f"({type(error).__name__}: {first})"
    )


#: The SDK's and aiohttp's names for a connection that failed (their classes import lazily).
_CONNECTION_FAILURES = frozenset(
    {
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
        "MaxRetriesError",
        "HeartbeatTimeoutError",
        "ClientPayloadError",
        "ClientConnectionError",
    }
)


def _answered(metadata: dict[str, Any]) -> dict[str, Any]:
    """A tool's metadata, or the env's refusal it carries raised again as its type."""
    refused = metadata.get("refused")
    if refused is not None:
        raise PASSED_ERRORS[refused["error"]](refused["message"])
    return dict(metadata)


async def _bounded_http(base: str) -> Any:
    """An aiohttp session on ``base`` with bounded answers (made on the loop that uses it)."""
    from agentbench_rl.envs.bounded_http import bounded_session

    return bounded_session(base, ORS_MAX_ANSWER_BYTES)


async def _ors_open(handle: Any, spec: dict[str, Any]) -> tuple[Any, list[Any]]:
    """A session for one task (the SDK's context manager, entered) and its prompt."""
    from ors.client._types import Task

    session = handle.session(task=Task(environment_name=handle.name, task_spec=spec))
    await session.__aenter__()
    try:
        return session, await session.get_prompt()
    except BaseException:
        await session.__aexit__(None, None, None)
        raise


_REMOTE_CLASSES: dict[tuple[str, bool], type[RemoteEnv]] = {}


def remote_env(
    local: type[TextAgentEnv[Any]],
    server: str,
    split: str = "test",
    max_steps: int | None = None,
    options: dict[str, Any] | None = None,
) -> RemoteEnv:
    """The env ``local`` names, served at ``server`` with the env ``options`` it was made with
    (OpenEnv's protocol; the Open Reward Standard's for an ``ors+http://`` URL; a class per
    env and protocol, made once)."""
    ors = server.startswith(ORS_SCHEME)
    key = (local.env_name, ors)
    if key not in _REMOTE_CLASSES:
        _REMOTE_CLASSES[key] = type(
            f"Remote{local.__name__}",
            (ORSRemoteEnv if ors else RemoteEnv,),
            {
                "local": local,
                "env_name": local.env_name,
                "prompt_instruction": local.prompt_instruction,
                "action_aliases": local.action_aliases,
                "default_max_steps": local.default_max_steps,
                "metadata": local.metadata,
            },
        )
    return _REMOTE_CLASSES[key](server, split, max_steps, options)


__all__ = [
    "ORSRemoteEnv",
    "RemoteEnv",
    "ServerGone",
    "TokenRefused",
    "decode_step",
    "encode_step",
    "remote_env",
    "step_all",
]
