"""A served env is the local env: ``serve-env`` on openenv-core's server, played by our
Gymnasium client, by the harness (byte-identical results files) and by OpenEnv's own generic
client; and hostile clients leave the server up. Runs in the openenv environment (.ci/openenv).
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openenv", reason="needs the openenv extra (.ci/openenv)")
pytestmark = pytest.mark.openenv

import websockets  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from test_env_contract import DATA_KWARGS, ENV_NAMES, contract_split  # noqa: E402

from agentbench_rl.core.net import free_port  # noqa: E402
from agentbench_rl.envs import env_class  # noqa: E402
from agentbench_rl.envs.base import EpisodeEndedError  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig, RunOptions  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.integrations.openenv.server import running_server  # noqa: E402


@pytest.fixture(scope="module", params=ENV_NAMES)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[EnvSpec, str]]:
    """(the env's spec, the URL of a server of it) for every registered env with its data."""
    name = request.param
    kwargs: dict[str, Any] = {}
    if name in DATA_KWARGS:
        data = request.getfixturevalue("shared_data_dir")
        kwargs = DATA_KWARGS[name](data, tmp_path_factory.mktemp(f"{name}-cache"))
    spec = EnvSpec(name=name, split=contract_split(name), kwargs=kwargs)
    with running_server(spec, max_sessions=8, idle_timeout=60.0) as url:
        yield spec, url


def _same(a: Any, b: Any) -> bool:
    """Equal, arrays by value and dtype (a frame is an array in a dict)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(a.dtype == b.dtype and a.shape == b.shape and (a == b).all())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_served_episodes_are_the_local_episodes(served: tuple[EnvSpec, str]) -> None:
    spec, url = served
    local, remote = spec.make(), spec.make(server=url)
    tasks = spec.tasks()[:3]
    for episode, task in enumerate(tasks):
        rng = random.Random(episode)
        first = local.reset(seed=episode, options={"task_id": task})
        assert _same(remote.reset(seed=episode, options={"task_id": task}), first)
        info = first[1]
        for step in range(12):
            if step % 3 == 2:
                action = local.expert_action()
                assert remote.expert_action() == action
            else:
                action = rng.choice([*info["admissible_actions"], "xyzzy plugh"])
            answer = local.step(action)
            assert _same(remote.step(action), answer), (task, step, action)
            info = answer[4]
            if answer[2] or answer[3]:
                break
        assert remote.observation_text() == local.observation_text()
    remote.close()


def test_served_env_refuses_what_the_local_env_refuses(served: tuple[EnvSpec, str]) -> None:
    spec, url = served
    remote = spec.make(server=url)
    with pytest.raises(ValueError, match="is not a task id"):
        remote.reset(seed=0, options={"task_id": "no-such-task"})
    with pytest.raises(ValueError, match="unknown reset option"):
        remote.reset(seed=0, options={"colour": "red"})
    remote.reset(seed=0, options={"task_id": spec.tasks()[0]})
    remote.step("look")  # one bad step is answered, not raised
    remote.close()


@pytest.fixture(scope="module")
def sokoban() -> Iterator[tuple[EnvSpec, str]]:
    spec = EnvSpec(name="sokoban", split="test", max_steps=6)
    with running_server(spec, max_sessions=4, idle_timeout=2.0, max_message_bytes=4096) as url:
        yield spec, url


def test_a_client_of_another_env_is_refused(sokoban: tuple[EnvSpec, str]) -> None:
    _, url = sokoban
    with pytest.raises(ValueError, match="serves split 'test', not 'val'"):
        EnvSpec(name="sokoban", split="val", max_steps=6).make(server=url)
    default = env_class("sokoban").default_max_steps
    with pytest.raises(ValueError, match=f"max_steps 6, not {default}"):
        EnvSpec(name="sokoban", split="test").make(server=url)


def test_step_after_the_end_raises_as_locally(sokoban: tuple[EnvSpec, str]) -> None:
    spec, url = sokoban
    remote = spec.make(server=url)
    remote.reset(seed=0, options={"task_id": "test-0000"})
    for _ in range(6):
        remote.step("up")
    with pytest.raises(EpisodeEndedError, match="call reset"):
        remote.step("up")
    remote.close()


def test_openenv_generic_client_plays(sokoban: tuple[EnvSpec, str]) -> None:
    spec, url = sokoban
    local = spec.make()
    _, info = local.reset(seed=5, options={"task_id": "test-0003"})
    with GenericEnvClient(base_url=url).sync() as client:
        result = client.reset(seed=5, task_id="test-0003")
        assert result.observation["info"] == info
        moves = info["admissible_actions"][:3]
        for move in moves:
            expected = local.step(move)
            result = client.step({"command": move})
            assert result.observation["text"] == expected[0]
            assert result.reward == expected[1]
            assert result.observation["info"] == expected[4]
        assert client.state()["task_id"] == "test-0003"


def _eval_files(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in ("episodes.csv", "summary.json")}


@pytest.mark.parametrize("agent", ["random", "expert"])
def test_eval_on_a_served_env_writes_the_local_files(
    served: tuple[EnvSpec, str], agent: str, tmp_path: Path
) -> None:
    spec, url = served
    options = {key: str(v) if isinstance(v, Path) else v for key, v in spec.kwargs.items()}
    config = EvalConfig(env=spec.name, split=spec.split, agent=agent, limit=4, env_kwargs=options)
    evaluate(config, tmp_path / "local", RunOptions(batch_size=2))
    evaluate(config, tmp_path / "served", RunOptions(batch_size=2, env_server=url))
    assert _eval_files(tmp_path / "served") == _eval_files(tmp_path / "local")


def test_eval_workers_on_a_served_env_write_the_local_files(tmp_path: Path) -> None:
    spec = EnvSpec(name="sokoban", split="test")
    config = EvalConfig(env="sokoban", split="test", agent="random", limit=12)
    evaluate(config, tmp_path / "local")
    with running_server(spec) as url:
        evaluate(config, tmp_path / "served", RunOptions(workers=2, batch_size=2, env_server=url))
    assert _eval_files(tmp_path / "served") == _eval_files(tmp_path / "local")


def test_eval_without_a_server_writes_nothing(tmp_path: Path) -> None:
    port = free_port()  # a port nobody listens on
    config = EvalConfig(env="sokoban", split="test", agent="random", limit=2)
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        evaluate(config, tmp_path / "run", RunOptions(env_server=f"http://127.0.0.1:{port}"))
    assert not (tmp_path / "run").exists()  # the retry is not blocked by a half-made folder


# ---------------------------------------------------------------- hostile clients


def _ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


def _alive(url: str) -> None:
    """The server still plays a whole reset and step for a new client."""
    remote = EnvSpec(name="sokoban", split="test", max_steps=6).make(server=url)
    assert remote.reset(seed=0, options={"task_id": "test-0000"})[1]["task_id"] == "test-0000"
    remote.step("up")
    remote.close()


async def _exchange(url: str, *messages: str) -> list[dict[str, Any]]:
    async with websockets.connect(_ws_url(url)) as socket_:
        answers = []
        for message in messages:
            await socket_.send(message)
            answers.append(json.loads(await socket_.recv()))
        return answers


def test_malformed_messages_get_errors_and_the_session_goes_on(
    sokoban: tuple[EnvSpec, str],
) -> None:
    _, url = sokoban
    answers = asyncio.run(
        _exchange(
            url,
            "{not json",
            json.dumps({"type": "teleport"}),
            json.dumps({"type": "step", "data": {"cmd": 3}}),
            json.dumps({"type": "reset", "data": {"seed": "zero"}}),
            json.dumps({"type": "reset", "data": {"task_id": "test-0001", "seed": 1}}),
        )
    )
    codes = [answer["data"].get("code") for answer in answers[:4]]
    assert codes == ["INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR"]
    assert "seed must be a whole number" in answers[3]["data"]["message"]
    assert answers[4]["data"]["observation"]["info"]["task_id"] == "test-0001"
    _alive(url)


def test_a_huge_message_is_refused_and_the_server_stays_up(sokoban: tuple[EnvSpec, str]) -> None:
    _, url = sokoban

    async def flood() -> int | None:
        async with websockets.connect(_ws_url(url), max_size=None) as socket_:
            await socket_.send(json.dumps({"type": "step", "data": {"command": "u" * 100_000}}))
            try:
                await socket_.recv()
            except websockets.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    assert asyncio.run(flood()) == 1009  # message too big
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url + "/reset", data=b"{" + b" " * 100_000 + b"}")
    request.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 413
    _alive(url)


def test_sessions_past_the_limit_are_refused_and_vanished_ones_freed() -> None:
    # A server of its own with a long idle time: its reaper must not free sessions meanwhile.
    spec = EnvSpec(name="sokoban", split="test", max_steps=6)
    with running_server(spec, max_sessions=4, idle_timeout=600.0) as url:
        _crowd(url)


def _crowd(url: str) -> None:
    async def crowd() -> list[str]:
        opened = [await websockets.connect(_ws_url(url)) for _ in range(1000)]
        reset = json.dumps({"type": "reset", "data": {"task_id": "test-0000"}})
        codes = []
        for socket_ in opened:
            try:
                await socket_.send(reset)
                answer = json.loads(await socket_.recv())
                codes.append(answer["data"].get("code", "OK"))
            except websockets.ConnectionClosed:
                codes.append("CLOSED")
        for socket_ in opened:  # vanish without a close message, mid-episode
            socket_.transport.abort()
        return codes

    codes = asyncio.run(crowd())
    assert codes.count("OK") == 4 and set(codes) <= {"OK", "CAPACITY_REACHED", "CLOSED"}
    deadline = time.monotonic() + 10
    while True:  # the vanished sessions are freed: a new client gets a session
        try:
            _alive(url)
            break
        except RuntimeError:
            assert time.monotonic() < deadline, "vanished sessions were never freed"
            time.sleep(0.2)


def test_an_idle_session_is_closed(sokoban: tuple[EnvSpec, str]) -> None:
    _, url = sokoban

    async def idle() -> bool:
        async with websockets.connect(_ws_url(url)) as socket_:
            await socket_.send(json.dumps({"type": "reset", "data": {"task_id": "test-0000"}}))
            await socket_.recv()
            await asyncio.sleep(8)  # idle_timeout 2 s; the reaper looks every 5 s
            return True

    assert asyncio.run(idle())
    _alive(url)


def test_serve_env_command_serves_until_stopped() -> None:
    port = free_port()
    command = [sys.executable, "-m", "agentbench_rl.cli", "serve-env", "--env", "sokoban"]
    server = subprocess.Popen(
        [*command, "--split", "val", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # where the CLI talks
        text=True,
    )
    try:
        assert server.stderr is not None
        assert "serving sokoban/val on http://127.0.0.1:" in server.stderr.readline()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                remote = EnvSpec(name="sokoban", split="val").make(server=url)
                break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline, "serve-env never answered"
                time.sleep(0.2)
        assert remote.reset(seed=0, options={"task_id": "val-0000"})[1]["task_id"] == "val-0000"
        remote.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize(
    "name", ["agentbench_rl.envs.remote", "agentbench_rl.integrations.openenv.server"]
)
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}"


def test_serve_env_refuses_a_bad_env_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", "serve-env", "--split", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "has no split 'nope'" in done.stdout + done.stderr


def test_training_on_a_served_env_gives_the_local_numbers(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs the train extra")
    from test_train_ppo import tiny_config

    from agentbench_rl.train.ppo import comparable, train

    config = tiny_config(iterations=2, val_every=2, bc={"enabled": False})
    local = train(config, tmp_path / "local")
    with running_server(config.train_env()) as url:
        served = train(config.model_copy(update={"env_server": url}), tmp_path / "served")
    assert comparable(served) == comparable(local)
    assert served[-1]["train/rows"] > 0
