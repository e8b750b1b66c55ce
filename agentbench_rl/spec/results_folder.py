"""The folder of one evaluation: its layout and its lock, spelled here for the harness, the
trajectories viewer, the leaderboard and the benchmarks.

Layout::

    config.json                  the evaluation's config (``EvalConfig``)
    agent.json                   the agent's fingerprint (source file or weights)
    episodes.partial.jsonl       the journal while the run plays (``spec/journal.py``'s rules)
    episodes.csv | .parquet      one row per episode, written at the end
    summary.json                 every figure, written last
    trajectories/seed-S/T.json   with ``--save-trajectories``: every step of every episode
    view.html                    ``agentbench-rl view``'s page of those
    .lock                        held while a process writes the folder

Rules of a resumed evaluation (:meth:`ResultsFolder.prepare`): a folder that holds a config is
continued only with ``--resume`` and only for the same evaluation: the same config but for how
results are written (the episodes' format, whether trajectories are saved), which a resume may
change (a field added since takes its default in the older file); the episodes done are the
journal's rows (``spec/journal.py``: a torn last line repaired, a row recorded twice counted
once), else, for a finished run, the episode table's (in the format it was written in).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd

from agentbench_rl.core.atomic import atomic_write_bytes, atomic_write_text
from agentbench_rl.core.jsonfile import read_json
from agentbench_rl.core.lock import FolderLock
from agentbench_rl.extras import install_hint
from agentbench_rl.spec.journal import read_journal
from agentbench_rl.spec.records import EpisodeRow

CONFIG_FILE = "config.json"
AGENT_FILE = "agent.json"
JOURNAL_FILE = "episodes.partial.jsonl"
SUMMARY_FILE = "summary.json"
TRAJECTORIES = "trajectories"
VIEW_PAGE = "view.html"
#: The episode table's formats (a finished run resumed in another reads the one it wrote).
EPISODES_FORMATS = ("csv", "parquet")


class ResultsFolder:
    """The folder of one evaluation (module docstring).

    Example:
        >>> folder = ResultsFolder(Path("results/sokoban-test-random"))
        >>> folder.episodes_file("csv").name, folder.summary_file.name
        ('episodes.csv', 'summary.json')
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.config_file = self.path / CONFIG_FILE
        self.agent_file = self.path / AGENT_FILE
        self.journal_file = self.path / JOURNAL_FILE
        self.summary_file = self.path / SUMMARY_FILE
        self.trajectories = self.path / TRAJECTORIES
        self.view_page = self.path / VIEW_PAGE

    def __repr__(self) -> str:
        return f"ResultsFolder({str(self.path)!r})"

    def episodes_file(self, episodes_format: str) -> Path:
        """The episode table in ``episodes_format`` (``csv`` or ``parquet``)."""
        return self.path / f"episodes.{episodes_format}"

    def lock(self) -> FolderLock:
        """The folder's lock, making the folder: one process writes an evaluation at a time."""
        return FolderLock.making(self.path, "results folder", "--out ")

    def prepare(
        self,
        config: Mapping[str, Any],
        defaults: Mapping[str, Any],
        resume: bool,
        columns: Sequence[str],
        free: Collection[str] = (),
    ) -> Resumed:
        """Check the folder against ``config`` (``defaults``: each field's default, for a
        config written before the field existed), record ``config``, and return the episodes
        already done. The evaluation's identity is the config but the ``free`` keys (how
        results are written, which change no number). ``FileExistsError`` for a folder holding
        an evaluation without ``resume``; ``ValueError`` naming the fields that differ."""
        if self.config_file.exists():
            if not resume:
                raise FileExistsError(
                    f"{self.path} already holds an evaluation; pass --resume to continue it "
                    "or choose another --out"
                )
            previous = read_json(self.config_file, str(self.config_file))
            if not isinstance(previous, dict):
                raise ValueError(f"{self.config_file} must hold a JSON object")
            previous = {**defaults, **previous}
            changed = sorted(k for k in config if k not in free and previous.get(k) != config[k])
            if changed:
                raise ValueError(
                    f"--resume: {self.path} holds an evaluation with a different "
                    f"{', '.join(changed)}"
                )
        atomic_write_text(self.config_file, json.dumps(config, indent=1, sort_keys=True) + "\n")
        journal = read_journal(self.journal_file, columns)
        done = journal.rows
        finals = [self.episodes_file(kind) for kind in EPISODES_FORMATS]
        final = next((path for path in finals if path.exists()), None)
        if not done and final is not None and self.summary_file.exists():
            done = cast(list[EpisodeRow], read_episodes(final).to_dict("records"))
        return Resumed(done, journal.duplicates)


@dataclass(frozen=True)
class Resumed:
    """What a results folder already holds: the episodes done, and how many of the journal's
    rows repeated one (each counts once; the harness warns)."""

    done: list[EpisodeRow]
    duplicates: int


def write_episodes(episodes: pd.DataFrame, path: Path) -> None:
    """Write the episodes table as CSV or Parquet (by suffix), atomically.

    Parquet needs ``pyarrow``; without it the error says how to get it.
    """
    path = Path(path)
    if path.suffix == ".csv":
        atomic_write_text(path, episodes.to_csv(index=False, lineterminator="\n"))
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ValueError(f"Parquet output needs pyarrow: {install_hint('parquet')}") from None
    buffer = episodes.to_parquet(index=False)
    assert buffer is not None
    atomic_write_bytes(path, buffer)


def read_episodes(path: Path) -> pd.DataFrame:
    """Read an episodes table written by :func:`write_episodes`."""
    path = Path(path)
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
