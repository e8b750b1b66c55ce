"""The typed records (#46.3) read every committed file they describe, and lose nothing: every
``summary.json`` of the boards and the recorded runs is an :class:`Evaluation`, every
``metrics.jsonl`` holds rows whose keys :data:`MetricsRow` declares (or that carry a named
prefix), every ``episodes.csv`` has :data:`EPISODE_COLUMNS`; and the driver's step records are
:class:`StepRecord`'s keys."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import get_type_hints

import pandas as pd
import pytest

from agentbench_rl.core.batch import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, StepRecord
from agentbench_rl.envs import make
from agentbench_rl.rollout.episode import EpisodeSlot, Lockstep, episode_seed
from agentbench_rl.spec.records import EPISODE_COLUMNS, EpisodeRow, Evaluation, MetricsRow
from agentbench_rl.spec.run_folder import parse_metrics

REPO = Path(__file__).resolve().parents[2]
#: Keys of metrics rows that the estimator, the loss or an engine names.
NAMED_PREFIXES = ("est/", "ppo/", "engine/")


def committed(pattern: str) -> list[Path]:
    """The committed files whose path matches ``pattern`` (git's pathspec)."""
    listed = subprocess.run(
        ["git", "ls-files", pattern], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in listed]


def test_every_committed_summary_is_an_evaluation_and_loses_nothing() -> None:
    summaries = [
        path
        for path in committed("*summary.json")
        if path.name == "summary.json" and "sweep" not in json.loads(path.read_text("utf-8"))
    ]
    assert len(summaries) > 400  # the boards' entries and every recorded validation
    for path in summaries:
        data = json.loads(path.read_text("utf-8"))
        typed = Evaluation.of(data)
        assert typed.model_dump(mode="json", exclude_unset=True) == data, path


def test_every_committed_metrics_journal_holds_declared_rows() -> None:
    journals = committed("*metrics.jsonl")
    assert len(journals) >= 40  # the campaign's runs and the recorded baselines
    declared = set(get_type_hints(MetricsRow))
    for path in journals:
        rows = parse_metrics(path.read_bytes(), str(path)).rows
        assert rows and [row["iteration"] for row in rows] == list(range(len(rows)))
        for row in rows:
            unknown = {
                key for key in row if key not in declared and not key.startswith(NAMED_PREFIXES)
            }
            assert not unknown, f"{path}: undeclared metrics {sorted(unknown)}"


def test_every_committed_episodes_table_has_the_episode_columns() -> None:
    tables = committed("*episodes.csv")
    assert len(tables) > 400
    assert set(EPISODE_COLUMNS) <= set(get_type_hints(EpisodeRow))
    for path in tables:
        assert tuple(pd.read_csv(path, nrows=1).columns) == EPISODE_COLUMNS, path


@pytest.mark.parametrize("env", ["sokoban", "textcraft"])
def test_the_drivers_step_records_are_step_records(env: str) -> None:
    made = make(env, split="test")
    task = made.task_ids("test")[0]
    lock = Lockstep.of_envs([made], [EpisodeSlot(task, episode_seed(0, task), "g", "g/0")])
    while lock.live:
        lock.step([made.expert_action()])
    declared = set(get_type_hints(StepRecord))
    assert declared == {*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS}
    for record in lock.records:
        assert set(REQUIRED_COLUMNS) <= set(record) <= declared
        assert record["success"] is True and record["next_obs_key"]
