"""Figures, tables and the plot of ``bench learning``.

Per (MDP, estimator), over seeds: final J (after the last iteration), the area under the curve
(mean J over iterations 0..K by the trapezoid rule, so 1 is "solved from the start"), and the
first iteration at which J crosses 50% and 90% of the way from J(π₀) to J* (the best policy of
the true state, exact), by the harness's ``threshold_crossing``. Paired differences against
each label of :data:`REFERENCES` (GRPO and GiGPO), seed by seed (the seeds share their random
numbers): mean with a 95% t interval (the harness's ``t_interval``), the paired t test's p-value
and the Wilcoxon signed-rank test's p-value.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from agentbench_rl.bench.learning.loop import ORACLE
from agentbench_rl.harness.stats import t_interval, threshold_crossing

GAP_FRACTIONS = (0.5, 0.9)  # thresholds: this share of the way from J(π₀) to J*
# Configuration, not logic: paired differences against these labels (the table's Δ columns).
REFERENCES = ("grpo", "gigpo")


def auc(curves: np.ndarray) -> np.ndarray:
    """Normalised area under each curve (rows), trapezoid rule over iterations 0..K.

    Example:
        >>> auc(np.array([[0.0, 1.0, 1.0]])).tolist()
        [0.75]
    """
    return (curves[:, :-1] + curves[:, 1:]).sum(axis=1) / (2 * (curves.shape[1] - 1))


def first_crossings(curves: np.ndarray, threshold: float) -> list[int | None]:
    """Per seed, the first iteration with J ≥ threshold (None: never), via the harness.

    Example:
        >>> first_crossings(np.array([[0.1, 0.6, 0.9], [0.1, 0.2, 0.3]]), 0.5)
        [1, None]
    """
    table = {seed: dict(enumerate(row.tolist())) for seed, row in enumerate(curves)}
    crossing = threshold_crossing(table, threshold)
    return [crossing.first_iteration[str(seed)] for seed in range(len(curves))]


def median_iteration(firsts: list[int | None]) -> float:
    """Median first crossing, seeds that never crossed counted as infinitely late.

    Example:
        >>> median_iteration([3, 5, None]), median_iteration([3, None, None])
        (5.0, inf)
    """
    values = sorted(math.inf if v is None else float(v) for v in firsts)
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return (values[middle - 1] + values[middle]) / 2


@dataclass(frozen=True)
class Paired:
    """A paired comparison over seeds: mean difference, 95% t interval, p-values."""

    mean: float
    low: float
    high: float
    p_t: float
    p_wilcoxon: float

    @classmethod
    def of(cls, differences: np.ndarray) -> Paired:
        """From per-seed differences (at least two seeds).

        Example:
            >>> p = Paired.of(np.array([0.1, 0.2, 0.3]))
            >>> round(p.mean, 3), round(p.low, 3), p.p_t < 0.05
            (0.2, -0.048, False)
        """
        low, high = t_interval(differences.tolist())
        if np.all(differences == differences[0]):  # no spread: the tests are undefined
            p_value = 1.0 if differences[0] == 0 else 0.0
            return cls(float(differences.mean()), low, high, p_value, p_value)
        p_t = float(scipy_stats.ttest_rel(differences, np.zeros_like(differences)).pvalue)
        p_w = float(scipy_stats.wilcoxon(differences).pvalue)
        return cls(float(differences.mean()), low, high, p_t, p_w)

    def cell(self) -> str:
        """``+0.031 [+0.010, +0.052] t 0.004 W 0.006``."""
        return (
            f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] "
            f"t {_p(self.p_t)} W {_p(self.p_wilcoxon)}"
        )


def _p(value: float) -> str:
    return f"{value:.0e}" if value < 1e-3 else f"{value:.3f}"


def summarise(
    curves: dict[str, dict[str, np.ndarray]],
    optimum: dict[str, float],
    diagnostics: dict[str, dict[str, dict[str, float]]],
) -> list[dict[str, Any]]:
    """One row per (MDP, estimator label) with every figure of the table."""
    rows: list[dict[str, Any]] = []
    for mdp_name, per_label in curves.items():
        start = float(next(iter(per_label.values()))[:, 0].mean())
        thresholds = [start + f * (optimum[mdp_name] - start) for f in GAP_FRACTIONS]
        finals = {label: c[:, -1] for label, c in per_label.items()}
        areas = {label: auc(c) for label, c in per_label.items()}
        for label, c in per_label.items():
            row: dict[str, Any] = {
                "mdp": mdp_name,
                "estimator": label,
                "seeds": len(c),
                "J0": start,
                "J_star": optimum[mdp_name],
                "final_mean": float(finals[label].mean()),
                "final_std": float(finals[label].std(ddof=1)) if len(c) > 1 else 0.0,
                "auc_mean": float(areas[label].mean()),
                "auc_std": float(areas[label].std(ddof=1)) if len(c) > 1 else 0.0,
                "singleton_rate": diagnostics[mdp_name][label]["singleton_rate"],
            }
            for fraction, threshold in zip(GAP_FRACTIONS, thresholds, strict=True):
                firsts = first_crossings(c, threshold)
                key = f"iter_{round(fraction * 100)}"
                row[key] = median_iteration(firsts)
                row[f"{key}_reached"] = sum(v is not None for v in firsts)
            row["auc_share_of_oracle"] = oracle_share(areas, label)
            for reference in REFERENCES:
                if reference in per_label and reference != label and len(c) > 1:
                    for metric, values in (("final", finals), ("auc", areas)):
                        paired = Paired.of(values[label] - values[reference])
                        for field, value in vars(paired).items():
                            row[f"{metric}_vs_{reference}_{field}"] = value
            rows.append(row)
    return rows


def oracle_share(areas: dict[str, np.ndarray], label: str) -> float | None:
    """``(AUC(label) − AUC(GRPO)) / (AUC(oracle) − AUC(GRPO))``, by means over seeds: the share
    of the headroom over GRPO that ``label`` takes (``None`` without both runs, or without
    headroom).

    Example:
        >>> oracle_share({"grpo": np.array([0.5]), "oracle": np.array([0.7]),
        ...               "gigpo": np.array([0.55])}, "gigpo")
        0.25
    """
    base, top = REFERENCES[0], ORACLE
    if base not in areas or top not in areas:
        return None
    headroom = float(areas[top].mean() - areas[base].mean())
    if headroom <= 0:
        return None
    return round(float(areas[label].mean() - areas[base].mean()) / headroom, 12)


def _iteration_cell(row: dict[str, Any], key: str) -> str:
    value = row[key]
    shown = "never" if math.isinf(value) else f"{value:g}"
    return f"{shown} ({row[key + '_reached']}/{row['seeds']})"


def _paired_cell(row: dict[str, Any], prefix: str) -> str:
    if f"{prefix}_mean" not in row:
        return "–"
    return Paired(
        *(row[f"{prefix}_{f}"] for f in ("mean", "low", "high", "p_t", "p_wilcoxon"))
    ).cell()


def markdown_table(rows: list[dict[str, Any]], header: str) -> str:
    """The table in Markdown (the CSV has every figure, final-J differences included)."""
    # ΔAUC against every reference, Δfinal against the first (the CSV has them all).
    paired = [(f"ΔAUC vs {ref}", f"auc_vs_{ref}") for ref in REFERENCES]
    paired.append((f"Δfinal vs {REFERENCES[0]}", f"final_vs_{REFERENCES[0]}"))
    columns = ["MDP", "estimator", "final J", "AUC", "it. 50%", "it. 90%", "singleton"]
    columns += [title for title, _ in paired]
    columns.append("share of oracle's ΔAUC")
    lines = [
        header,
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in rows:
        cells = [
            row["mdp"],
            row["estimator"],
            f"{row['final_mean']:.3f} ± {row['final_std']:.3f}",
            f"{row['auc_mean']:.3f} ± {row['auc_std']:.3f}",
            _iteration_cell(row, "iter_50"),
            _iteration_cell(row, "iter_90"),
            f"{row['singleton_rate']:.2f}",
        ]
        cells += [_paired_cell(row, prefix) for _, prefix in paired]
        share = row["auc_share_of_oracle"]
        cells.append("–" if share is None else f"{share:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "final J: success probability after the last iteration, exact (mean ± std over seeds).",
        "AUC: mean J over iterations 0..K. it. 50% / 90%: median first iteration at which J is",
        "50% / 90% of the way from J(π₀) to J* (seeds that never got there count as late; in",
        "brackets how many got there). singleton: the estimator's singleton rate. Δ: paired",
        "difference over seeds, mean [95% t interval], paired-t (t) and Wilcoxon (W) p-values.",
        f"share of oracle's ΔAUC: (AUC − AUC of {REFERENCES[0]}) / (AUC of the oracle − AUC of",
        f"{REFERENCES[0]}), the oracle training on the exact advantage of its current policy (the",
        "headroom).",
    ]
    return "\n".join(lines) + "\n"


def csv_table(rows: list[dict[str, Any]]) -> str:
    """Every figure of every row, as CSV."""
    fields: list[str] = []
    for row in rows:
        fields += [key for key in row if key not in fields]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def plot(curves: dict[str, dict[str, np.ndarray]], optimum: dict[str, float], path: Path) -> None:
    """J over iterations per MDP, one line per estimator (mean) with a band of ± one std over
    seeds, J* dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, len(curves))
    lines = math.ceil(len(curves) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(5.2 * columns, 3.8 * lines), squeeze=False)
    for axis, (mdp_name, per_label) in zip(axes.flat, curves.items(), strict=False):
        for label, c in per_label.items():
            mean, spread = c.mean(axis=0), c.std(axis=0)
            iterations = np.arange(c.shape[1])
            axis.plot(iterations, mean, label=label, linewidth=1.2)
            axis.fill_between(iterations, mean - spread, mean + spread, alpha=0.12)
        axis.axhline(optimum[mdp_name], color="black", linestyle="--", linewidth=0.8)
        axis.set_title(mdp_name)
        axis.set_xlabel("iteration")
        axis.set_ylabel("J (exact success probability)")
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(curves) :]:
        axis.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    figure.suptitle("bench learning: J(π) per iteration, mean ± std over seeds (J* dashed)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
