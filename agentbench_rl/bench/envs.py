"""``agentbench-rl bench envs``: how fast each environment resets and steps.

Each env plays uniformly random admissible actions (the agent's own cost kept out of the
figures: actions are drawn before the clock runs) over the tasks of its evaluation split. For
Sokoban it also times the level generator, the solver and the full 500-level expert evaluation,
the figures the project sets targets for.
"""

from __future__ import annotations

import importlib
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.envs import ENVS, env_class, evaluation_split, make, resolve

#: Envs whose steps cost milliseconds are timed over fewer steps (ALFWorld: ~50 ms a step).
MAX_BENCH_STEPS = {"alfworld": 300}
#: The project's Sokoban targets (per one core).
SOKOBAN_TARGETS = {
    "steps_per_s": 20_000,
    "generate_ms": 2.0,
    "solve_ms": 5.0,
    "expert_eval_s": 30.0,
}


def time_env(name: str, steps: int, resets: int = 20, seed: int = 0) -> dict[str, Any]:
    """Reset time (mean over ``resets`` tasks) and random-play steps per second of one env."""
    split = evaluation_split(name)
    env = make(name, split=split)
    tasks = env_class(name).task_ids(split)
    rng = random.Random(seed)
    started = time.perf_counter()
    for index in range(resets):
        env.reset(options={"task_id": tasks[index % len(tasks)]})
    reset_s = (time.perf_counter() - started) / resets

    done_steps, elapsed, task_index = 0, 0.0, 0
    while done_steps < steps:
        _, info = env.reset(options={"task_id": tasks[task_index % len(tasks)]})
        task_index += 1
        over = False
        while not over and done_steps < steps:
            action = rng.choice(info["admissible_actions"] or [""])
            tick = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            elapsed += time.perf_counter() - tick
            done_steps += 1
            over = terminated or truncated
    return {
        "env": name,
        "split": split,
        "reset_ms": 1000 * reset_s,
        "steps_per_s": done_steps / elapsed,
    }


def time_sokoban(levels: int = 500) -> dict[str, float]:
    """Generator and solver times (mean over ``levels`` 6x6 levels) and the expert evaluation of
    the whole test split, in one process."""
    from agentbench_rl.envs.sokoban.generator import generate_level
    from agentbench_rl.envs.sokoban.levels import load_level
    from agentbench_rl.envs.sokoban.solver import solve
    from agentbench_rl.harness.evaluate import EvalConfig, evaluate

    started = time.perf_counter()
    for seed in range(levels):
        generate_level(10_000 + seed)
    generate_ms = 1000 * (time.perf_counter() - started) / levels

    test_levels = [load_level(f"test-{index:04d}") for index in range(levels)]
    started = time.perf_counter()
    for level in test_levels:
        solve(level.room, level.player, level.boxes)
    solve_ms = 1000 * (time.perf_counter() - started) / levels

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        summary = evaluate(
            EvalConfig(env="sokoban", split="test", agent="expert"), Path(folder) / "expert"
        )
        expert_eval_s = time.perf_counter() - started
    return {
        "generate_ms": generate_ms,
        "solve_ms": solve_ms,
        "expert_eval_s": expert_eval_s,
        "expert_success": summary["success"]["mean"],
    }


def run(names: Sequence[str] | None, steps: int, console: Console) -> None:
    """Print the env table (and Sokoban's detail table when Sokoban is measured)."""
    selected = [resolve(name).name for name in names] if names else list(ENVS)
    table = Table(title=f"Environment speed (random admissible actions, up to {steps:,} steps)")
    for column in ("env", "split", "reset (ms)", "steps/s", "note"):
        table.add_column(column, justify="left" if column in ("env", "split", "note") else "right")
    for name in selected:
        try:
            row = time_env(name, steps=min(steps, MAX_BENCH_STEPS.get(name, steps)))
        except (ImportError, FileNotFoundError, ValueError) as problem:
            table.add_row(name, "", "", "", f"skipped: {str(problem).splitlines()[0]}")
            continue
        note = ""
        if name == "sokoban":
            ratio = row["steps_per_s"] / SOKOBAN_TARGETS["steps_per_s"]
            note = f"{ratio:.1f}x the 20,000 steps/s target"
        table.add_row(
            name, row["split"], f"{row['reset_ms']:.3f}", f"{row['steps_per_s']:,.0f}", note
        )
    console.print(table)

    if "sokoban" in selected:
        figures = time_sokoban()
        detail = Table(title="Sokoban 6x6, one box, 15 steps")
        for column in ("measure", "value", "target", "margin"):
            detail.add_column(column, justify="left" if column == "measure" else "right")
        for key, label, unit in (
            ("generate_ms", "level generation (mean)", "ms"),
            ("solve_ms", "expert solve (mean, test levels)", "ms"),
            ("expert_eval_s", "500-level expert evaluation", "s"),
        ):
            value, target = figures[key], SOKOBAN_TARGETS[key]
            detail.add_row(
                label, f"{value:.3f} {unit}", f"< {target:g} {unit}", f"{target / value:.0f}x under"
            )
        detail.add_row(
            "expert success on test", f"{100 * figures['expert_success']:.1f}%", "100%", ""
        )
        console.print(detail)

    # Envs with a backend of their own report more (raw-backend comparisons, index builds).
    for name, module in (("alfworld", "alfworld"), ("webshop", "webshop")):
        if name not in selected:
            continue
        try:
            report = importlib.import_module(f"agentbench_rl.bench.{module}").report
            report(console)
        except (ImportError, FileNotFoundError, ValueError) as problem:
            console.print(f"{name} detail skipped: {str(problem).splitlines()[0]}")
