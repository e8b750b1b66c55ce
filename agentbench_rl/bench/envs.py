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
from typing import Any, TypedDict

from rich.console import Console
from rich.table import Table

from agentbench_rl.core.net import free_port
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


class EnvSpeed(TypedDict):
    """One env's reset time and random-play speed on its evaluation split."""

    env: str
    split: str
    reset_ms: float
    steps_per_s: float


def time_env(name: str, steps: int, resets: int = 20, seed: int = 0) -> EnvSpeed:
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
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig
    from agentbench_rl.harness.evaluate import evaluate

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
            EvalConfig(env=EnvSpec(name="sokoban", split="test"), agent="expert"),
            Path(folder) / "expert",
        )
        expert_eval_s = time.perf_counter() - started
    return {
        "generate_ms": generate_ms,
        "solve_ms": solve_ms,
        "expert_eval_s": expert_eval_s,
        "expert_success": summary.success.mean,
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


#: Sessions in flight at once in the served-env benchmark (the issue's two figures).
SERVED_CONCURRENCY = (1, 32)
#: The goal: at concurrency 32, served steps/s at least this share of in-process steps/s.
SERVED_TARGET_RATIO = 0.5


def time_served(name: str, steps: int, concurrency: int, server: str, seed: int = 0) -> float:
    """Steps per second of ``concurrency`` served envs stepped together (every step's requests
    in flight at once, :func:`~agentbench_rl.envs.remote.step_all`), random admissible actions."""
    from agentbench_rl.envs.remote import step_all
    from agentbench_rl.envs.spec import EnvSpec

    split = evaluation_split(name)
    spec = EnvSpec(name=name, split=split)
    envs = [spec.make(server=server) for _ in range(concurrency)]
    tasks = env_class(name).task_ids(split)
    rng = random.Random(seed)
    infos = [env.reset(options={"task_id": tasks[k % len(tasks)]})[1] for k, env in enumerate(envs)]
    done_steps, elapsed, next_task = 0, 0.0, concurrency
    while done_steps < steps:
        actions = [rng.choice(info["admissible_actions"] or [""]) for info in infos]
        tick = time.perf_counter()
        answers = step_all(envs, actions)
        elapsed += time.perf_counter() - tick
        done_steps += len(envs)
        for k, answer in enumerate(answers):
            infos[k] = answer[4]
            if answer[2] or answer[3]:  # a reset is not a step: off the clock
                infos[k] = envs[k].reset(options={"task_id": tasks[next_task % len(tasks)]})[1]
                next_task += 1
    for env in envs:
        env.close()
    return done_steps / elapsed


#: The table's title of each protocol ``serve-env`` speaks.
PROTOCOL_TITLES = {"openenv": "OpenEnv (WebSocket)", "ors": "the Open Reward Standard (HTTP)"}


def run_served(
    name: str, steps: int, console: Console, protocol: str = "openenv"
) -> dict[str, float]:
    """Served against in-process steps/s of one env, at each of :data:`SERVED_CONCURRENCY`:
    the server is ``agentbench-rl serve-env --protocol PROTOCOL`` in a process of its own (the
    machine's cores shared by server and client, as the in-process figure has them)."""
    import subprocess
    import sys

    local = time_env(name, steps=steps)["steps_per_s"]
    port = free_port()
    command = [sys.executable, "-m", "agentbench_rl.cli", "serve-env", "--env", name]
    command += ["--port", str(port), "--max-sessions", str(max(SERVED_CONCURRENCY) + 4)]
    command += ["--protocol", protocol]
    url = f"{'ors+' if protocol == 'ors' else ''}http://127.0.0.1:{port}"
    figures = {"in_process": local}
    # The server's output goes to a file: a pipe nobody reads would fill and stall it.
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(url, name, server, log)
            for concurrency in SERVED_CONCURRENCY:
                figures[f"served_{concurrency}"] = time_served(name, steps, concurrency, url)
        finally:
            server.terminate()
            server.wait(timeout=30)
    table = Table(title=f"{name} served over {PROTOCOL_TITLES[protocol]} against in-process")
    for column in ("mode", "sessions", "steps/s", "vs in-process", "goal"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    table.add_row("in-process", "1", f"{local:,.0f}", "1.00x", "")
    for concurrency in SERVED_CONCURRENCY:
        rate = figures[f"served_{concurrency}"]
        goal = ""
        if concurrency == max(SERVED_CONCURRENCY):
            met = rate / local >= SERVED_TARGET_RATIO
            goal = f">= {SERVED_TARGET_RATIO:.2f}x: " + (
                "[green]met[/]" if met else "[red]not met[/]"
            )
        table.add_row("served", str(concurrency), f"{rate:,.0f}", f"{rate / local:.2f}x", goal)
    console.print(table)
    return figures


def _wait_for(url: str, name: str, server: Any, log: Any, timeout: float = 60.0) -> None:
    """Until the server at ``url`` answers (``ConnectionError`` with its ``log`` if it ends)."""
    from agentbench_rl.envs.spec import EnvSpec

    deadline = time.monotonic() + timeout
    spec = EnvSpec(name=name, split=evaluation_split(name))
    while True:
        if server.poll() is not None:
            log.seek(0)
            raise ConnectionError(f"serve-env stopped: {log.read().decode().strip()}")
        try:
            spec.make(server=url).close()
            return
        except (ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise ConnectionError(
                    f"serve-env did not answer at {url} in {timeout:.0f} s"
                ) from None
            time.sleep(0.2)
