"""verifiers (0.4.0) plays our served envs with its own OpenEnv env loop (issue 60, point 2):
the taskset :func:`openenv_config` builds over a whole split, run by verifiers' ``OpenEnvEnv.run``
against ``serve-env``'s server with a scripted player (the first admissible command), gives the
harness's episodes with the same policy: the same steps and the same returns, task by task, on
Sokoban's and TextCraft's test splits and ALFWorld's valid_seen (its games from ../shared/data).
Runs where verifiers and the openenv extra are installed (.ci/openenv)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("openenv", reason="needs the openenv extra (.ci/openenv)")
pytest.importorskip("verifiers.v1", reason="needs verifiers 0.4.0 (.ci/openenv)")
pytestmark = pytest.mark.openenv

from verifiers.v1.tasksets.openenv import OpenEnvEnv, OpenEnvTaskset  # noqa: E402

from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.integrations.openenv.server import running_server  # noqa: E402
from agentbench_rl.integrations.verifiers import openenv_config  # noqa: E402


def first_admissible(observation: Any, info: dict[str, Any]) -> str:
    """The harness's side of the scripted policy."""
    return str(info["admissible_actions"][0])


@dataclass
class Trace:
    rewards: dict[str, float] = field(default_factory=dict)
    stopped: str | None = None

    def record_reward(self, name: str, value: float) -> None:
        self.rewards[name] = value

    def stop(self, reason: str) -> None:
        self.stopped = reason


@dataclass
class Segment:
    last_reply: str
    terminated: bool = False


@dataclass
class Interaction:
    """verifiers' seat of one player, scripted: each turn answers the first admissible command
    of the observation verifiers shows, as the JSON action the schema asks for."""

    trace: Trace = field(default_factory=Trace)
    turns: int = 0

    async def turn(self, payload: str) -> Segment:
        shown = json.loads(payload)
        assert "command" in shown["action_schema"]["properties"]
        self.turns += 1
        command = shown["observation"]["info"]["admissible_actions"][0]
        return Segment(json.dumps({"command": command}))


@dataclass
class Player:
    played: list[Interaction] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any) -> AsyncIterator[Interaction]:
        seat = Interaction()
        self.played.append(seat)
        yield seat


@dataclass
class Agents:
    player: Player = field(default_factory=Player)


@pytest.fixture
def base_url_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    """verifiers 0.4.0's loop reads ``GenericEnvClient._base_url``, which openenv-core 0.3.0 (the
    newest on the index) does not set (it keeps ``_ws_url``): set it from the WebSocket URL, as
    docs/integrations.md tells a user to, until the two packages agree."""
    from openenv.core.generic_client import GenericEnvClient

    if hasattr(GenericEnvClient(base_url="http://127.0.0.1:1"), "_base_url"):
        return
    monkeypatch.setattr(
        GenericEnvClient,
        "_base_url",
        property(lambda client: client._ws_url.removesuffix("/ws")),
        raising=False,
    )


def play_split(spec: EnvSpec) -> None:
    """Play every task of ``spec``'s split through verifiers' loop and through the harness with
    the same scripted policy; require the same steps and returns, task by task."""
    tasks = spec.tasks()
    with running_server(spec, max_sessions=4) as url:
        taskset = OpenEnvTaskset(openenv_config(spec, url))
        agents = Agents()
        env = object.__new__(OpenEnvEnv)  # its run needs no config: the taskset's task holds all
        for task in taskset:
            asyncio.run(env.run(task, agents))
    config = EvalConfig(env=spec, agent=f"python:{__name__}:first_admissible")
    with tempfile.TemporaryDirectory() as folder:
        evaluate(config, Path(folder) / "run")
        episodes = pd.read_csv(Path(folder) / "run" / "episodes.csv").set_index("task_id")
    assert len(agents.player.played) == len(tasks) == len(episodes)
    for task, seat in zip(tasks, agents.player.played, strict=True):
        assert seat.trace.stopped is None
        assert seat.turns == episodes.loc[task, "steps"], task
        assert seat.trace.rewards["openenv_reward"] == pytest.approx(episodes.loc[task, "return"])


@pytest.mark.parametrize("name", ["sokoban", "textcraft"])
@pytest.mark.usefixtures("base_url_shim")
def test_verifiers_plays_a_whole_split_as_the_harness(name: str) -> None:
    play_split(EnvSpec(name=name, split="test"))  # 500 and 200 tasks


@pytest.mark.usefixtures("base_url_shim")
def test_verifiers_plays_alfworld_as_the_harness(alfworld_data: Path) -> None:
    # the native engine needs only the games (../shared/data), no package of ALFWorld's
    spec = EnvSpec(name="alfworld", split="valid_seen", kwargs={"data_dir": str(alfworld_data)})
    play_split(spec)  # 140 games
