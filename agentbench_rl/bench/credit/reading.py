"""Does an estimator's credit fidelity predict how it learns? (``bench credit --learning``,
``--campaign``.)

Across estimators, the Pearson correlation of the truth on a set against what the estimator
gained in training over GRPO, on the same problem:

- **the exact MDPs**: a ``bench learning`` result (``learning.json``) holds each estimator's
  learning AUC on each testbed MDP; the gain is its AUC minus GRPO's on that MDP, the fidelity
  its Pearson on the set ``mdp-<name>``. Pooled over the MDPs, both are centred within each
  MDP first (an MDP's difficulty is not an estimator's merit), and each MDP's own Spearman
  correlation is given too;
- **an env's campaign**: a ``sweep`` summary (``summary.json``) holds each estimator's paired
  difference against GRPO in mean validation success over the run; the fidelity is its mean
  Pearson over the env's sets.

The interval resamples estimators (2,000 draws, seeded): with nine estimators it is wide, and
that is the finding's size, not a flaw of the method. A correlation across estimators says
whether closer credit went with faster learning here; it does not say that closer credit
causes it (the estimators differ in more than their fidelity).

Example:
    >>> points = [Point("a", "m", 0.1, 0.0), Point("b", "m", 0.3, 0.2), Point("c", "m", 0.2, 0.1)]
    >>> round(correlate("m", points).pearson, 6)
    1.0
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

#: The estimator every gain is measured against, and rows that are not estimators.
BASELINE = "grpo"
NOT_ESTIMATORS = frozenset({"oracle"})
RESAMPLES = 2000


@dataclass(frozen=True)
class Point:
    """One estimator on one problem: its fidelity (Pearson against the truth) and its gain."""

    estimator: str
    problem: str
    fidelity: float
    gain: float
    share_of_oracle: float | None = None  # of the oracle's AUC headroom (MDPs only)


@dataclass(frozen=True)
class Correlation:
    """Fidelity against gain across estimators, on one problem or pooled over several."""

    context: str
    points: tuple[Point, ...]
    pearson: float
    ci: tuple[float, float]
    spearman: float
    by_problem: dict[str, float]  # each problem's own Spearman (pooled contexts only)

    def record(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "estimators": len({point.estimator for point in self.points}),
            "pearson": {"value": self.pearson, "ci": list(self.ci)},
            "spearman": self.spearman,
            "by_problem": self.by_problem,
            "points": [vars(point) for point in self.points],
        }


def _centred(points: list[Point]) -> tuple[np.ndarray, np.ndarray]:
    """Fidelity and gain, each minus its problem's mean over the points given."""
    fidelity = np.array([point.fidelity for point in points])
    gain = np.array([point.gain for point in points])
    problems = np.array([point.problem for point in points])
    for problem in set(problems.tolist()):
        mask = problems == problem
        fidelity[mask] -= fidelity[mask].mean()
        gain[mask] -= gain[mask].mean()
    return fidelity, gain


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def correlate(context: str, points: list[Point], seed: int = 0) -> Correlation:
    """Pearson (with its interval over resampled estimators) and Spearman of fidelity against
    gain, centred within each problem."""
    estimators = sorted({point.estimator for point in points})
    by_estimator = {name: [p for p in points if p.estimator == name] for name in estimators}
    fidelity, gain = _centred(points)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(RESAMPLES):
        sample = [p for k in rng.integers(len(estimators), size=len(estimators))
                  for p in by_estimator[estimators[k]]]  # fmt: skip
        value = _pearson(*_centred(sample))
        if not math.isnan(value):
            draws.append(value)
    ci = (
        (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))
        if draws
        else (math.nan, math.nan)
    )
    problems = sorted({point.problem for point in points})
    by_problem = {}
    if len(problems) > 1:
        for problem in problems:
            mine = [p for p in points if p.problem == problem]
            by_problem[problem] = float(
                stats.spearmanr([p.fidelity for p in mine], [p.gain for p in mine]).statistic
            )
    return Correlation(
        context=context,
        points=tuple(points),
        pearson=_pearson(fidelity, gain),
        ci=ci,
        spearman=float(stats.spearmanr(fidelity, gain).statistic),
        by_problem=by_problem,
    )


def learning_points(path: Path, fidelity: dict[tuple[str, str], float]) -> list[Point]:
    """Points of a ``bench learning`` result: ``fidelity`` maps (estimator, set) to Pearson;
    an estimator or MDP without a set score is left out."""
    learning = _read(path, "rows", "a bench learning result (learning.json)")
    auc = {(row["estimator"], row["mdp"]): row["auc_mean"] for row in learning["rows"]}
    share = {
        (row["estimator"], row["mdp"]): row.get("auc_share_of_oracle") for row in learning["rows"]
    }
    points = []
    for (estimator, mdp), value in sorted(auc.items()):
        set_name = f"mdp-{mdp.replace('_', '-')}"
        if estimator in NOT_ESTIMATORS or (estimator, set_name) not in fidelity:
            continue
        if (BASELINE, mdp) not in auc:
            raise ValueError(f"{path}: no {BASELINE} row on {mdp} to measure gains against")
        gain = value - auc[BASELINE, mdp]
        points.append(
            Point(estimator, mdp, fidelity[estimator, set_name], gain, share[estimator, mdp])
        )
    return points


def campaign_points(
    path: Path, env: str, fidelity: dict[tuple[str, str], float], set_envs: dict[str, str]
) -> list[Point]:
    """Points of a ``sweep`` summary on ``env``: each estimator's paired difference against GRPO
    in mean validation success of the figure the sweep compares runs on (its training panel's,
    where it has one; GRPO's own is 0, a point as in :func:`learning_points`), and its mean
    Pearson over the sets of ``env``."""
    summary = _read(path, "paired", "a sweep summary (summary.json)")
    sets = [name for name, set_env in set_envs.items() if set_env == env]
    if not sets:
        raise ValueError(f"--campaign {env}=...: no credit set of env {env!r} is scored")
    figure = summary.get("figure", "val_success")  # the figure the sweep compares runs on
    gains = {
        row["estimator"]: row["mean"]
        for row in summary["paired"]
        if row["baseline"] == BASELINE
        and row["metric"] == "mean"
        and row.get("figure", "val_success") == figure
    }
    if gains:
        gains[BASELINE] = 0.0
    points = []
    for estimator, gain in sorted(gains.items()):
        scores = [fidelity[estimator, name] for name in sets if (estimator, name) in fidelity]
        if scores:
            points.append(Point(estimator, env, float(np.mean(scores)), gain))
    return points


def _read(path: Path, key: str, what: str) -> dict[str, Any]:
    try:
        payload = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: cannot read {what}: {error}") from None
    if not isinstance(payload, dict) or key not in payload:
        raise ValueError(f"{path}: not {what} (no {key!r})")
    return payload


def markdown(correlations: list[Correlation]) -> list[str]:
    """The card's section: one line per context, then its points."""
    lines = [
        "",
        "## Does fidelity predict learning? (across estimators)",
        "",
        "Pearson of fidelity (against the truth) and gain over GRPO (learning AUC on an MDP, "
        "mean validation success in a campaign), centred within each problem; interval over "
        "resampled estimators. An association, not a cause.",
        "",
        "| context | estimators | Pearson [95% interval] | Spearman | each problem's Spearman |",
        "|---|---|---|---|---|",
    ]
    for item in correlations:
        each = ", ".join(f"{name} {value:+.2f}" for name, value in item.by_problem.items())
        lines.append(
            f"| {item.context} | {len({p.estimator for p in item.points})} | "
            f"{item.pearson:+.2f} [{item.ci[0]:+.2f}, {item.ci[1]:+.2f}] | "
            f"{item.spearman:+.2f} | {each or '–'} |"
        )
    for item in correlations:
        problems = sorted({p.problem for p in item.points})
        lines += ["", f"{item.context}: fidelity / gain over GRPO"
                  + (" (share of the oracle's headroom)" if item.points[0].share_of_oracle
                     is not None else ""), ""]  # fmt: skip
        lines.append("| estimator | " + " | ".join(problems) + " |")
        lines.append("|---" * (len(problems) + 1) + "|")
        for estimator in sorted({p.estimator for p in item.points}):
            cells = []
            for problem in problems:
                found = [p for p in item.points if (p.estimator, p.problem) == (estimator, problem)]
                if not found:
                    cells.append("–")
                    continue
                point = found[0]
                share = (
                    f" ({point.share_of_oracle:.2f})" if point.share_of_oracle is not None else ""
                )
                cells.append(f"{point.fidelity:.2f} / {point.gain:+.3f}{share}")
            lines.append(f"| {estimator} | " + " | ".join(cells) + " |")
    return lines
