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

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from agentbench_rl.harness.results import atomic_write_bytes, atomic_write_text
from agentbench_rl.harness.stats import t_interval, threshold_crossing
from agentbench_rl.train.config import TrainConfig, apply_overrides, config_from_dict

GRID_ORDER = ("env", "estimator", "model", "seed")


@dataclass(frozen=True)
class SweepRun:
    """One run of the grid: its cell, seed, folder and config."""

    cell: str
    seed: int
    folder: Path
    config: TrainConfig


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
            values = {**self.base, **chosen}
            extra = self.estimator_params.get(str(values.get("estimator", "")), {})
            if extra:
                values["estimator_params"] = {**values.get("estimator_params", {}), **extra}
            config = config_from_dict(values)
            config = apply_overrides(config, overrides)
            runs.append(SweepRun(cell, config.seed, self.out / cell / f"seed{config.seed}", config))
        return runs


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text.rsplit("/", 1)[-1]).strip("_") or "x"


def load_sweep(path: Path, out: Path | None = None) -> Sweep:
    """Read a sweep file (``out`` overrides the file's output folder)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sweep file {path} not found")
    data = yaml.safe_load(path.read_text("utf-8")) or {}
    if not isinstance(data, dict) or not isinstance(data.get("grid"), dict):
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
    sweep = Sweep(
        name=str(data.get("name") or path.stem),
        out=Path(out or data.get("out") or "runs"),
        grid=grid,
        base=dict(data.get("base") or {}),
        estimator_params={str(k): dict(v) for k, v in per_estimator.items()},
    )
    for run in sweep.runs():
        run.config.validate()
    return sweep


def is_finished(folder: Path) -> bool:
    """Whether a run finished (``done.json`` is written last)."""
    return (Path(folder) / "done.json").is_file()


def _run_one(config_dict: dict[str, Any], folder: str) -> str:
    """Train (or resume) one run; a module-level function so Ray can ship it."""
    from agentbench_rl.train.ppo import train

    config = config_from_dict(config_dict)
    resume = (Path(folder) / "config.yaml").exists()
    train(config, Path(folder), resume=resume, console=None)
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
    todo = sorted(
        (run for run in runs if not is_finished(run.folder)), key=lambda run: run.seed
    )
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
            console.print(f"finished {ray.get(future)}")
    else:
        from agentbench_rl.train.ppo import train

        for run in todo:
            console.print(f"[bold]{run.cell}[/] seed {run.seed} -> {run.folder}")
            resume = (run.folder / "config.yaml").exists()
            train(run.config, run.folder, resume=resume, console=console)
    return summarize_sweep(sweep, overrides, console)


def read_metrics(folder: Path) -> list[dict[str, Any]]:
    """The metric rows of a run (a torn last line is skipped)."""
    path = Path(folder) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text("utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def validation_curve(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """Iteration -> validation success of one run."""
    return {int(r["iteration"]): float(r["val_success"]) for r in rows if "val_success" in r}


def _interval(values: list[float]) -> list[float] | None:
    if len(values) < 2:
        return None
    low, high = t_interval(values)
    return [round(low, 4), round(high, 4)]


def summarize_sweep(
    sweep: Sweep, overrides: Sequence[str] = (), console: Console | None = None
) -> dict[str, Any]:
    """Per cell: start and final validation success over seeds with 95% t-intervals, the
    95%-threshold criterion; written to ``<out>/<name>/summary.{json,md}`` with the plot."""
    cells: dict[str, dict[str, dict[int, float]]] = {}
    for run in sweep.runs(overrides):
        curve = validation_curve(read_metrics(run.folder))
        if curve:
            cells.setdefault(run.cell, {})[str(run.seed)] = curve
    summary: dict[str, Any] = {"sweep": sweep.name, "cells": {}}
    for cell, curves in cells.items():
        starts = [curve[min(curve)] for curve in curves.values()]
        finals = [curve[max(curve)] for curve in curves.values()]
        crossing = threshold_crossing(curves, 0.95)
        summary["cells"][cell] = {
            "seeds": sorted(curves, key=int),
            "start_success": {
                "mean": round(sum(starts) / len(starts), 4),
                "ci95": _interval(starts),
            },
            "final_success": {
                "mean": round(sum(finals) / len(finals), 4),
                "ci95": _interval(finals),
            },
            "final_iteration": max(max(curve) for curve in curves.values()),
            "per_seed": {
                seed: {"start": curve[min(curve)], "final": curve[max(curve)]}
                for seed, curve in curves.items()
            },
            "threshold_95": crossing.to_dict(),
        }
    folder = sweep.out / sweep.name
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(folder / "summary.md", summary_markdown(summary))
    if cells:
        try:
            plot_curves(cells, folder / "success.png", title=sweep.name)
        except ImportError:  # matplotlib is the plot extra
            if console is not None:
                console.print("no plot: pip install 'agentbench-rl[plot]' for success.png")
    if console is not None:
        console.print(summary_table(summary))
    return summary


def _ci_text(block: dict[str, Any]) -> str:
    ci = block["ci95"]
    return f"{block['mean']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown table."""
    lines = [
        f"# {summary['sweep']}",
        "",
        "Validation success (mean over seeds, 95% t-interval); start = iteration 0.",
        "",
        "| cell | seeds | start | final | final iteration | per seed (start -> final) |",
        "|---|---|---|---|---|---|",
    ]
    for cell, block in summary["cells"].items():
        per_seed = ", ".join(
            f"{seed}: {v['start']:.3f} -> {v['final']:.3f}" for seed, v in block["per_seed"].items()
        )
        lines.append(
            f"| {cell} | {len(block['seeds'])} | {_ci_text(block['start_success'])} | "
            f"{_ci_text(block['final_success'])} | {block['final_iteration']} | {per_seed} |"
        )
    return "\n".join(lines) + "\n"


def summary_table(summary: dict[str, Any]) -> Table:
    """The summary as a rich table (printed at the end of a sweep)."""
    table = Table(title=f"{summary['sweep']}: validation success, 95% CI over seeds")
    for column in ("cell", "seeds", "start", "final", "iteration"):
        table.add_column(column)
    for cell, block in summary["cells"].items():
        table.add_row(
            cell,
            str(len(block["seeds"])),
            _ci_text(block["start_success"]),
            _ci_text(block["final_success"]),
            str(block["final_iteration"]),
        )
    return table


def plot_curves(cells: dict[str, dict[str, dict[int, float]]], path: Path, title: str = "") -> None:
    """Success against iteration: one line per cell (mean over seeds), a band from the lowest
    to the highest seed, written as a PNG (needs matplotlib, the ``plot`` extra)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for cell, curves in cells.items():
        iterations = sorted(set.intersection(*(set(c) for c in curves.values())))
        values = [[curves[s][i] for s in curves] for i in iterations]
        mean = [sum(v) / len(v) for v in values]
        label = cell.removeprefix(f"{title}-") if title else cell
        line = axes.plot(iterations, mean, marker="o", label=f"{label} ({len(curves)} seeds)")[0]
        axes.fill_between(
            iterations,
            [min(v) for v in values],
            [max(v) for v in values],
            color=line.get_color(),
            alpha=0.2,
        )
    axes.set_xlabel("iteration")
    axes.set_ylabel("validation success")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    band = "mean over seeds; band from the lowest to the highest seed"
    axes.set_title(f"{title}\n{band}", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())
