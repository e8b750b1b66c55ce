"""The TRL runs' summary (baselines/trl_sokoban_summary.py) on run folders written here: it needs
no trl, only the files a run leaves."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from agentbench_rl.harness.stats import summarize
from agentbench_rl.spec.run_folder import RunFolder

BASELINES = Path(__file__).resolve().parents[2] / "baselines"


def _summary_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BASELINES))  # it imports trl_sokoban_tiny from beside it
    spec = importlib.util.spec_from_file_location(
        "trl_sokoban_summary", BASELINES / "trl_sokoban_summary.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_run(run: Path, rewards: list[float], start: float, end: float) -> None:
    """What trl_sokoban_tiny.py leaves: TRL's log (a reward per step) and two harness summaries."""
    run.mkdir(parents=True)
    log = [{"step": step, "reward": reward, "tools/call_frequency": 2.0, "step_time": 0.5,
            "completions/mean_length": 40.0}
           for step, reward in enumerate(rewards, start=1)]  # fmt: skip
    log.append({"step": len(rewards), "train_runtime": 1.0})  # TRL's last entry has no reward
    (run / "trainer_state.json").write_text(json.dumps({"log_history": log}))
    for folder, success in (("eval-start", start), ("eval", end)):
        (run / folder).mkdir()
        won = round(10 * success)  # ten episodes, of which these won
        episodes = pd.DataFrame(
            {"task_id": [f"test-{i:04d}" for i in range(10)], "category": "6x6", "seed": 0,
             "success": [i < won for i in range(10)], "score": [float(i < won) for i in range(10)],
             "steps": 9, "return": 1.0, "invalid_actions": 4}
        )  # fmt: skip
        run_fields = {"env": "sokoban", "split": "test", "agent": "trl", "seeds": [0],
                      "split_checksum": "x", "complete_split": False, "config": {},
                      "package_version": "0", "git_commit": None,
                      "provenance": {"agent_weights": None}}  # fmt: skip
        summary = run_fields | summarize(episodes)
        (run / folder / "summary.json").write_text(json.dumps(summary))
    (run / "model").mkdir()  # the weights, which the record leaves out


def test_the_summary_pairs_the_seeds_and_records_without_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    summary_module = _summary_module(monkeypatch)
    results = tmp_path / "results"
    monkeypatch.setattr(summary_module, "RESULTS", results)
    monkeypatch.setattr(summary_module, "OUT", results / "trl-sokoban")
    runs = tmp_path / "runs"
    ten = [float(step) for step in range(10)]  # first five: mean 2, last five: mean 7
    _write_run(runs / "trl-gigpo" / "seed0", ten, 0.1, 0.3)
    _write_run(runs / "trl-gigpo" / "seed1", [x + 1 for x in ten], 0.0, 0.4)
    _write_run(runs / "trl-grpo" / "seed0", ten, 0.1, 0.2)
    _write_run(runs / "trl-grpo" / "seed1", ten, 0.0, 0.1)
    (runs / "trl-grpo" / "seed2").mkdir()  # unfinished: no eval/, not recorded

    copied = summary_module.record(runs)
    assert sorted(path.relative_to(results).as_posix() for path in copied) == [
        "trl-sokoban-gigpo/seed0", "trl-sokoban-gigpo/seed1",
        "trl-sokoban-grpo/seed0", "trl-sokoban-grpo/seed1",
    ]  # fmt: skip
    assert not (results / "trl-sokoban-gigpo" / "seed0" / "model").exists()
    # the run as the home trainer's metrics: the warm start at 0, TRL's steps 1..10
    metrics = RunFolder(results / "trl-sokoban-gigpo" / "seed1").read_metrics().rows
    assert [row["iteration"] for row in metrics] == list(range(11))
    assert metrics[0]["val_success"] == 0.0 and metrics[-1]["val_success"] == 0.4
    assert [row["train/return"] for row in metrics[1:]] == [x + 1 for x in ten]
    assert metrics[3]["engine/tools/call_frequency"] == 2.0

    summary = summary_module.summarise()
    gigpo = summary["estimators"]["gigpo"]
    assert gigpo["reward_first"]["mean"] == pytest.approx(2.5)  # (2 + 3) / 2
    assert gigpo["reward_last"]["mean"] == pytest.approx(7.5)
    # paired by seed: end success 0.3 - 0.2 and 0.4 - 0.1
    difference = summary["gigpo_minus_grpo"]["success_end"]
    assert difference["n"] == 2 and difference["mean"] == pytest.approx(0.2)
    written = results / "trl-sokoban"
    assert json.loads((written / "comparison.json").read_text()) == summary
    assert "| success_end |" in (written / "comparison.md").read_text()
    assert (written / "reward.png").read_bytes().startswith(b"\x89PNG")
