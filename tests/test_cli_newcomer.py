"""The command line as a newcomer meets it: help that lists what to type, defaults that work,
Ctrl-C that says how to continue, and a metadata file written from the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from agentbench_rl.envs import ENVS

REPO_ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "agentbench_rl.cli"]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200"}


def run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=ENV, capture_output=True, text=True, check=False
    )


def test_eval_help_lists_the_envs_and_the_seed_default() -> None:
    result = run(["eval", "--help"])
    text = " ".join(result.stdout.split())  # the help box wraps lines
    for name in ENVS:
        assert name in text
    assert "(default: 0)" in text and "evaluation split" in text


def test_default_split_is_the_envs_evaluation_split(tmp_path: Path) -> None:
    result = run(
        ["eval", "--env", "sokoban", "--agent", "expert", "--limit", "2", "--out", "r"],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["split"] == "test"
    # ALFWorld has no test split: the default is valid_seen (here without data, so the one-line
    # error names the folder it looked for).
    empty = {**ENV, "ALFWORLD_DATA": str(tmp_path / "none")}
    alfworld = subprocess.run(
        [*CLI, "eval", "--env", "alfworld", "--agent", "expert"],
        cwd=tmp_path,
        env=empty,
        capture_output=True,
        text=True,
        check=False,
    )
    assert alfworld.returncode == 2
    assert "json_2.1.1/valid_seen" in alfworld.stderr and "has no split" not in alfworld.stderr


def test_ctrl_c_says_how_to_continue(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(
        "import time\ndef act(obs, info):\n    time.sleep(0.2)\n"
        "    return info['admissible_actions'][0]\n"
    )
    args = ["eval", "--env", "sokoban", "--agent", "python:slow:act", "--limit", "50"]
    process = subprocess.Popen(
        [*CLI, *args, "--out", "r"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "r" / "agent.json").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.strip().splitlines()[-1] == "interrupted; rerun with --resume to continue"
    assert "Traceback" not in err
    assert not (tmp_path / "r" / "summary.json").exists()


def test_train_show_config_lists_every_key_with_overrides_applied() -> None:
    pytest.importorskip("yaml")
    result = run(["train", "--show-config", "--estimator", "grpo", "iterations=3", "bc.epochs=1"])
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    from agentbench_rl.train.config import TrainConfig

    assert set(shown) == set(TrainConfig().to_dict())
    assert shown["estimator"] == "grpo" and shown["iterations"] == 3 and shown["bc"]["epochs"] == 1


def test_leaderboard_init_writes_metadata_to_complete(tmp_path: Path) -> None:
    evaluated = run(
        [
            "eval",
            "--env",
            "sokoban",
            "--split",
            "val",
            "--agent",
            "expert",
            "--seeds",
            "0",
            "1",
            "--out",
            "run",
        ],
        cwd=tmp_path,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    init = run(["leaderboard", "init", "run"], cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert metadata["seeds"] == [0, 1] and metadata["name"] == "expert"
    again = run(["leaderboard", "init", "run"], cwd=tmp_path)
    assert again.returncode == 2 and "exists already" in again.stderr
    refused = run(["leaderboard", "validate", "run"], cwd=tmp_path)
    assert (
        refused.returncode == 2 and "contact" in refused.stderr and "placeholder" in refused.stderr
    )
    metadata["contact"] = "someone@example.org"
    (tmp_path / "run" / "metadata.json").write_text(json.dumps(metadata))
    valid = run(["leaderboard", "validate", "run"], cwd=tmp_path)
    assert valid.returncode == 0, valid.stderr


# A core-only install, simulated: a meta-path finder that refuses the optional modules.
HIDE = """
import runpy, sys
HIDDEN = set(sys.argv[1].split(","))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named '{name}'")
sys.meta_path.insert(0, Hide())
sys.argv = ["agentbench-rl", *sys.argv[2:]]
runpy.run_module("agentbench_rl.cli", run_name="__main__")
"""


@pytest.mark.parametrize(
    ("hidden", "args", "message"),
    [
        ("torch", ["eval", "--agent", "hf:some/model"], 'pip install -e ".[train]"'),
        ("yaml", ["train", "iterations=1"], "needs yaml, which is not installed"),
        ("pyarrow", ["eval", "--episodes-format", "parquet"], 'pip install -e ".[parquet]"'),
        ("matplotlib", ["bench", "fidelity", "--seeds", "1"], 'pip install -e ".[plot]"'),
    ],
)
def test_a_missing_extra_is_named_before_any_work(
    tmp_path: Path, hidden: str, args: list[str], message: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", HIDE, hidden, *args, "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "out").exists()  # nothing ran


def test_tests_skipped_for_lack_of_data_say_so_at_the_end() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_data_install.py", "-q", "-k", "webshop_bad"],
        cwd=REPO_ROOT,
        env={**ENV, "AGENTBENCH_SHARED_DATA": "/nonexistent/data", "CI": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    last_lines = result.stdout.strip().splitlines()[-2:]
    assert last_lines[0].startswith("SKIPPED 1 tests for lack of data"), result.stdout
    assert "/nonexistent/data" in last_lines[0] and "CONTRIBUTING.md" in last_lines[0]


def test_eval_table_shows_alfworld_categories_whole_at_80_columns() -> None:
    from io import StringIO

    import pandas as pd
    from rich.console import Console

    from agentbench_rl.envs.alfworld.data import TASK_TYPES
    from agentbench_rl.harness.report import print_summary
    from agentbench_rl.harness.stats import summarize

    rows = [
        {"task_id": f"{kind}-{i}", "category": kind, "seed": seed, "success": (i + seed) % 3 > 0,
         "score": 1.0, "steps": 5, "return": 1.0, "invalid_actions": 0}
        for kind in TASK_TYPES for i in range(4) for seed in (0, 1)
    ]  # fmt: skip
    summary = {"env": "alfworld", "split": "valid_seen", "agent": "random", "seeds": [0, 1]}
    summary |= summarize(pd.DataFrame(rows))
    stream = StringIO()
    print_summary(summary, Console(file=stream, width=80))
    text = stream.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for kind in TASK_TYPES:
        assert any(line.startswith(kind + " ") for line in text.splitlines()), kind
    assert "bootstrap" in text and "t over seeds" in text
