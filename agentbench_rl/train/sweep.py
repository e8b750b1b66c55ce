"""Sweeps: a grid of training runs (env x estimator x model x seed), resumable, with a summary.

A sweep file is YAML::

    name: sokoban-tiny-cpu        # cells are named <name>-<values of the grid keys but seed>
    out: baselines/results        # runs go to <out>/<cell>/seed<k>/
    grid: {estimator: [gigpo, grpo], seed: [0, 1, 2]}
    base: {env: sokoban, model: tiny, iterations: 20, ...}   # TrainConfig fields

An optional ``estimator_params`` mapping gives parameters per estimator
(``{bipace: {epsilon: 0.1}}``), merged into ``base.estimator_params`` for that estimator's runs.

Finished runs (``done.json``) are skipped, unfinished ones resume from their checkpoint; runs
start seed-major (every cell of seed 0, then seed 1, ...). Runs go to Ray as tasks when Ray is
installed (``runner="auto"``), else one after another. At the end,
``summary.json`` and ``summary.md`` in ``<out>/<name>/`` give per cell the final validation
success with a 95% t-interval over seeds, the start (iteration 0) and the 95%-threshold
criterion, and ``success.png`` plots success against iteration, one line per cell with a band
over seeds.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.core.atomic import atomic_write_bytes, atomic_write_text
from agentbench_rl.extras import install_hint
from agentbench_rl.harness.stats import paired_difference, t_interval, threshold_crossing
from agentbench_rl.spec.records import MetricsRow
from agentbench_rl.spec.run_folder import RunFolder
from agentbench_rl.train.config import (
    TrainConfig,
    apply_overrides,
    config_from_dict,
    read_yaml_mapping,
)

GRID_ORDER = ("env", "estimator", "model", "seed")
PAIRING_KEYS = ("estimator", "seed")  # runs that differ only in these are compared in pairs
BASELINES = ("grpo", "gigpo")  # every other estimator is compared with these
THRESHOLD = 0.95
#: The validation figures a run records: the val split's and, with a training panel, the panel's.
FIGURES = ("val_success", "panel_success")
FIGURE_LABELS = {"val_success": "validation success", "panel_success": "training-panel success"}
#: The per-iteration figures of what the estimator handed PPO, averaged over a run: the dose
#: (share of rows with a non-zero advantage), the dose trained after a matched cut, the scale.
DOSE_FIGURES = {"dose": "adv/dose", "trained_dose": "adv/trained_dose", "scale": "adv/raw_abs_mean"}


@dataclass(frozen=True)
class SweepRun:
    """One run of the grid: its cell, seed, folder and config."""

    cell: str
    seed: int
    folder: Path
    config: TrainConfig
    context: str = ""  # the cell without its estimator: runs of one context and seed are paired

    @property
    def finished(self) -> bool:
        """Whether the run has finished (its folder's ``done.json``)."""
        return RunFolder(self.folder).is_finished()


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep file."""

    name: str
    out: Path
    grid: dict[str, list[Any]]
    base: dict[str, Any]
    estimator_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The figure runs are compared on: ``val_success`` (the val split) or ``panel_success``
    #: (runs with a training panel); the other one, where runs hold it, is summarised beside.
    figure: str = "val_success"

    def runs(self, overrides: Sequence[str] = ()) -> list[SweepRun]:
        """Every run of the grid, cells in grid order, seeds innermost."""
        keys = sorted(self.grid, key=lambda k: (GRID_ORDER.index(k) if k in GRID_ORDER else 9, k))
        runs = []
        for values in itertools.product(*(self.grid[key] for key in keys)):
            chosen = dict(zip(keys, values, strict=True))
            label = [_slug(str(chosen[k])) for k in keys if k != "seed"]
            cell = "-".join([self.name, *label])
            context = "-".join(
                [self.name, *(_slug(str(chosen[k])) for k in keys if k not in PAIRING_KEYS)]
            )
            fields = {**self.base, **chosen}
            extra = self.estimator_params.get(str(fields.get("estimator", "")), {})
            if extra:
                fields["estimator_params"] = {**fields.get("estimator_params", {}), **extra}
            config = config_from_dict(fields)
            config = apply_overrides(config, overrides)
            folder = self.out / cell / f"seed{config.seed}"
            runs.append(SweepRun(cell, config.seed, folder, config, context))
        return runs


#: A sweep's name: one plain folder name (no separator, no leading dot, so never ``..``).
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text.rsplit("/", 1)[-1]).strip("_") or "x"


def load_sweep(path: Path, out: Path | None = None) -> Sweep:
    """Read a sweep file (``out`` overrides the file's output folder)."""
    path = Path(path)
    data = read_yaml_mapping(path, "sweep file")
    if not isinstance(data.get("grid"), dict):
        raise ValueError(f"{path}: a sweep file needs a 'grid' mapping (and 'base')")
    grid = {
        key: value if isinstance(value, list) else [value] for key, value in data["grid"].items()
    }
    for key, values in grid.items():
        if not values:
            raise ValueError(f"{path}: grid key '{key}' has no values")
    per_estimator = data.get("estimator_params") or {}
    if not isinstance(per_estimator, dict) or not all(
        isinstance(v, dict) for v in per_estimator.values()
    ):
        raise ValueError(f"{path}: estimator_params maps estimator names to parameter mappings")
    figure = str(data.get("figure") or "val_success")
    if figure not in FIGURES:
        raise ValueError(f"{path}: figure '{figure}' (choose from {', '.join(FIGURES)})")
    name = str(data.get("name") or path.stem)
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{path}: name '{name}' must be letters, digits, '-', '_' and '.' (not first): it "
            "names the sweep's folders under out"
        )
    sweep = Sweep(
        name=name,
        out=Path(out or data.get("out") or "runs"),
        grid=grid,
        base=dict(data.get("base") or {}),
        estimator_params={str(k): dict(v) for k, v in per_estimator.items()},
        figure=figure,
    )
    for run in sweep.runs():  # every cell, before the first run starts
        try:
            run.config.check()
        except ValueError as problem:
            raise ValueError(f"{path}: cell {run.cell} seed {run.seed}: {problem}") from None
    return sweep


def _run_one(config_dict: dict[str, Any], folder: str) -> str:
    """Train (or resume) one run; a module-level function so Ray can ship it."""
    from agentbench_rl.train.ppo import train

    config = config_from_dict(config_dict)
    train(config, Path(folder), resume=True, console=None)
    return folder


def run_sweep(
    sweep: Sweep,
    overrides: Sequence[str] = (),
    runner: str = "auto",
    console: Console | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
) -> dict[str, Any]:
    """Run every unfinished run of the grid, then write and return the summary.

    ``runner``: ``auto`` (Ray tasks when Ray is installed, else sequential), ``ray`` or
    ``sequential``.
    """
    if runner not in ("auto", "ray", "sequential"):
        raise ValueError(f"runner '{runner}' (choose from auto, ray, sequential)")
    runs = sweep.runs(overrides)
    # Seed-major: every cell of the first seed before any of the next, so a sweep stopped part
    # way holds complete pairs (same seed, every estimator) rather than all seeds of a few cells.
    todo = sorted((run for run in runs if not run.finished), key=lambda run: run.seed)
    checked = set()
    for run in todo:  # what the runs need is installed, before the first one starts
        needs = (run.config.engine, run.config.backend, run.config.model)
        if needs not in checked:
            run.config.check_installed()
            checked.add(needs)
    if sweep.out.exists() and not sweep.out.is_dir():
        raise ValueError(f"--out {sweep.out} is a file, not a folder for the sweep's runs")
    try:
        sweep.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--out {sweep.out} cannot be made ({error.strerror or error})") from None
    console = console or Console(stderr=True)
    console.print(f"sweep {sweep.name}: {len(runs)} runs, {len(runs) - len(todo)} finished")
    use_ray = runner == "ray"
    if runner == "auto":
        try:
            import ray

            use_ray = True
        except ImportError:
            use_ray = False
    if todo and use_ray:
        from agentbench_rl.rollout.ray_workers import init_ray

        ray = init_ray(todo[0].config.ray_address)
        remote = ray.remote(num_cpus=cpus_per_run, num_gpus=gpus_per_run)(_run_one)
        futures = [remote.remote(run.config.to_dict(), str(run.folder)) for run in todo]
        for future in futures:
            try:
                console.print(f"finished {ray.get(future)}")
            except ray.exceptions.RayTaskError as failed:  # the run's own error, in one line
                for other in futures:  # stop the rest (a run checkpoints as at Ctrl-C)
                    ray.cancel(other)
                for other in futures:
                    with contextlib.suppress(Exception):
                        ray.get(other)
                cause = failed.cause
                raise cause if isinstance(cause, Exception) else failed from None
    else:
        from agentbench_rl.train.ppo import train

        for run in todo:
            console.print(f"[bold]{run.cell}[/] seed {run.seed} -> {run.folder}")
            train(run.config, run.folder, resume=True, console=console)
    return summarize_sweep(sweep, overrides, console)


def validation_curve(rows: Sequence[MetricsRow], figure: str = "val_success") -> dict[int, float]:
    """Iteration -> validation success of one run (``figure``: ``panel_success`` for the
    training panel's)."""
    return {int(r["iteration"]): float(r[figure]) for r in rows if figure in r}  # type: ignore[literal-required]


def iterations_to(curve: dict[int, float], threshold: float = THRESHOLD) -> tuple[int, bool]:
    """The first validated iteration at which ``curve`` reaches ``threshold``, and whether it
    did; a run that never did counts as one validation interval past its last (censored: the
    figure then says "not within the budget", and a mean over seeds is a lower bound).

    Example:
        >>> iterations_to({0: 0.1, 10: 0.96, 20: 0.9}), iterations_to({0: 0.1, 10: 0.5})
        ((10, True), (20, False))
    """
    for iteration in sorted(curve):
        if curve[iteration] >= threshold:
            return iteration, True
    ordered = sorted(curve)
    step = ordered[-1] - ordered[-2] if len(ordered) > 1 else 1
    return ordered[-1] + step, False


def dose_figures(rows: Sequence[MetricsRow]) -> dict[str, float]:
    """A run's mean dose, trained dose and advantage scale over its training iterations
    (:data:`DOSE_FIGURES`; those its rows do not hold are left out)."""
    figures = {}
    for name, key in DOSE_FIGURES.items():
        values = [float(r[key]) for r in rows if key in r]  # type: ignore[literal-required]
        if values:
            figures[name] = round(sum(values) / len(values), 6)
    return figures


def _interval(values: list[float]) -> list[float] | None:
    if len(values) < 2:
        return None
    low, high = t_interval(values)
    return [round(low, 4), round(high, 4)]


def run_figures(curve: dict[int, float]) -> dict[str, float]:
    """The figures a run is compared on: the mean validation success over the validations
    after the start (the AUC; iteration 0 is the shared start, the same for every estimator),
    the final validation success, and the iterations to 0.95 (:func:`iterations_to`).

    Example:
        >>> run_figures({0: 0.4, 5: 0.5, 10: 0.7})
        {'mean': 0.6, 'final': 0.7, 'iterations_to_95': 15.0}
    """
    later = [value for iteration, value in curve.items() if iteration > 0] or [curve[min(curve)]]
    return {
        "mean": round(sum(later) / len(later), 6),
        "final": curve[max(curve)],
        "iterations_to_95": float(iterations_to(curve)[0]),
    }


def paired_comparisons(
    runs: Sequence[SweepRun],
    curves: dict[Path, dict[int, float]],
    figure: str = "val_success",
    metrics: Sequence[str] = ("mean", "final"),
) -> list[dict[str, Any]]:
    """Each estimator minus GRPO and minus GiGPO, on the seeds both finished (same context),
    for each of ``metrics`` of ``figure``'s curves (:func:`run_figures`): difference, 95%
    t-interval, paired t-test p-value, and the difference 80% power would detect with this
    many seeds."""
    finished: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    for run in runs:
        if run.folder in curves and run.finished:
            key = (run.context, run.config.estimator)
            finished.setdefault(key, {})[run.seed] = run_figures(curves[run.folder])
    rows = []
    for (context, baseline), base in finished.items():
        if baseline not in BASELINES:
            continue
        for (other_context, estimator), figures in finished.items():
            if other_context != context or estimator == baseline:
                continue
            if estimator in BASELINES and BASELINES.index(estimator) < BASELINES.index(baseline):
                continue  # GiGPO - GRPO is listed; GRPO - GiGPO would only mirror it
            seeds = sorted(set(base) & set(figures))
            if not seeds:
                continue
            for metric in metrics:
                difference = paired_difference(
                    [figures[s][metric] for s in seeds], [base[s][metric] for s in seeds]
                )
                rows.append(
                    {
                        "context": context,
                        "estimator": estimator,
                        "baseline": baseline,
                        "figure": figure,
                        "metric": metric,
                        "seeds": seeds,
                        **difference.to_dict(),
                    }
                )
    order = {name: index for index, name in enumerate(BASELINES)}
    rows.sort(key=lambda r: (r["context"], order[r["baseline"]], r["estimator"], r["metric"]))
    return rows


def summarize_sweep(
    sweep: Sweep, overrides: Sequence[str] = (), console: Console | None = None
) -> dict[str, Any]:
    """Per cell: start, final and mean validation success over seeds with 95% t-intervals and
    the 95%-threshold criterion; the paired comparisons with GRPO and GiGPO; written to
    ``<out>/<name>/summary.{json,md}`` with the plot."""
    runs = sweep.runs(overrides)
    other = next(f for f in FIGURES if f != sweep.figure)
    cells: dict[str, dict[str, dict[int, float]]] = {}
    curves: dict[Path, dict[int, float]] = {}
    other_cells: dict[str, dict[str, dict[int, float]]] = {}
    other_curves: dict[Path, dict[int, float]] = {}
    doses: dict[str, dict[str, dict[str, float]]] = {}
    recorded = _recorded_runs(sweep)
    for run in runs:
        seed = str(run.seed)
        rows = RunFolder(run.folder).read_metrics().rows
        curve = validation_curve(rows, sweep.figure)
        beside = validation_curve(rows, other)
        dose = dose_figures(rows)
        kept = recorded.get(run.cell, {}).get(seed)
        if not rows and run.finished and kept:  # its metrics stayed on the machine that ran it
            curve = {int(i): float(v) for i, v in kept["curve"]}
            beside = {int(i): float(v) for i, v in kept.get(other, [])}
            dose = dict(kept.get("dose", {}))
        if curve:
            cells.setdefault(run.cell, {})[seed] = curve
            curves[run.folder] = curve
            doses.setdefault(run.cell, {})[seed] = dose
        if beside:
            other_cells.setdefault(run.cell, {})[seed] = beside
            other_curves[run.folder] = beside
    summary: dict[str, Any] = {"sweep": sweep.name, "figure": sweep.figure, "cells": {}}
    for cell, by_seed in cells.items():
        starts = [curve[min(curve)] for curve in by_seed.values()]
        finals = [curve[max(curve)] for curve in by_seed.values()]
        means = [run_figures(curve)["mean"] for curve in by_seed.values()]
        to_95 = [run_figures(curve)["iterations_to_95"] for curve in by_seed.values()]
        summary["cells"][cell] = {
            "seeds": sorted(by_seed, key=int),
            "finished_seeds": sorted(
                (str(r.seed) for r in runs if r.cell == cell and r.finished), key=int
            ),
            "start_success": _mean_block(starts),
            "final_success": _mean_block(finals),
            "mean_success": _mean_block(means),
            "final_iteration": max(max(curve) for curve in by_seed.values()),
            "per_seed": {
                seed: {
                    "start": curve[min(curve)],
                    "final": curve[max(curve)],
                    # the whole curve, so the summary alone redraws and reanalyses the runs
                    "curve": [[iteration, curve[iteration]] for iteration in sorted(curve)],
                    **(
                        {other: [[i, value] for i, value in sorted(seen.items())]}
                        if (seen := other_cells.get(cell, {}).get(seed))
                        else {}
                    ),
                    **({"dose": doses[cell][seed]} if doses[cell].get(seed) else {}),
                }
                for seed, curve in by_seed.items()
            },
            "threshold_95": threshold_crossing(by_seed, THRESHOLD).to_dict(),
            "iterations_to_95": _mean_block(to_95),
            "dose": {
                name: _mean_block(values)
                for name in DOSE_FIGURES
                if (values := [d[name] for d in doses[cell].values() if name in d])
            },
        }
        if cell in other_cells:
            others = list(other_cells[cell].values())
            summary["cells"][cell][other] = {
                "start": _mean_block([curve[min(curve)] for curve in others]),
                "mean": _mean_block([run_figures(curve)["mean"] for curve in others]),
                "final": _mean_block([curve[max(curve)] for curve in others]),
            }
    metrics = ("mean", "final", "iterations_to_95")
    summary["paired"] = paired_comparisons(runs, curves, sweep.figure, metrics)
    if other_curves:
        summary["paired"] += paired_comparisons(runs, other_curves, other)
    folder = sweep.out / sweep.name
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(folder / "summary.md", summary_markdown(summary))
    if cells:
        try:
            labels = ("iteration", FIGURE_LABELS[sweep.figure])
            references = _references(runs, cells)
            plot_curves(cells, folder / "success.png", sweep.name, references, labels)
            if other_cells:
                labels = ("iteration", FIGURE_LABELS[other])
                plot_curves(other_cells, folder / f"{other}.png", sweep.name, references, labels)
        except ImportError:  # matplotlib is the plot extra
            if console is not None:
                console.print(f"no plot: {install_hint('plot')} for success.png")
    if console is not None:
        console.print(summary_table(summary))
    return summary


def _recorded_runs(sweep: Sweep) -> dict[str, dict[str, dict[str, Any]]]:
    """Cell -> seed -> what the sweep's last ``summary.json`` recorded of that run (its curves
    and dose): a finished run whose metrics are not in this checkout (a campaign commits its
    runs' ``done.json`` and its summary, not every metrics journal) is summarised from it."""
    path = sweep.out / sweep.name / "summary.json"
    if not path.is_file():
        return {}
    try:
        cells = json.loads(path.read_text("utf-8")).get("cells", {})
    except ValueError:
        raise ValueError(f"{path}: not JSON (delete it to summarise from the runs alone)") from None
    return {
        cell: {
            seed: record
            for seed, record in block.get("per_seed", {}).items()
            if isinstance(record, dict) and "curve" in record
        }
        for cell, block in cells.items()
    }


def _references(runs: Sequence[SweepRun], cells: dict[str, Any]) -> dict[str, list[str]]:
    """Cell -> the GRPO and GiGPO cells of its context (what its panel is compared with)."""
    baselines: dict[str, list[str]] = {}
    for run in runs:
        if run.config.estimator in BASELINES and run.cell in cells:
            found = baselines.setdefault(run.context, [])
            if run.cell not in found:
                found.append(run.cell)
    return {
        run.cell: [c for c in baselines.get(run.context, []) if c != run.cell]
        for run in runs
        if run.cell in cells
    }


def _mean_block(values: list[float]) -> dict[str, Any]:
    return {"mean": round(sum(values) / len(values), 4), "ci95": _interval(values)}


def _ci_text(block: dict[str, Any], digits: int = 3) -> str:
    ci = block["ci95"]
    return f"{block['mean']:.{digits}f}" + (
        f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else ""
    )


def _threshold_text(block: dict[str, Any]) -> str:
    first = block["first_iteration"]
    reached = sorted(v for v in first.values() if v is not None)
    text = f"{len(reached)}/{len(first)}"
    return text + (f" (first at {', '.join(map(str, reached))})" if reached else "")


def _short(cell: str, sweep: str) -> str:
    return cell.removeprefix(f"{sweep}-")


def _difference_text(row: dict[str, Any], digits: int = 3) -> str:
    ci = row["ci95"]
    return f"{row['mean']:+.{digits}f}" + (
        f" [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]" if ci else ""
    )


def _p_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown: the cells, then the paired comparisons."""
    name = summary["sweep"]
    figure = summary.get("figure", "val_success")
    other = next(f for f in FIGURES if f != figure)
    label = FIGURE_LABELS[figure]
    beside = any(other in block for block in summary["cells"].values())
    dosed = any(block.get("dose") for block in summary["cells"].values())
    lines = [
        f"# {name}",
        "",
        f"{label.capitalize()} ({figure}) over seeds (mean, 95% t-interval); start = iteration "
        "0; mean = mean of the validations after the start (the AUC); reached 0.95 = seeds "
        "that reached 0.95 (the 95%-threshold criterion); to 0.95 = iterations to 0.95, a seed "
        "that never reached it counted one validation past the last (so a lower bound)"
        + (
            "; dose = share of rows with a non-zero advantage, scale = mean |A|, both over the "
            "iterations"
            if dosed
            else ""
        )
        + (f"; {FIGURE_LABELS[other]} ({other}) beside" if beside else "")
        + ".",
        "",
    ]
    header = ["cell", "seeds (finished)", "start", "mean", "final", "final iteration"]
    header += ["reached 0.95", "to 0.95"]
    header += ["dose", "scale"] if dosed else []
    header += [f"{other}: start -> final"] if beside else []
    header += ["per seed (start -> final)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell, block in summary["cells"].items():
        per_seed = ", ".join(
            f"{seed}: {v['start']:.3f} -> {v['final']:.3f}" for seed, v in block["per_seed"].items()
        )
        row = [
            _short(cell, name),
            f"{len(block['seeds'])} ({len(block['finished_seeds'])})",
            _ci_text(block["start_success"]),
            _ci_text(block["mean_success"]),
            _ci_text(block["final_success"]),
            str(block["final_iteration"]),
            _threshold_text(block["threshold_95"]),
            _ci_text(block["iterations_to_95"], 1) if "iterations_to_95" in block else "-",
        ]
        if dosed:
            dose = block.get("dose", {})
            row += [_ci_text(dose[k]) if k in dose else "-" for k in ("dose", "scale")]
        if beside:
            other_block = block.get(other)
            row.append(
                f"{other_block['start']['mean']:.3f} -> {_ci_text(other_block['final'])}"
                if other_block
                else "-"
            )
        lines.append("| " + " | ".join([*row, per_seed]) + " |")
    if summary.get("paired"):
        lines += [
            "",
            "## Paired comparisons",
            "",
            "Estimator minus baseline on the same seeds (finished runs only): mean difference "
            "with its 95% t-interval, the paired t-test p-value, and the difference these seeds "
            "would detect with 80% power at the 5% level. mean: the AUC; iterations_to_95: "
            "fewer is faster.",
            "",
            "| context | estimator | minus | figure | metric | seeds | difference [95% CI] | p | "
            "detectable (80% power) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in summary["paired"]:
            detectable = row["detectable_80"]
            digits = 1 if row["metric"] == "iterations_to_95" else 3
            lines.append(
                f"| {row['context']} | {row['estimator']} | {row['baseline']} | "
                f"{row.get('figure', 'val_success')} | {row['metric']} | {len(row['seeds'])} | "
                f"{_difference_text(row, digits)} | {_p_text(row['p_value'])} | "
                f"{'-' if detectable is None else f'{detectable:.{digits}f}'} |"
            )
    return "\n".join(lines) + "\n"


def summary_table(summary: dict[str, Any]) -> Table:
    """The cells as a rich table (printed at the end of a sweep)."""
    table = Table(title=f"{summary['sweep']}: validation success, 95% CI over seeds")
    for column in ("cell", "seeds", "start", "mean", "final", "iteration", "reached 0.95"):
        table.add_column(column)
    for cell, block in summary["cells"].items():
        table.add_row(
            _short(cell, summary["sweep"]),
            str(len(block["seeds"])),
            _ci_text(block["start_success"]),
            _ci_text(block["mean_success"]),
            _ci_text(block["final_success"]),
            str(block["final_iteration"]),
            _threshold_text(block["threshold_95"]),
        )
    return table


def _band(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    low, high = t_interval(values)
    return low, high


def plot_curves(
    cells: dict[str, dict[str, dict[int, float]]],
    path: Path,
    title: str = "",
    references: dict[str, list[str]] | None = None,
    axis_labels: tuple[str, str] = ("iteration", "validation success"),
) -> None:
    """Success against iteration (or any ``axis_labels``' figure against a step), written as a
    PNG (needs matplotlib, the ``plot`` extra): per cell the mean over seeds with a band of its
    95% t-interval (iterations every seed reached).

    Up to three cells share one panel; more get one panel each, where ``references`` (cell ->
    the cells to compare it with, GRPO and GiGPO) are drawn as dashed means.
    """
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    def mean_curve(curves: dict[str, dict[int, float]]) -> tuple[list[int], list[list[float]]]:
        iterations = sorted(set.intersection(*(set(c) for c in curves.values())))
        return iterations, [[curves[s][i] for s in curves] for i in iterations]

    names = list(cells)
    single = len(names) <= 3
    columns = 1 if single else min(4, len(names))
    rows = 1 if single else -(-len(names) // columns)
    size = (6.4, 4.0) if single else (3.2 * columns, 2.6 * rows + 0.6)
    figure, grid = plt.subplots(rows, columns, figsize=size, dpi=120, squeeze=False, sharey=True)
    colours = {name: f"C{index}" for index, name in enumerate(names)}
    panels = [names] if single else [[name] for name in names]
    for axes, members in zip(grid.flat, panels, strict=False):
        for reference in [] if single else (references or {}).get(members[0], []):
            iterations, values = mean_curve(cells[reference])
            axes.plot(
                iterations,
                [sum(v) / len(v) for v in values],
                linestyle="--",
                color=colours[reference],
                label=_short(reference, title),
            )
        for cell in members:
            iterations, values = mean_curve(cells[cell])
            bands = [_band(v) for v in values]
            label = f"{_short(cell, title)} ({len(cells[cell])} seeds)"
            line = axes.plot(
                iterations,
                [sum(v) / len(v) for v in values],
                marker="o",
                markersize=3,
                color=colours[cell],
                label=label,
            )[0]
            axes.fill_between(
                iterations,
                [b[0] for b in bands],
                [b[1] for b in bands],
                color=line.get_color(),
                alpha=0.2,
            )
        axes.set_xlabel(axis_labels[0])
        axes.set_ylabel(axis_labels[1])
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    for axes in list(grid.flat)[len(panels) :]:
        axes.set_visible(False)
    band = "mean over seeds; band: 95% t-interval over seeds"
    if not single and references:
        band += "; dashed: GRPO and GiGPO means"
    figure.suptitle(f"{title}\n{band}", fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())
