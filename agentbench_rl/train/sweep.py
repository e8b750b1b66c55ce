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


def validation_curve(rows: Sequence[MetricsRow]) -> dict[int, float]:
    """Iteration -> validation success of one run."""
    return {int(r["iteration"]): float(r["val_success"]) for r in rows if "val_success" in r}


def _interval(values: list[float]) -> list[float] | None:
    if len(values) < 2:
        return None
    low, high = t_interval(values)
    return [round(low, 4), round(high, 4)]


def run_figures(curve: dict[int, float]) -> dict[str, float]:
    """The two figures a run is compared on: the mean validation success over the validations
    after the start (iteration 0 is the shared start, the same for every estimator) and the
    final validation success.

    Example:
        >>> run_figures({0: 0.4, 5: 0.5, 10: 0.7})
        {'mean': 0.6, 'final': 0.7}
    """
    later = [value for iteration, value in curve.items() if iteration > 0] or [curve[min(curve)]]
    return {"mean": round(sum(later) / len(later), 6), "final": curve[max(curve)]}


def paired_comparisons(
    runs: Sequence[SweepRun], curves: dict[Path, dict[int, float]]
) -> list[dict[str, Any]]:
    """Each estimator minus GRPO and minus GiGPO, on the seeds both finished (same context),
    for the mean of the validations and for the final one: difference, 95% t-interval,
    paired t-test p-value, and the difference 80% power would detect with this many seeds."""
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
            for metric in ("mean", "final"):
                difference = paired_difference(
                    [figures[s][metric] for s in seeds], [base[s][metric] for s in seeds]
                )
                rows.append(
                    {
                        "context": context,
                        "estimator": estimator,
                        "baseline": baseline,
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
    cells: dict[str, dict[str, dict[int, float]]] = {}
    curves: dict[Path, dict[int, float]] = {}
    for run in runs:
        curve = validation_curve(RunFolder(run.folder).read_metrics().rows)
        if curve:
            cells.setdefault(run.cell, {})[str(run.seed)] = curve
            curves[run.folder] = curve
    summary: dict[str, Any] = {"sweep": sweep.name, "cells": {}}
    for cell, by_seed in cells.items():
        starts = [curve[min(curve)] for curve in by_seed.values()]
        finals = [curve[max(curve)] for curve in by_seed.values()]
        means = [run_figures(curve)["mean"] for curve in by_seed.values()]
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
                seed: {"start": curve[min(curve)], "final": curve[max(curve)]}
                for seed, curve in by_seed.items()
            },
            "threshold_95": threshold_crossing(by_seed, THRESHOLD).to_dict(),
        }
    summary["paired"] = paired_comparisons(runs, curves)
    folder = sweep.out / sweep.name
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(folder / "summary.md", summary_markdown(summary))
    if cells:
        try:
            plot_curves(cells, folder / "success.png", sweep.name, _references(runs, cells))
        except ImportError:  # matplotlib is the plot extra
            if console is not None:
                console.print(f"no plot: {install_hint('plot')} for success.png")
    if console is not None:
        console.print(summary_table(summary))
    return summary


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


def _ci_text(block: dict[str, Any]) -> str:
    ci = block["ci95"]
    return f"{block['mean']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _threshold_text(block: dict[str, Any]) -> str:
    first = block["first_iteration"]
    reached = sorted(v for v in first.values() if v is not None)
    text = f"{len(reached)}/{len(first)}"
    return text + (f" (first at {', '.join(map(str, reached))})" if reached else "")


def _short(cell: str, sweep: str) -> str:
    return cell.removeprefix(f"{sweep}-")


def _difference_text(row: dict[str, Any]) -> str:
    ci = row["ci95"]
    return f"{row['mean']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def _p_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown: the cells, then the paired comparisons."""
    name = summary["sweep"]
    lines = [
        f"# {name}",
        "",
        "Validation success over seeds (mean, 95% t-interval); start = iteration 0; mean = mean "
        "of the validations after the start; reached 0.95 = seeds whose validation success "
        "reached 0.95 (the 95%-threshold criterion).",
        "",
        "| cell | seeds (finished) | start | mean | final | final iteration | reached 0.95 | "
        "per seed (start -> final) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell, block in summary["cells"].items():
        per_seed = ", ".join(
            f"{seed}: {v['start']:.3f} -> {v['final']:.3f}" for seed, v in block["per_seed"].items()
        )
        lines.append(
            f"| {_short(cell, name)} | {len(block['seeds'])} ({len(block['finished_seeds'])}) | "
            f"{_ci_text(block['start_success'])} | {_ci_text(block['mean_success'])} | "
            f"{_ci_text(block['final_success'])} | {block['final_iteration']} | "
            f"{_threshold_text(block['threshold_95'])} | {per_seed} |"
        )
    if summary.get("paired"):
        lines += [
            "",
            "## Paired comparisons",
            "",
            "Estimator minus baseline on the same seeds (finished runs only): mean difference "
            "of validation success with its 95% t-interval, the paired t-test p-value, and the "
            "difference these seeds would detect with 80% power at the 5% level.",
            "",
            "| context | estimator | minus | figure | seeds | difference [95% CI] | p | "
            "detectable (80% power) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in summary["paired"]:
            detectable = row["detectable_80"]
            lines.append(
                f"| {row['context']} | {row['estimator']} | {row['baseline']} | "
                f"{row['metric']} | {len(row['seeds'])} | {_difference_text(row)} | "
                f"{_p_text(row['p_value'])} | "
                f"{'-' if detectable is None else f'{detectable:.3f}'} |"
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
