"""Helpers of the leaderboard tests: read, copy and tamper with submission folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agentbench_rl.leaderboard.validate import SubmissionError, validate_submission


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", "utf-8")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def copy_of(base: Path, target: Path) -> Path:
    shutil.copytree(base, target)
    return target


def episodes_of(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "episodes.csv", dtype={"task_id": str, "category": str})


def write_episodes(folder: Path, episodes: pd.DataFrame) -> None:
    (folder / "episodes.csv").write_text(episodes.to_csv(index=False, lineterminator="\n"))


def rejection(folder: Path) -> str:
    """The one-line message ``validate_submission`` refuses ``folder`` with."""
    with pytest.raises(SubmissionError) as caught:
        validate_submission(folder)
    message = str(caught.value)
    assert "\n" not in message
    return message
