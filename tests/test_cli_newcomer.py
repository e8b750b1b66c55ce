"""The command line as a newcomer meets it: help that lists what to type, defaults that work,
Ctrl-C that says how to continue, and a metadata file written from the run."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_core_install import HIDE  # the import hook that simulates a missing module

from agentbench_rl.envs import ENVS
from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate

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


@pytest.mark.parametrize("args", [["--help"], ["eval", "--help"], ["bench", "--help"]])
def test_help_reads_at_80_columns(args: list[str]) -> None:
    """Third round (issue 63): at 80 columns eval's help had an empty column (the ``--no-``
    names of its flags) and the command list broke a summary where its docstring did."""
    result = subprocess.run(
        [*CLI, *args], env={**ENV, "COLUMNS": "80"}, capture_output=True, text=True, check=True
    )
    inner = [line[1:].rstrip("│ ") for line in result.stdout.splitlines() if line[:1] == "│"]
    rows = [line.strip() for line in inner]
    assert rows and not any("--no-" in row for row in rows)
    for row in rows:
        name, _, description = row.partition(" ")
        if name.startswith("--"):  # an option's description starts within the box's first half
            assert len(row) - len(description.lstrip()) <= 34, row
    for line, after in itertools.pairwise(inner):  # a wrapped line fills its line
        text, wrapped = line.split("  ")[-1].strip(), after.strip()
        if after.startswith("   ") and wrapped[:1].islower():
            assert len(text) >= 30, (text, wrapped)


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


def interruptible() -> None:
    """In the child before it runs: Ctrl-C as a terminal gives it. A test run started in the
    background (``python -m pytest &``) ignores SIGINT, and a child inherits that: Python then
    never installs its KeyboardInterrupt, and the run plays on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
        preexec_fn=interruptible,
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
        [
            *(sys.executable, "-m", "pytest", "tests/envs/test_data_install.py"),
            *("-q", "-k", "webshop_bad"),
        ],
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
    from agentbench_rl.spec.records import Evaluation

    rows = [
        {"task_id": f"{kind}-{i}", "category": kind, "seed": seed, "success": (i + seed) % 3 > 0,
         "score": 1.0, "steps": 5, "return": 1.0, "invalid_actions": 0}
        for kind in TASK_TYPES for i in range(4) for seed in (0, 1)
    ]  # fmt: skip
    run = {"env": "alfworld", "split": "valid_seen", "agent": "random", "seeds": [0, 1],
           "split_checksum": "x", "complete_split": True, "config": {}, "package_version": "0",
           "git_commit": None}  # fmt: skip
    summary = Evaluation.of(run | summarize(pd.DataFrame(rows)))
    stream = StringIO()
    print_summary(summary, Console(file=stream, width=80))
    text = stream.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for kind in TASK_TYPES:
        assert any(line.startswith(kind + " ") for line in text.splitlines()), kind
    assert "bootstrap" in text and "t over seeds" in text


def test_progress_in_a_log_file_is_plain_lines_with_elapsed_time(tmp_path: Path) -> None:
    args = ["eval", "--env", "textcraft", "--agent", "random", "--limit", "40", "--out", "r"]
    result = run(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "textcraft/test random:" in line]
    assert len(lines) == 20 and lines[-1].startswith("textcraft/test random: 40/40 (100%)")
    assert all("elapsed" in line for line in lines) and "ETA" in lines[0]
    again = run([*args, "--resume"], cwd=tmp_path)
    assert "complete: all 40 episodes were done" in again.stderr


def test_a_resumed_evaluation_says_how_much_was_done(tmp_path: Path) -> None:
    out = tmp_path / "r"
    config = EvalConfig(env="sokoban", split="test", agent="random", limit=6)
    evaluate(config, out)
    rows = (out / "episodes.csv").read_text().splitlines()
    (out / "summary.json").unlink()  # as a run killed after two episodes leaves it
    (out / "episodes.csv").unlink()
    journal = [dict(zip(rows[0].split(","), line.split(","), strict=True)) for line in rows[1:3]]
    (out / "episodes.partial.jsonl").write_text(
        "".join(
            json.dumps({**row, "seed": int(row["seed"]), "success": row["success"] == "True",
                        "score": float(row["score"]), "steps": int(row["steps"]),
                        "return": float(row["return"]),
                        "invalid_actions": int(row["invalid_actions"])}) + "\n"
            for row in journal
        )
    )  # fmt: skip
    result = run(["eval", "--agent", "random", "--limit", "6", "--out", str(out), "--resume"])
    assert result.returncode == 0, result.stderr
    assert "resuming: 2 of 6 episodes done" in result.stderr


def test_version_help_and_hints(tmp_path: Path) -> None:
    version = run(["--version"])
    assert version.returncode == 0 and version.stdout.startswith("agentbench-rl 0.1.0")
    helped = run(["bench", "envs", "--help"])
    assert "<bool>" not in helped.stdout and "<integer>" not in helped.stdout
    assert "Steps to time per env" in helped.stdout
    typo = run(["train", "lerning_rate=1e-4", "--out", str(tmp_path / "t")])
    assert "did you mean 'learning_rate'?" in typo.stderr
    nested = run(["train", "bc.epoch=3", "--out", str(tmp_path / "t")])
    assert "did you mean 'bc.epochs'?" in nested.stderr
    option = run(["eval", "--seed", "1"])
    assert "--seeds" in option.stderr
    commas = run(["eval", "--seeds", "0,1,2"])
    assert "separated by spaces: --seeds 0 1 2" in commas.stderr


def test_an_unreachable_server_is_said_within_seconds(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    began = time.monotonic()
    result = run(["eval", "--agent", f"openai:http://127.0.0.1:{port}/v1#m", "--out", "o"],
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2 and "cannot reach" in result.stderr
    assert time.monotonic() - began < 10  # the backoff of five retries took 16.6 s


@pytest.mark.parametrize("command", ["train --config", "sweep"])
def test_a_gpu_config_without_its_extras_is_one_line_and_leaves_nothing(
    tmp_path: Path, command: str
) -> None:
    config = str(REPO_ROOT / "baselines" / "alfworld-qwen2.5-1.5b.yaml")
    args = [*command.split(), config, "--out", str(tmp_path / "out")]
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", HIDE, "vllm", *args],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "engine vllm needs vllm" in lines[0]
    assert 'pip install -e ".[vllm]"' in lines[0]
    assert time.monotonic() - began < 30  # no model download was tried (it retried for 50 s)
    assert not (tmp_path / "out").exists()
