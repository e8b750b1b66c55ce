"""The ``bench credit`` run: candidates x sets, scored (:mod:`.score`), written as a Markdown
card, a plot and JSON (one record per estimator and set), and printed.

Example:
    >>> import tempfile
    >>> from agentbench_rl.bench.credit.sets import mdp_set, write_set
    >>> root = Path(tempfile.mkdtemp())
    >>> write_set(mdp_set("lucky_rare", tasks=6, group_size=4), root / "sets" / "mdp-lucky-rare")
    >>> bench = CreditBench(estimators=["grpo", "gigpo"], sets=root / "sets", against="grpo",
    ...                     speed=False)
    >>> report = run(bench, root / "out")
    >>> report.estimators()
    ['grpo', 'gigpo', 'perfect baseline (G_t − V)', "ceiling (truth's noise)"]
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape

from agentbench_rl.bench.credit import power, reading
from agentbench_rl.bench.credit.runner import Candidate, estimate_all
from agentbench_rl.bench.credit.score import (
    CEILING,
    PARTS,
    PERFECT_BASELINE,
    SPEED_HIDDEN_SIZE,
    Score,
    default_candidates,
    reference_scores,
    score,
    speed,
)
from agentbench_rl.bench.credit.sets import STANDARD_SETS, CreditSet, read_sets
from agentbench_rl.bench.credit.settings import CreditBench
from agentbench_rl.bench.truth import METRICS
from agentbench_rl.core.atomic import atomic_write_text


@dataclass
class Report:
    """Every score of a run, the problems, the speeds and the sets scored."""

    sets: list[CreditSet]
    scores: list[Score] = field(default_factory=list)
    problems: dict[str, dict[str, str]] = field(default_factory=dict)  # estimator -> set -> why
    speeds: dict[str, float | None] = field(default_factory=dict)
    against: str | None = None
    seconds: float = 0.0
    correlations: list[reading.Correlation] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        """One JSON record per (estimator or reference row, set)."""
        return [entry.record() for entry in self.scores]

    def estimators(self) -> list[str]:
        """The scored labels in order, the reference rows last."""
        seen: list[str] = []
        for entry in self.scores:
            if entry.estimator not in seen and entry.estimator not in (CEILING, PERFECT_BASELINE):
                seen.append(entry.estimator)
        return [*seen, PERFECT_BASELINE, CEILING]

    def find(self, estimator: str, set_name: str) -> Score | None:
        """The score of one estimator on one set (``None``: not scored there)."""
        for entry in self.scores:
            if entry.estimator == estimator and entry.set == set_name:
                return entry
        return None

    def comparisons(self, estimator: str, other: str) -> list[power.Comparison]:
        """``estimator`` minus ``other`` on every set where both are scored."""
        found = []
        for credit in self.sets:
            first, second = self.find(estimator, credit.name), self.find(other, credit.name)
            if first is not None and second is not None:
                found.append(power.compare(first, second))
        return found

    def powers(self) -> list[power.SetPower]:
        """Each set's power (:mod:`.power`), from its estimators' scores."""
        labels = (CEILING, PERFECT_BASELINE)
        return [
            power.set_power(
                credit,
                [e for e in self.scores if e.set == credit.name and e.estimator not in labels],
            )
            for credit in self.sets
        ]


def run(
    bench: CreditBench,
    out: Path | None = None,
    console: Console | None = None,
    candidates: Sequence[Candidate] = (),
) -> Report:
    """Score every estimator of ``bench`` (none named: every registered one) on every set of
    ``bench.sets`` (the shipped ones by default); with ``against``, paired differences against
    that estimator; with ``learning`` (a ``bench learning`` result) and ``campaigns`` (env -> a
    ``sweep`` summary), whether fidelity predicts learning (:mod:`.reading`); write the card,
    the plot and the JSON to ``out``; with ``speed``, also the speed at 100k rows.
    ``candidates`` score in place of the named estimators: what no command line names (the
    board's filed submissions, each with its own label)."""
    started = time.perf_counter()
    sets = read_sets(bench.sets if bench.sets is not None else STANDARD_SETS)
    against = bench.against
    named = [Candidate.parse(spec) for spec in bench.estimators]
    scored = list(candidates) or named or default_candidates()
    if against is not None and against not in [c.label for c in scored]:
        scored.append(Candidate.parse(against))
    report = Report(sets=sets, against=against)
    found = {candidate.label: estimate_all(candidate, sets) for candidate in scored}
    for candidate in scored:
        report.problems[candidate.label] = found[candidate.label].problems
        if console is None:
            continue
        for set_name, problem in found[candidate.label].problems.items():
            console.print(escape(f"{candidate.label} on {set_name}: {problem}"), highlight=False)
        if found[candidate.label].output:  # a child's own lines, apart from the results
            console.print(escape(f"{candidate.label} printed (its last lines):"), highlight=False)
            for line in found[candidate.label].output:
                console.print(escape(f"  | {line}"), highlight=False)
    base = found[against].values if against is not None else {}
    for credit in sets:
        for candidate in scored:
            values = found[candidate.label].values.get(credit.name)
            if values is not None:
                other = base.get(credit.name) if candidate.label != against else None
                report.scores.append(score(candidate.label, values, credit, other))
        report.scores.extend(reference_scores(credit))
    report.correlations = _correlations(report, bench.learning, dict(bench.campaigns))
    if bench.speed:
        report.speeds = {candidate.label: speed(candidate) for candidate in scored}
    report.seconds = time.perf_counter() - started
    if console is not None:
        console.print(summary_table(report), highlight=False)
    if out is not None:
        write_outputs(report, Path(out))
        if console is not None:
            console.print(escape(f"wrote {out}/credit.md, credit.json, credit.png"))
    return report


def _correlations(
    report: Report, learning: Path | None, campaigns: dict[str, Path]
) -> list[reading.Correlation]:
    fidelity = {
        (entry.estimator, entry.set): entry.parts["all"]["pearson"]["value"]
        for entry in report.scores
    }
    found = []
    if learning is not None:
        points = reading.learning_points(learning, fidelity)
        if points:
            found.append(reading.correlate("exact MDPs (learning AUC)", points))
    set_envs = {credit.name: str(credit.settings.get("env")) for credit in report.sets}
    pooled = []
    for env, path in campaigns.items():
        points = reading.campaign_points(path, env, fidelity, set_envs)
        if points:
            found.append(reading.correlate(f"{env} campaign (mean success)", points))
            pooled += points
    if len({point.problem for point in pooled}) > 1:  # estimators x envs, centred per env
        found.append(reading.correlate("campaigns pooled over envs (mean success)", pooled))
    return found


# ------------------------------------------------------------------------------ writing
def _cell(entry: dict[str, Any] | None, digits: int = 2) -> str:
    if not entry or entry.get("value") is None or math.isnan(entry["value"]):
        return "–"
    value, (low, high) = entry["value"], entry.get("ci", (math.nan, math.nan))
    if math.isnan(low):
        return f"{value:+.{digits}f}" if entry.get("signed") else f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _mean_over_sets(report: Report, estimator: str, metric: str, part: str = "all") -> float:
    values = []
    for credit in report.sets:
        entry = report.find(estimator, credit.name)
        figures = entry.parts.get(part, {}).get(metric) if entry is not None else None
        if figures and figures.get("value") is not None and not math.isnan(figures["value"]):
            values.append(figures["value"])
    return float(np.mean(values)) if values else math.nan


def summary_table(report: Report) -> str:
    """The printed summary: each estimator's Pearson on each set (the sets numbered, their
    whole names listed below, so a log keeps them) and its mean.

    Example:
        >>> import tempfile
        >>> from agentbench_rl.bench.credit.sets import mdp_set, write_set
        >>> root = Path(tempfile.mkdtemp())
        >>> write_set(mdp_set("lucky_rare", tasks=6, group_size=4), root / "mdp-lucky-rare")
        >>> bench = CreditBench(estimators=["grpo"], sets=root, speed=False)
        >>> print(summary_table(run(bench)).splitlines()[-1])
        sets: [1] mdp-lucky-rare
    """
    names = [credit.name for credit in report.sets]
    width = max(len("estimator"), *(len(e) for e in report.estimators()))
    numbers = [f"[{index}]" for index in range(1, len(names) + 1)]
    lines = [f"{'estimator':{width}s} " + " ".join(f"{n:>6s}" for n in numbers) + "   mean"]
    for estimator in report.estimators():
        cells = []
        for name in names:
            entry = report.find(estimator, name)
            value = entry.pearson if entry is not None else math.nan
            cells.append(f"{value:6.2f}" if not math.isnan(value) else f"{'–':>6s}")
        mean = _mean_over_sets(report, estimator, "pearson")
        lines.append(f"{estimator:{width}s} " + " ".join(cells) + f" {mean:6.2f}")
    legend = ", ".join(f"{number} {name}" for number, name in zip(numbers, names, strict=True))
    return "\n".join([*lines, f"sets: {legend}"])


def markdown(report: Report) -> str:
    """The card: the sets, one table per metric (estimators x sets), the parts, the paired
    differences, the problems and the speeds."""
    names = [credit.name for credit in report.sets]
    lines = [
        "# Credit fidelity: every estimator against the true advantage",
        "",
        f"{len(report.sets)} sets, scored in {report.seconds:.1f} s on {os.cpu_count()} cores. "
        "Cells: value [95% bootstrap interval over tasks; none where a part holds too few "
        "tasks]. A set not shipped with the package, or one whose arrays are not pinned in it "
        "(`agentbench_rl/bench/credit/pins.py`), is marked unpinned. "
        f"`{PERFECT_BASELINE}`: the step's own discounted return minus the true value "
        "of its prefix, noise-fair (the covariance it shares with the truth through the "
        "value's Monte-Carlo estimate subtracted, so its Spearman and sign agreement are "
        f"left out); `{CEILING}`: sqrt(1 − noise share), the noise share being "
        "mean(se(Â)²) / var(Â), the highest correlation the truth's Monte-Carlo noise allows "
        "(1 on an exact set). Both are labels, not estimators. `grpo` normalises over its "
        "group's rows (the GiGPO code's choice: a long trajectory weighs more); "
        "`grpo:episode_stats=trajectories` over its group's trajectories (textbook GRPO, one "
        "vote each).",
        "",
        "Power: the largest share of the truth's variance one task holds (goal ≤ "
        f"{power.TOP_TASK_GOAL:.2f}), the smallest Pearson difference between two estimators "
        "the set resolves at 80% power (two-sided 5%; from the median bootstrap spread of "
        "the estimators' paired differences) and the tasks that would resolve "
        f"{power.TARGET_DIFFERENCE:.2f} (the spread falls as 1/√tasks; bootstraps over 8 "
        "tasks run narrow, so these are lower bounds there).",
        "",
        "| set | kind | env | policy | rows | tasks | success | noise ceiling | hidden "
        f"| top task | detectable (80%) | tasks for {power.TARGET_DIFFERENCE:.2f} |",
        "|---" * 12 + "|",
    ]
    powers = {found.set: found for found in report.powers()}
    for credit in report.sets:
        settings = credit.settings
        share = credit.noise_share
        found = powers[credit.name]
        lines.append(
            f"| {credit.name}{'' if credit.pinned else ' (unpinned)'} | {credit.kind} | "
            f"{settings.get('env')} | "
            f"`{settings.get('agent', settings.get('policy'))}` | {len(credit.batch)} | "
            f"{credit.batch.n_groups} | {credit.success_rate:.2f} | "
            f"{math.sqrt(max(0.0, 1 - share)) if not math.isnan(share) else math.nan:.2f} | "
            f"{'yes' if credit.hidden else 'no'} | {found.top_task_share:.2f} | "
            f"{found.detectable:.3f} | {found.tasks_needed} |"
        )
    for metric in METRICS:
        lines += ["", f"## {metric} (all rows)", ""]
        lines.append("| estimator | " + " | ".join(names) + " | mean |")
        lines.append("|---" * (len(names) + 2) + "|")
        for estimator in report.estimators():
            cells = []
            for name in names:
                entry = report.find(estimator, name)
                cells.append(_cell(entry.parts["all"].get(metric)) if entry is not None else "–")
            mean = _mean_over_sets(report, estimator, metric)
            lines.append(f"| {estimator} | " + " | ".join(cells) + f" | {_cell({'value': mean})} |")
    lines += [
        "",
        "## Dose and effective sample size",
        "",
        "Per set: the share of rows the estimator gives a non-zero advantage (its dose, what "
        "arXiv 2608.19760 found training differences mostly came from) / the effective sample "
        "size of its |A| weights as a share of the rows, (Σ|A|)² / (n·ΣA²). Credit rules that "
        "train different numbers of rows are not compared like for like.",
        "",
        "| estimator | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    lines += _per_set_rows(report, names, _dose_cell)
    lines += ["", "## Pearson by part (mean over the sets that have the part)", ""]
    lines.append("| estimator | " + " | ".join(PARTS) + " |")
    lines.append("|---" * (len(PARTS) + 1) + "|")
    for estimator in report.estimators():
        if estimator == CEILING:
            continue
        cells = [
            _cell({"value": _mean_over_sets(report, estimator, "pearson", part)}) for part in PARTS
        ]
        lines.append(f"| {estimator} | " + " | ".join(cells) + " |")
    lines += _drop_one_lines(report, names) + _count_lines(report)
    if report.against is not None:
        lines += [
            "",
            f"## Against {report.against} (paired: this minus {report.against}, same resamples)",
            "",
            "| estimator | set | " + " | ".join(METRICS) + " |",
            "|---" * (len(METRICS) + 2) + "|",
        ]
        for entry in report.scores:
            if entry.against is not None and entry.estimator != report.against:
                cells = [_cell(entry.against[name]) for name in METRICS]
                lines.append(f"| {entry.estimator} | {entry.set} | " + " | ".join(cells) + " |")
    if report.correlations:
        lines += reading.markdown(report.correlations)
    problems = [
        f"- {estimator} on {name}: {why}"
        for estimator, by_set in report.problems.items()
        for name, why in by_set.items()
    ]
    if problems:
        lines += ["", "## Not scored", "", *problems]
    if report.speeds:
        lines += ["", "## Speed (synthetic batch of 100,000 rows, best of two; hidden states, "
                  f"for one that needs them, of width {SPEED_HIDDEN_SIZE})", ""]  # fmt: skip
        lines += ["| estimator | seconds | rows/s |", "|---|---|---|"]
        for estimator, seconds in report.speeds.items():
            if seconds is None:
                lines.append(f"| {estimator} | – (it failed: see above) | – |")
            else:
                lines.append(f"| {estimator} | {seconds:.3f} | {100_000 / seconds:,.0f} |")
    return "\n".join(lines) + "\n"


def _drop_one_lines(report: Report, names: Sequence[str]) -> list[str]:
    lines = [
        "",
        "## Pearson with any one task left out (lowest, highest)",
        "",
        "| estimator | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    return lines + _per_set_rows(report, names, _drop_one_cell)


def _per_set_rows(
    report: Report, names: Sequence[str], cell: Callable[[Score | None], str]
) -> list[str]:
    """A table row per estimator, a cell per set (``–`` where ``cell`` has nothing); an
    estimator with nothing on any set is left out."""
    rows = []
    for estimator in report.estimators():
        cells = [cell(report.find(estimator, name)) for name in names]
        if any(value != "–" for value in cells):
            rows.append(f"| {estimator} | " + " | ".join(cells) + " |")
    return rows


def _dose_cell(entry: Score | None) -> str:
    if entry is None or entry.dose is None or entry.effective is None:
        return "–"
    return f"{entry.dose:.2f} / {entry.effective:.2f}"


def _drop_one_cell(entry: Score | None) -> str:
    span = entry.drop_one if entry is not None else None
    return "–" if span is None else f"{span[0]:.2f}, {span[1]:.2f}"


def _count_lines(report: Report) -> list[str]:
    """Per estimator: the sets where it is above the perfect baseline, and those where it is
    the closest estimator to the truth (against the runner-up), each with how many resolve."""
    estimators = [e for e in report.estimators() if e not in (CEILING, PERFECT_BASELINE)]
    best: dict[str, list[power.Comparison]] = {e: [] for e in estimators}
    for credit in report.sets:
        ranked = sorted(
            (entry for e in estimators if (entry := report.find(e, credit.name)) is not None),
            key=lambda entry: -entry.pearson,
        )
        if len(ranked) > 1:
            best[ranked[0].estimator].append(power.compare(ranked[0], ranked[1]))
    lines = [
        "",
        "## Counts over sets, with how many resolve them",
        "",
        "Resolved: the paired 95% interval of the Pearson difference excludes 0; robust: the "
        "difference keeps its sign whichever one task is left out. Closest: the set's highest "
        "Pearson, against the runner-up.",
        "",
        f"| estimator | against {PERFECT_BASELINE} | closest to the truth |",
        "|---|---|---|",
    ]
    for estimator in estimators:
        against = power.count(report.comparisons(estimator, PERFECT_BASELINE))
        closest = power.count(best[estimator])
        closest_text = (
            f"on {closest.sets} (resolved on {closest.resolved}, robust on {closest.robust})"
        )
        lines.append(f"| {estimator} | {against} | {closest_text} |")
    return lines


def plot(report: Report, path: Path) -> None:
    """Pearson with its interval, estimators x sets, the ceiling and the perfect baseline
    marked on each set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [credit.name for credit in report.sets]
    estimators = [e for e in report.estimators() if e not in (CEILING, PERFECT_BASELINE)]
    width = 0.8 / max(1, len(estimators))
    figure, axis = plt.subplots(figsize=(max(8, 1.2 * len(names) + 4), 5))
    positions = np.arange(len(names))
    for index, estimator in enumerate(estimators):
        values, low, high = [], [], []
        for name in names:
            entry = report.find(estimator, name)
            figures = entry.parts["all"]["pearson"] if entry is not None else None
            value = figures["value"] if figures else math.nan
            values.append(value)
            ci = figures["ci"] if figures else (math.nan, math.nan)
            low.append(value - ci[0] if not math.isnan(ci[0]) else 0.0)
            high.append(ci[1] - value if not math.isnan(ci[1]) else 0.0)
        axis.bar(
            positions + (index - (len(estimators) - 1) / 2) * width,
            values,
            width,
            yerr=[low, high],
            capsize=2,
            label=estimator,
        )
    for label, marker in ((PERFECT_BASELINE, "_"), (CEILING, "v")):
        points = []
        for name in names:
            entry = report.find(label, name)
            points.append(entry.parts["all"]["pearson"]["value"] if entry is not None else math.nan)
        axis.scatter(positions, points, marker=marker, s=300, color="black", label=label, zorder=4)
    axis.set_xticks(positions)
    axis.set_xticklabels(names, rotation=30, ha="right")
    axis.set_ylabel("Pearson correlation with the true advantage")
    axis.axhline(0.0, color="black", linewidth=0.6)
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_outputs(report: Report, out: Path) -> None:
    """``credit.md``, ``credit.json`` (the records, the problems, the speeds, the sets' metadata)
    and ``credit.png``, atomically."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "credit.md", markdown(report))
    payload = {
        "records": report.records(),
        "problems": report.problems,
        "speeds_s": report.speeds,
        "against": report.against,
        "seconds": report.seconds,
        "fidelity_and_learning": [item.record() for item in report.correlations],
        "sets": [
            {
                "name": credit.name,
                "kind": credit.kind,
                "rows": len(credit.batch),
                "settings": credit.settings,
                "made": credit.made,
            }
            for credit in report.sets
        ],
    }
    atomic_write_text(out / "credit.json", json.dumps(payload, indent=1, allow_nan=True) + "\n")
    plot(report, out / "credit.png")
