"""Kill-and-resume: a run SIGKILLed after a checkpoint and resumed ends with the same numbers as
one that never stopped (CPU, a few iterations)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.spec.run_folder import RunFolder  # noqa: E402
from agentbench_rl.train.config import config_from_dict  # noqa: E402
from agentbench_rl.train.ppo import comparable, train  # noqa: E402

SETTINGS = {
    "env": "sokoban",
    "model": "tiny",
    "estimator": "gigpo",
    "seed": 3,
    "iterations": 6,
    "n_tasks": 2,
    "group_size": 3,
    "max_steps": 4,
    "action_mode": "choose",
    "history_observations": False,
    "instruction": "",
    "learning_rate": 3e-3,
    "val_limit": 2,
    "val_every": 2,
    "checkpoint_every": 2,  # the Ctrl-C test stops at iteration 1 or 3: not a multiple
    "tiny": {
        "hidden_size": 32,
        "layers": 1,
        "heads": 2,
        "kv_heads": 1,
        "intermediate_size": 64,
        "tokenizer_episodes": 2,
    },
    "bc": {"enabled": True, "episodes": 3, "epochs": 1, "batch_size": 8},
}


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """The run that never stopped."""
    return train(config_from_dict(SETTINGS), tmp_path_factory.mktemp("straight") / "run")


def start_cli_run(tmp_path: Path, out: Path) -> subprocess.Popen[bytes]:
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(SETTINGS), "utf-8")
    command = [sys.executable, "-m", "agentbench_rl.cli", "train", "--config", str(config_path)]
    return subprocess.Popen(
        [*command, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None and not condition():
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be stopped"


def logged_iterations(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["iteration"] for line in path.read_text().splitlines() if line]


def test_sigkilled_run_resumes_to_the_same_final_metrics(
    tmp_path: Path, straight: list[dict[str, object]]
) -> None:
    killed = tmp_path / "killed"
    process = start_cli_run(tmp_path, killed)
    try:

        def checkpointed() -> bool:
            checkpoint = RunFolder(killed).latest_checkpoint()
            if checkpoint is None:
                return False
            return bool(json.loads((checkpoint / "state.json").read_text())["iteration"] >= 2)

        wait_for(checkpointed, process)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert not (killed / "done.json").exists()

    resumed = train(config_from_dict(SETTINGS), killed, resume=True)
    assert [row["iteration"] for row in resumed] == list(range(7))
    assert comparable(resumed) == comparable(straight)
    on_disk = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert comparable(on_disk) == comparable(straight)


def test_ctrl_c_checkpoints_the_iteration_then_resumes_exactly(
    tmp_path: Path, straight: list[dict[str, object]]
) -> None:
    stopped = tmp_path / "stopped"
    process = start_cli_run(tmp_path, stopped)
    try:
        wait_for(lambda: 1 in logged_iterations(stopped), process)
        process.send_signal(signal.SIGINT)
    finally:
        process.wait(timeout=60)
    assert process.returncode == 130  # "interrupted; rerun with --resume"
    checkpoint = RunFolder(stopped).latest_checkpoint()
    assert checkpoint is not None
    last = json.loads((checkpoint / "state.json").read_text())["iteration"]
    assert last == logged_iterations(stopped)[-1] < 6  # the exit checkpoint, not a periodic one
    resumed = train(config_from_dict(SETTINGS), stopped, resume=True)
    assert comparable(resumed) == comparable(straight)
