"""``agentbench-rl bench learning``: which estimator learns fastest, measured exactly.

Runs one job per (MDP, estimator) (``loop.run_job``, all seeds at once), in ``workers``
processes; each job's curves are written atomically to ``out/jobs/`` as soon as it ends, so a
killed run resumes with the jobs it has not finished (a job file made with other settings is
recomputed). Then the table (``learning.md``, ``learning.csv``), the summary with the whole
configuration (``learning.json``) and the plot (``learning.png``).
"""

from __future__ import annotations

import json
import os
import re
import resource
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentbench_rl.bench.learning.family import FAMILY
from agentbench_rl.bench.learning.loop import (
    ORACLE,
    JobResult,
    Learner,
    LearningConfig,
    check_oracle_params,
    default_estimators,
    run_job,
)
from agentbench_rl.bench.learning.mdp import optimal_success
from agentbench_rl.bench.learning.report import (
    REFERENCES,
    csv_table,
    markdown_table,
    plot,
    summarise,
)
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.estimators.registry import resolve
from agentbench_rl.progress import progress_display
from agentbench_rl.spec.assignments import parse_assignments


def learners(labels: Sequence[str], params: Sequence[str]) -> list[Learner]:
    """Parse ``--estimator`` labels and apply each ``--param key=value`` to every estimator
    that takes ``key``; raise ``ValueError`` for an unknown estimator, a parameter no selected
    estimator takes, or a value out of range.

    Example:
        >>> [s.params for s in learners(["grpo", "gigpo"], ["omega=0.5"])]
        [{}, {'omega': 0.5}]
    """
    specs = [Learner.parse(label) for label in labels]
    extra = parse_assignments(params, "--param")
    used: set[str] = set()
    result = []
    for spec in specs:
        if spec.name == ORACLE:
            merged = {key: value for key, value in extra.items() if key == "gamma"}
            used.update(merged)
            merged.update(spec.params)
            check_oracle_params(merged)
            result.append(Learner(spec.label, spec.name, merged))
            continue
        estimator = resolve(spec.name)
        # every estimator, entry points included, is declared (estimators/registry.py)
        merged = {key: value for key, value in extra.items() if key in estimator.params}
        used.update(merged)
        merged.update(spec.params)
        estimator.check_params(merged)
        result.append(Learner(spec.label, spec.name, merged))
    unused = sorted(set(extra) - used)
    if unused:
        raise ValueError(f"learning: no selected estimator takes parameter(s) {', '.join(unused)}")
    if len({spec.label for spec in result}) != len(result):
        raise ValueError("learning: an estimator label is given twice")
    return result


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished worker processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _job_path(out: Path, mdp_name: str, label: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
    return out / "jobs" / f"{mdp_name}--{safe}.json"


def _job_key(mdp_name: str, spec: Learner, seeds: list[int], config: LearningConfig) -> Any:
    return {
        "mdp": mdp_name,
        "estimator": spec.name,
        "params": spec.params,
        "seeds": seeds,
        "config": config.to_dict(),
    }


def _load_job(path: Path, key: Any) -> JobResult | None:
    """The stored job if it was made with exactly ``key``'s settings."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if stored.get("key") != json.loads(json.dumps(key)):
        return None
    return JobResult(np.array(stored["curves"]), stored["diagnostics"])


def _run_and_store(
    mdp_name: str, spec: Learner, seeds: list[int], config: LearningConfig, path: Path
) -> tuple[str, str, JobResult]:
    result = run_job(mdp_name, spec, seeds, config)
    payload = {
        "key": _job_key(mdp_name, spec, seeds, config),
        "curves": result.curves.tolist(),
        "diagnostics": result.diagnostics,
    }
    atomic_write_text(path, json.dumps(payload))
    return mdp_name, spec.label, result


def run(
    mdps: Sequence[str] | None,
    estimators: Sequence[str] | None,
    seeds: int,
    out: Path,
    console: Console,
    *,
    iterations: int = LearningConfig.iterations,
    workers: int = 1,
    params: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Run the testbed, print the table and the time it took, write the outputs; returns the
    table's rows."""
    began, cpu_began = time.perf_counter(), _cpu_seconds()
    mdp_names = list(mdps or FAMILY)
    unknown = [name for name in mdp_names if name not in FAMILY]
    if unknown:
        raise ValueError(
            f"learning: unknown MDP(s) {', '.join(unknown)}; known: {', '.join(FAMILY)}"
        )
    if seeds < 2:
        raise ValueError(f"learning: seeds must be >= 2 (paired intervals), got {seeds}")
    if iterations < 1 or workers < 1:
        raise ValueError("learning: iterations and workers must be >= 1")
    specs = learners(estimators or default_estimators(), params)
    config = LearningConfig(iterations=iterations)
    seed_list = list(range(seeds))
    (out / "jobs").mkdir(parents=True, exist_ok=True)

    results: dict[tuple[str, str], JobResult] = {}
    pending = []
    for mdp_name in mdp_names:
        for spec in specs:
            path = _job_path(out, mdp_name, spec.label)
            stored = _load_job(path, _job_key(mdp_name, spec, seed_list, config))
            if stored is not None:
                results[(mdp_name, spec.label)] = stored
            else:
                pending.append((mdp_name, spec, seed_list, config, path))
    if results:
        console.print(f"resuming: {len(results)} of {len(results) + len(pending)} jobs done")
    with progress_display(console) as progress:
        task = progress.add_task("learning jobs", total=len(pending), every=1)
        if workers == 1:
            for job in pending:
                mdp_name, label, result = _run_and_store(*job)
                results[(mdp_name, label)] = result
                progress.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(_run_and_store, *job) for job in pending]
                for future in as_completed(futures):
                    mdp_name, label, result = future.result()
                    results[(mdp_name, label)] = result
                    progress.advance(task)

    curves = {m: {s.label: results[(m, s.label)].curves for s in specs} for m in mdp_names}
    diagnostics = {
        m: {s.label: results[(m, s.label)].diagnostics for s in specs} for m in mdp_names
    }
    optimum = {m: optimal_success(FAMILY[m]()) for m in mdp_names}
    rows = summarise(curves, optimum, diagnostics)
    elapsed = time.perf_counter() - began
    cpu = _cpu_seconds() - cpu_began
    load = os.getloadavg()
    timing = (
        f"took {elapsed:.1f} s wall ({cpu:.1f} s CPU) with {workers} worker(s); "
        f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    header = (
        f"# bench learning: {seeds} seeds, {iterations} iterations, {config.tasks} tasks x "
        f"G = {config.group_size} trajectories per iteration ({timing})"
    )
    _print_table(rows, console)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "learning.md", markdown_table(rows, header))
    atomic_write_text(out / "learning.csv", csv_table(rows))
    summary = {
        "seeds": seed_list,
        "mdps": mdp_names,
        "estimators": {spec.label: {"name": spec.name, "params": spec.params} for spec in specs},
        "config": config.to_dict(),
        "optimum": optimum,
        "seconds": elapsed,
        "workers": workers,
        "load_average": load,
        "rows": rows,
    }
    atomic_write_text(out / "learning.json", json.dumps(summary, indent=1, default=str))
    plot(curves, optimum, out / "learning.png")
    console.print(f"bench learning {timing}")
    console.print(f"wrote {out / 'learning.md'}, learning.csv, learning.json, learning.png")
    return rows


def _print_table(rows: list[dict[str, Any]], console: Console) -> None:
    """One table per MDP: final J, AUC, and the paired AUC differences with their t p-values."""
    for mdp_name in dict.fromkeys(row["mdp"] for row in rows):
        table = Table(
            title=f"{escape(mdp_name)}: exact J; Δ = paired AUC difference, p = paired t",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        table.add_column("estimator", no_wrap=True)
        for column in ("final", "AUC", *(f"{p} {ref}" for ref in REFERENCES for p in "Δp")):
            table.add_column(column, justify="right", no_wrap=True, min_width=6)
        for row in (row for row in rows if row["mdp"] == mdp_name):
            cells = [escape(row["estimator"]), f"{row['final_mean']:.3f}", f"{row['auc_mean']:.3f}"]
            for reference in REFERENCES:
                key = f"auc_vs_{reference}"
                if f"{key}_mean" in row:
                    cells += [f"{row[key + '_mean']:+.3f}", f"{row[key + '_p_t']:.0e}"]
                else:
                    cells += ["–", "–"]
            table.add_row(*cells)
        console.print(table)
