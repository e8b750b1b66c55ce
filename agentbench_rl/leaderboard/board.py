"""The boards: validated submissions grouped by env and split, ranked, ready to render.

Every filed submission is validated again when the boards are built, and its folder name must be
the id its files give (``<name>-<digest>``), so a file edited after filing, or a submission moved
to another board, is left off the boards (with a warning naming it) instead of showing a number
nobody can recompute. One bad submission never takes the other boards down with it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench_rl.harness.stats import ThresholdResult
from agentbench_rl.leaderboard.curves import Curves
from agentbench_rl.leaderboard.schema import SubmissionMetadata
from agentbench_rl.leaderboard.store import stored_submissions, submission_id
from agentbench_rl.leaderboard.validate import (
    SubmissionError,
    ValidatedSubmission,
    validate_submission,
)


@dataclass(frozen=True)
class Entry:
    """One validated row of a board.

    Attributes:
        submission_id: the folder name under ``<env>/<split>/``.
        metadata: the submission's metadata.
        success: mean success over seeds (0..1).
        ci95: its 95% interval, as the harness computes it.
        ci95_method: ``t over seeds`` or ``wilson`` (one seed).
        per_category: success per category (0..1).
        seeds_at_threshold: how many seeds reached 95% success in the evaluation.
        curves: training curves, if the submission carries them.
        threshold: the 95%-threshold criterion over the curves.
        bootstrap_ci95: the bootstrap interval of success over tasks.
        data: the data fingerprint and whether it is the pinned one (``None``: not recorded).
        pass_at_k: pass@k over seeds for k = 1 .. the seeds (recomputed from the episodes).
        episodes_digest: the digest of its episodes (one set of episodes, one row).
        claimed: the package version and commit its summary names (stated, not checked).
    """

    submission_id: str
    metadata: SubmissionMetadata
    success: float
    ci95: tuple[float, float]
    ci95_method: str
    per_category: dict[str, float]
    seeds_at_threshold: int
    curves: Curves | None
    threshold: ThresholdResult | None
    bootstrap_ci95: tuple[float, float] | None = None
    data: dict[str, Any] | None = None
    pass_at_k: dict[str, float] = field(default_factory=dict)
    episodes_digest: str = ""
    claimed: dict[str, Any] = field(default_factory=dict)

    @property
    def trained_here(self) -> bool:
        """Whether the metadata names a training run of this package (``training_run``)."""
        return self.metadata.training_run is not None

    @property
    def rank_key(self) -> tuple[float, float, str, str]:
        """Best success first, then the higher lower bound, then name and id (a total order)."""
        return (-self.success, -self.ci95[0], self.metadata.name, self.submission_id)


@dataclass(frozen=True)
class Board:
    """The validated entries of one env and split, ranked."""

    env: str
    split: str
    entries: tuple[Entry, ...]

    @property
    def categories(self) -> list[str]:
        """Every category any entry reports, sorted."""
        return sorted({category for entry in self.entries for category in entry.per_category})

    @property
    def submitted(self) -> tuple[Entry, ...]:
        """The entries that name no training run of this package (reference and submitted)."""
        return tuple(entry for entry in self.entries if not entry.trained_here)

    @property
    def trained_here(self) -> tuple[Entry, ...]:
        """The entries trained with this package's trainer, shown in their own section."""
        return tuple(entry for entry in self.entries if entry.trained_here)

    @property
    def slug(self) -> str:
        """File-name stem of the board's plots, e.g. ``sokoban-test``."""
        return f"{self.env}-{self.split}"


def entry_from(submission: ValidatedSubmission, identifier: str) -> Entry:
    """The board row of a validated submission."""
    figures = submission.figures
    low, high = figures["success"]["ci95"]
    boot_low, boot_high = figures["success"]["bootstrap_ci95"]
    return Entry(
        submission_id=identifier,
        metadata=submission.metadata,
        success=float(figures["success"]["mean"]),
        ci95=(float(low), float(high)),
        ci95_method=str(figures["success"]["ci95_method"]),
        per_category={
            category: float(block["success"]["mean"])
            for category, block in sorted(figures["per_category"].items())
        },
        seeds_at_threshold=sum(bool(v) for v in figures["threshold_95"]["per_seed"].values()),
        curves=submission.curves,
        threshold=submission.threshold,
        bootstrap_ci95=(float(boot_low), float(boot_high)),
        data=submission.data,
        pass_at_k={k: float(v) for k, v in figures["pass_at_k"].items()},
        episodes_digest=submission.episodes_digest,
        claimed=dict(submission.claimed),
    )


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def filed_entry(root: Path, folder: Path) -> tuple[str, str, Entry]:
    """The board (env, split) and row of the submission filed in ``folder``.

    Raises :class:`SubmissionError` naming the folder and its first problem.
    """
    where = folder.relative_to(root).as_posix()
    try:
        submission = validate_submission(folder)
    except SubmissionError as error:
        raise SubmissionError(f"{where}: {error}") from None
    identifier = submission_id(submission)
    expected = f"{submission.env}/{submission.split}/{identifier}"
    if where != expected:
        raise SubmissionError(
            f"{where}: its files give the id {expected}; a filed submission "
            "must not be edited or moved (submit it again instead)"
        )
    return submission.env, submission.split, entry_from(submission, identifier)


def collect_boards(root: Path, on_skip: Callable[[str], None] = _warn) -> list[Board]:
    """Validate every submission filed under ``root`` and group them into ranked boards.

    A submission that does not validate (or cannot be read at all) is left off, and ``on_skip``
    (by default a ``UserWarning``) gets one line naming it and its first problem; so is one
    whose episodes an earlier folder of its board holds already (filed again under another
    name: one set of episodes is one row).
    """
    root = Path(root)
    grouped: dict[tuple[str, str], list[Entry]] = {}
    first_filed: dict[tuple[str, str, str], str] = {}
    for folder in stored_submissions(root):
        where = folder.relative_to(root).as_posix()
        try:
            env, split, entry = filed_entry(root, folder)
        except SubmissionError as error:
            on_skip(f"skipped {error}")
            continue
        except Exception as error:
            on_skip(f"skipped {where}: {type(error).__name__}: {error}".splitlines()[0])
            continue
        same = first_filed.setdefault((env, split, entry.episodes_digest), where)
        if same != where:
            on_skip(f"skipped {where}: its episodes are those of {same}, filed under another name")
            continue
        grouped.setdefault((env, split), []).append(entry)
    return [
        Board(env, split, tuple(sorted(entries, key=lambda entry: entry.rank_key)))
        for (env, split), entries in sorted(grouped.items())
    ]
