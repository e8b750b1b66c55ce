"""``agentbench-rl train`` and ``sweep``: a short run from the command line, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentbench_rl.cli import main

yaml = pytest.importorskip("yaml")  # the train extra

TINY = [
    "iterations=1",
    "n_tasks=1",
    "group_size=2",
    "max_steps=2",
    "action_mode=choose",
    "val_limit=1",
    "tiny.hidden_size=32",
    "tiny.layers=1",
    "tiny.heads=2",
    "tiny.kv_heads=1",
    "tiny.intermediate_size=64",
    "tiny.tokenizer_episodes=2",
]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def test_train_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    args = ["train", "--env", "sokoban", "--estimator", "grpo", "--model", "tiny", "--seed", "1"]
    code, err = run_cli([*args, "--out", str(out), *TINY], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1]
    stored = yaml.safe_load((out / "config.yaml").read_text())
    assert (stored["estimator"], stored["seed"], stored["tiny"]["hidden_size"]) == ("grpo", 1, 32)
    assert "validation success" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--estimator", "ppo"], "unknown estimator 'ppo'"),
        (["--env", "chess"], "unknown env 'chess'"),
        (["bc.colour=red"], "unknown config key 'bc.colour'"),
        (["--config", "/no/such.yaml"], "config file /no/such.yaml not found"),
        (["n_tasks"], "override 'n_tasks': expected key=value"),
    ],
)
def test_train_user_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_cli(["train", *args], capsys)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_sweep_summary_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        yaml.safe_dump({"name": "s", "out": str(tmp_path / "r"), "grid": {"seed": [0]}, "base": {}})
    )
    code, err = run_cli(["sweep", str(sweep), "--summary-only"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r" / "s" / "summary.json").read_text())["cells"] == {}
    code, err = run_cli(["sweep", str(tmp_path / "none.yaml")], capsys)
    assert code == 2 and "not found" in err
