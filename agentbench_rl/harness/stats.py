"""The statistics of an evaluation: intervals over tasks and seeds, and the 95% criterion."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

Z95 = 1.959963984540054  # two-sided 95% normal quantile
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # fixed: the same episodes always give the same interval


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion.

    Example:
        >>> [round(x, 4) for x in wilson_interval(8, 10)]
        [0.4902, 0.9433]
    """
    if n <= 0:
        raise ValueError("wilson_interval: n must be positive")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """95% Student-t interval of the mean of ``values`` (needs at least two).

    Example:
        >>> [round(x, 4) for x in t_interval([0.8, 0.9, 1.0])]
        [0.6516, 1.1484]
    """
    array = np.asarray(values, dtype=np.float64)
    if array.size < 2:
        raise ValueError("t_interval: needs at least two values")
    mean = float(array.mean())
    half = (
        float(scipy_stats.t.ppf(0.975, array.size - 1))
        * float(array.std(ddof=1))
        / math.sqrt(array.size)
    )
    return mean - half, mean + half


@dataclass(frozen=True)
class PairedDifference:
    """Mean of paired differences ``a_i − b_i`` with its 95% t-interval, the two-sided paired
    t-test p-value, and the smallest true difference this many pairs would detect with 80%
    power at the 5% level (from the observed spread of the differences)."""

    n: int
    mean: float
    ci95: tuple[float, float] | None
    p_value: float | None
    detectable_80: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (rounded to 4 decimals)."""

        def rounded(value: float | None) -> float | None:
            return None if value is None or math.isnan(value) else round(value, 4)

        return {
            "n": self.n,
            "mean": round(self.mean, 4),
            "ci95": None if self.ci95 is None else [round(x, 4) for x in self.ci95],
            "p_value": rounded(self.p_value),
            "detectable_80": rounded(self.detectable_80),
        }


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference:
    """Compare two paired samples (the same seeds under two methods).

    With ``d = a − b`` over n pairs: mean ± t_{0.975, n−1}·s_d/√n, the paired t-test
    ``t = mean / (s_d/√n)`` (two-sided), and the detectable difference
    ``(t_{0.975, n−1} + t_{0.8, n−1})·s_d/√n``. One pair gives the mean only.

    Example:
        >>> r = paired_difference([0.5, 0.6, 0.7], [0.4, 0.4, 0.6])
        >>> round(r.mean, 4), [round(x, 4) for x in r.ci95], round(r.p_value, 4)
        (0.1333, [-0.0101, 0.2768], 0.0572)
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size == 0:
        raise ValueError("paired_difference: no pairs")
    mean = float(d.mean())
    if d.size < 2:
        return PairedDifference(1, mean, None, None, None)
    error = float(d.std(ddof=1)) / math.sqrt(d.size)
    quantile = float(scipy_stats.t.ppf(0.975, d.size - 1))
    if error == 0.0:
        p_value = 1.0 if mean == 0.0 else 0.0
    else:
        p_value = float(2.0 * scipy_stats.t.sf(abs(mean) / error, d.size - 1))
    detectable = (quantile + float(scipy_stats.t.ppf(0.8, d.size - 1))) * error
    return PairedDifference(
        int(d.size), mean, (mean - quantile * error, mean + quantile * error), p_value, detectable
    )


def bootstrap_interval(
    per_task: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean over tasks (tasks resampled with
    replacement; each task's value is its mean over seeds).

    Example:
        >>> bootstrap_interval([1.0, 1.0, 1.0])
        (1.0, 1.0)
    """
    values = np.asarray(per_task, dtype=np.float64)
    if values.size == 0:
        raise ValueError("bootstrap_interval: no tasks")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _rounded(pair: tuple[float, float]) -> list[float]:
    """An interval of a quantity in [0, 1] (success, score), clipped to it and rounded."""
    return [round(max(0.0, pair[0]), 6), round(min(1.0, pair[1]), 6)]


def metric_block(episodes: pd.DataFrame, column: str) -> dict[str, Any]:
    """Mean of ``column`` with its intervals: across seeds (t, or Wilson for one seed of a 0/1
    column), per seed (Wilson for 0/1 columns) and by bootstrap over tasks."""
    binary = column == "success"
    per_seed_mean = episodes.groupby("seed", sort=True)[column].mean()
    block: dict[str, Any] = {"mean": round(float(per_seed_mean.mean()), 6)}
    if len(per_seed_mean) >= 2:
        block["std_over_seeds"] = round(float(per_seed_mean.std(ddof=1)), 6)
        block["ci95"] = _rounded(t_interval(per_seed_mean.to_list()))
        block["ci95_method"] = "t over seeds"
    elif binary:
        n = len(episodes)
        block["ci95"] = _rounded(wilson_interval(int(episodes[column].sum()), n))
        block["ci95_method"] = "wilson"
    else:
        block["ci95"] = _rounded(bootstrap_interval(episodes[column].to_list()))
        block["ci95_method"] = "bootstrap over tasks"
    per_task = episodes.groupby("task_id", sort=True)[column].mean()
    block["bootstrap_ci95"] = _rounded(bootstrap_interval(per_task.to_list()))
    if binary:
        block["per_seed"] = {
            str(seed): {
                "mean": round(float(group[column].mean()), 6),
                "n": len(group),
                "ci95": _rounded(wilson_interval(int(group[column].sum()), len(group))),
            }
            for seed, group in episodes.groupby("seed", sort=True)
        }
    return block


@dataclass(frozen=True)
class ThresholdResult:
    """The 95%-threshold criterion over training curves.

    Attributes:
        threshold: the success rate to reach (0.95).
        budget: the last iteration that counts (``None``: the whole curve).
        first_iteration: per seed, the first iteration whose success reached the threshold.
        all_reached: whether every seed reached it within the budget.
    """

    threshold: float
    budget: int | None
    first_iteration: dict[str, int | None]
    all_reached: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "threshold": self.threshold,
            "budget": self.budget,
            "first_iteration": self.first_iteration,
            "all_reached": self.all_reached,
        }


def threshold_crossing(
    curves: Mapping[Any, Mapping[int, float]], threshold: float = 0.95, budget: int | None = None
) -> ThresholdResult:
    """When does each seed's validation success first reach ``threshold``?

    Args:
        curves: per seed, validation iteration -> success rate.
        threshold: success rate to reach.
        budget: only iterations ``<= budget`` count.

    Example:
        >>> r = threshold_crossing({0: {10: 0.9, 20: 0.96}, 1: {10: 0.97}}, budget=20)
        >>> r.first_iteration, r.all_reached
        ({'0': 20, '1': 10}, True)
    """
    if not curves:
        raise ValueError("threshold_crossing: no curves")
    first: dict[str, int | None] = {}
    for seed, curve in curves.items():
        reached = [
            iteration
            for iteration, success in sorted(curve.items())
            if success >= threshold and (budget is None or iteration <= budget)
        ]
        first[str(seed)] = reached[0] if reached else None
    return ThresholdResult(threshold, budget, first, all(v is not None for v in first.values()))


def pass_at_k(episodes: pd.DataFrame) -> dict[str, float]:
    """pass@k over seeds for k = 1 .. the seeds every task was played with: the chance that at
    least one of k of a task's episodes succeeds, by the unbiased estimator of Chen et al. 2021
    (eq. 1), ``1 - C(n - c, k) / C(n, k)`` for a task of n episodes of which c succeeded, averaged
    over tasks. pass@1 is the success rate.

    Example:
        >>> frame = pd.DataFrame({"task_id": ["a", "a", "b", "b"],
        ...                       "success": [True, False, False, False]})
        >>> pass_at_k(frame)  # task a: 1/2 and 1; task b: 0 and 0
        {'1': 0.25, '2': 0.5}
    """
    by_task = episodes.groupby("task_id", sort=True)["success"].agg(["size", "sum"])
    most = int(by_task["size"].min()) if len(by_task) else 0
    figures = {}
    for k in range(1, most + 1):
        values = [
            1.0 - (math.comb(int(n - c), k) / math.comb(int(n), k))
            for n, c in zip(by_task["size"], by_task["sum"], strict=True)
        ]
        figures[str(k)] = round(float(np.mean(values)), 6)
    return figures


def summarize(episodes: pd.DataFrame) -> dict[str, Any]:
    """All figures of ``summary.json`` that come from the episodes alone.

    Columns used: task_id, category, seed, success, score, steps, return, invalid_actions.
    """
    summary: dict[str, Any] = {
        "n_episodes": len(episodes),
        "n_tasks": int(episodes["task_id"].nunique()),
        "success": metric_block(episodes, "success"),
        "pass_at_k": pass_at_k(episodes),
        "score": metric_block(episodes, "score"),
        "mean_steps": round(float(episodes["steps"].mean()), 6),
        "mean_return": round(float(episodes["return"].mean()), 6),
        "invalid_action_rate": round(
            float(episodes["invalid_actions"].sum() / max(1, episodes["steps"].sum())), 6
        ),
        "per_category": {
            str(category): {
                "n_tasks": int(group["task_id"].nunique()),
                "success": metric_block(group, "success"),
                "score": metric_block(group, "score"),
            }
            for category, group in episodes.groupby("category", sort=True)
        },
    }
    per_seed_success = episodes.groupby("seed", sort=True)["success"].mean()
    curves = {seed: {0: rate} for seed, rate in per_seed_success.items()}
    crossing = threshold_crossing(curves, 0.95)
    summary["threshold_95"] = {
        "threshold": 0.95,
        "per_seed": {seed: it is not None for seed, it in crossing.first_iteration.items()},
        "all_seeds": crossing.all_reached,
    }
    return summary
