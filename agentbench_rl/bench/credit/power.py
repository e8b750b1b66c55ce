"""What the credit sets can decide: every comparison of two rows with its paired interval and
its range with one task left out, every count over sets with how many sets resolve it, and
each set's power.

Two rows of one set are scored on the same bootstrap resamples of its tasks and with the same
task left out (:func:`~agentbench_rl.bench.credit.score.score`), so their difference has an
interval of its own (:func:`compare`): a comparison is **resolved** when that 95% interval
excludes 0, a **tie** otherwise, and **robust** when it keeps its sign whichever one task is
left out. A count over sets ("above the perfect baseline on 14 of 21") is stated with how many
of its sets are resolved and robust (:class:`Count`).

A set's **power** (:class:`SetPower`): the spread of a paired Pearson difference is the median,
over pairs of estimators, of the standard deviation of the difference over the bootstrap
resamples, σ_d; the smallest difference the set resolves at 80% power with a two-sided 5% test
is (z_0.975 + z_0.8)·σ_d, and since σ_d falls as 1/√tasks, the tasks that would resolve
:data:`TARGET_DIFFERENCE` are tasks·((z_0.975 + z_0.8)·σ_d / 0.05)². A set whose one task holds
most of the truth's variance decides little whatever its rows: :func:`top_task_share`.

Example:
    >>> from agentbench_rl.bench.credit.score import score
    >>> from agentbench_rl.bench.credit.sets import mdp_set
    >>> credit = mdp_set("lucky_rare", tasks=6, group_size=4, seed=0)
    >>> noise = np.random.default_rng(0).normal(size=len(credit.batch))
    >>> exact = score("exact", credit.true_advantage, credit)
    >>> rough = score("rough", credit.true_advantage + noise, credit)
    >>> found = compare(exact, rough)
    >>> found.difference > 0, found.verdict
    (True, 'above')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from agentbench_rl.bench.credit.score import Score
from agentbench_rl.bench.credit.sets import CreditSet
from agentbench_rl.bench.truth import percentile_interval

#: z of a two-sided 5% test plus z of 80% power: the detectable difference is this times σ_d.
POWER_Z = 1.959964 + 0.841621
#: The difference in Pearson between two estimators a set should resolve (issue 64's goal).
TARGET_DIFFERENCE = 0.05
#: The largest share of the truth's variance one task of a set should hold.
TOP_TASK_GOAL = 0.25


@dataclass(frozen=True)
class Comparison:
    """One row minus another on one set: Pearson's difference, its 95% paired interval (NaN: a
    set too small for one) and its range with any one task left out."""

    difference: float
    interval: tuple[float, float]
    drop_one: tuple[float, float] | None

    @property
    def verdict(self) -> str:
        """``above`` or ``below`` where the interval excludes 0, else ``tie``."""
        low, high = self.interval
        if low > 0:
            return "above"
        if high < 0:
            return "below"
        return "tie"

    @property
    def robust(self) -> bool:
        """Whether the difference keeps its sign with any one task left out."""
        if self.drop_one is None:
            return False
        low, high = self.drop_one
        return low > 0 if self.difference > 0 else high < 0


def compare(first: Score, second: Score) -> Comparison:
    """``first`` minus ``second`` on their set (:class:`Comparison`)."""
    interval = (math.nan, math.nan)
    if first.draws is not None and second.draws is not None:
        interval = percentile_interval(first.draws - second.draws)
    drop_one = None
    if first.left_out is not None and second.left_out is not None:
        differences = first.left_out - second.left_out
        drop_one = float(np.min(differences)), float(np.max(differences))
    return Comparison(first.pearson - second.pearson, interval, drop_one)


@dataclass(frozen=True)
class Count:
    """How many sets a comparison goes one way on, and how many of those resolve it.

    Example:
        >>> str(Count("above", 14, 21, resolved=9, robust=6))
        'above on 14 of 21 (resolved on 9, robust to any one task on 6)'
    """

    side: str
    sets: int
    of: int
    resolved: int
    robust: int

    def __str__(self) -> str:
        return (
            f"{self.side} on {self.sets} of {self.of} (resolved on {self.resolved}, robust to "
            f"any one task on {self.robust})"
        )


def count(comparisons: Sequence[Comparison], side: str = "above") -> Count:
    """The sets where the comparison's difference lies on ``side`` of 0 (``above``: > 0;
    ``below``: < 0), with those whose interval resolves it and those robust to any one task."""
    sign = 1.0 if side == "above" else -1.0
    chosen = [c for c in comparisons if sign * c.difference > 0]
    return Count(
        side,
        len(chosen),
        len(comparisons),
        resolved=sum(c.verdict == side for c in chosen),
        robust=sum(c.robust for c in chosen),
    )


def top_task_share(credit: CreditSet) -> float:
    """The largest share of the truth's variance (its squared deviations from the set's mean)
    that one task's rows hold.

    Example:
        >>> from agentbench_rl.bench.credit.sets import mdp_set
        >>> 0 < top_task_share(mdp_set("lucky_rare", tasks=6, group_size=4)) <= 1
        True
    """
    codes = pd.factorize(credit.tasks)[0]
    centred = credit.true_advantage - np.mean(credit.true_advantage)
    per_task = np.bincount(codes, weights=centred**2)
    total = float(per_task.sum())
    return float(per_task.max()) / total if total > 0 else math.nan


@dataclass(frozen=True)
class SetPower:
    """What one set can resolve (module docstring)."""

    set: str
    tasks: int
    top_task_share: float
    difference_sd: float  # σ_d: the median paired difference's bootstrap SD over pairs

    @property
    def detectable(self) -> float:
        """The smallest Pearson difference the set resolves at 80% power."""
        return POWER_Z * self.difference_sd

    @property
    def tasks_needed(self) -> int:
        """The tasks that would resolve :data:`TARGET_DIFFERENCE` at 80% power."""
        if math.isnan(self.difference_sd):
            return 0
        return math.ceil(self.tasks * (self.detectable / TARGET_DIFFERENCE) ** 2)


def set_power(credit: CreditSet, estimators: Sequence[Score]) -> SetPower:
    """The set's power from its estimators' scores (reference rows excluded by the caller)."""
    draws = [entry.draws for entry in estimators if entry.draws is not None]
    spreads = [float(np.std(a - b)) for a, b in combinations(draws, 2)]
    return SetPower(
        credit.name,
        int(credit.batch.n_groups),
        top_task_share(credit),
        float(np.median(spreads)) if spreads else math.nan,
    )
