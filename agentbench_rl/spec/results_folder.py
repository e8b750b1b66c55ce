"""The folder of one evaluation: its layout and its lock, spelled here for the harness, the
trajectories viewer, the leaderboard and the benchmarks.

Layout::

    config.json                  the evaluation's config (``EvalConfig``)
    agent.json                   the agent's fingerprint (source file or weights)
    episodes.partial.jsonl       the journal while the run plays (``harness/journal.py``'s rules)
    episodes.csv | .parquet      one row per episode, written at the end
    summary.json                 every figure, written last
    trajectories/seed-S/T.json   with ``--save-trajectories``: every step of every episode
    view.html                    ``agentbench-rl view``'s page of those
    .lock                        held while a process writes the folder
"""

from __future__ import annotations

from pathlib import Path

from agentbench_rl.core.lock import FolderLock

CONFIG_FILE = "config.json"
AGENT_FILE = "agent.json"
JOURNAL_FILE = "episodes.partial.jsonl"
SUMMARY_FILE = "summary.json"
TRAJECTORIES = "trajectories"
VIEW_PAGE = "view.html"


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
