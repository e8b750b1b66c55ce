"""``agentbench-rl bench rollout``: what the trainer's rollout loop adds to the env, and how it
scales with worker processes.

Per env, one iteration's rollouts (N tasks x G trajectories, in lockstep, the trainer's
``rollout_groups``: episode driver, prompts, hashing, step records) are played with a free
policy, uniform over each row's admissible actions (no model: what is timed is the loop and the
env). The same episodes are then replayed on bare envs (reset, then each step with the same
answer text): the env's own cost. Each iteration is played once untimed first, so the env's
caches of what it has met (ALFWorld's state memos, WebShop's pages, Sokoban's grid hashes) are
as warm for the timed loop as for the replay that follows it; the figures are those of states
met before (a first visit costs the env more, the loop the same). The two alternate
``repeats`` times and the medians give

- rows per second of the loop and steps per second of the bare env, and the loop's overhead,
  ``bare / loop − 1`` (goal: at most 25%);
- the loop's rows per second in N worker processes at once, each on its own iteration, against
  one process (goal: at least 0.8 N on N free cores; the table states the cores and the load).

With ``--profile``, each env whose overhead misses the goal gets the profile that says why: one
warm iteration and its bare replay under :mod:`cProfile`, and the functions the loop spends more
time in than the bare env, heaviest first.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import random
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentbench_rl.core import heap
from agentbench_rl.envs import ENVS, env_class
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.models.policy import ActOutput
from agentbench_rl.prompting import PromptConfig, chosen_response
from agentbench_rl.rollout.batched import RolloutBatch, rollout_groups
from agentbench_rl.rollout.episode import episode_seed
from agentbench_rl.rollout.workers import LocalEnvPool

#: The goals the issue set: the loop's overhead over the bare env, and the scaling of workers.
OVERHEAD_GOAL = 0.25
SCALING_GOAL = 0.8
#: What the loop plays by default: the trainer's default iteration.
TASKS, GROUP_SIZE = 16, 8


@dataclass
class UniformPolicy:
    """A free policy: each row's action drawn uniformly among its admissible ones (its own
    seeded stream; the trainer's sampler is never read), nothing scored."""

    rng: random.Random

    def act(
        self,
        prompts: Sequence[str],
        admissible: Sequence[Sequence[str]],
        generator: Any = None,
        capture_hidden: bool = False,
        greedy: bool = False,
    ) -> ActOutput:
        """Answer every row (an :class:`~agentbench_rl.models.policy.ActOutput` with no tokens)."""
        actions = [options[self.rng.randrange(len(options))] for options in admissible]
        rows = len(actions)
        return ActOutput(
            responses=[chosen_response(action) for action in actions],
            prompt_ids=[[] for _ in range(rows)],
            response_ids=[[] for _ in range(rows)],
            logprobs=[np.zeros(1, dtype=np.float32) for _ in range(rows)],
            hidden=None,
            format_ok=[True] * rows,
        )


def loop_iteration(pool: LocalEnvPool, env: EnvSpec, seed: int, tasks: int) -> RolloutBatch:
    """One iteration's rollouts of the free policy on ``pool`` (the trainer keeps its envs
    from one iteration to the next; tasks and env seeds from ``seed``)."""
    import torch

    return rollout_groups(
        pool,
        UniformPolicy(random.Random(seed)),
        env.name,
        PromptConfig(mode="choose"),
        env.draw_tasks(tasks, seed),
        pool.size // tasks,
        seed,
        torch.Generator().manual_seed(seed),
    )


def bare_replay(bare: Sequence[Any], batch: RolloutBatch, seed: int) -> tuple[float, int]:
    """Seconds and steps to play ``batch``'s episodes again on the ``bare`` envs (one per
    trajectory, the same reset seed and answers)."""
    answers: dict[int, list[str]] = {}
    rows = batch.rows
    for traj, action in zip(rows.column("traj"), rows.column("action_key"), strict=True):
        answers.setdefault(int(traj), []).append(chosen_response(str(action)))
    began = time.perf_counter()
    steps = 0
    for env, episode in zip(bare, batch.episodes, strict=True):
        task = episode.outcome.task_id
        env.reset(seed=episode_seed(seed, task), options={"task_id": task})
        for answer in answers.get(episode.traj, []):
            env.step(answer)
            steps += 1
    return time.perf_counter() - began, steps


def _timed_loop(arguments: tuple[EnvSpec, int, int, int]) -> tuple[float, int]:
    """One process's iteration after playing it once untimed on the same pool: seconds and rows
    (a module-level function for the process pool)."""
    env, seed, tasks, group_size = arguments
    pool = LocalEnvPool(env, tasks * group_size)
    try:
        with heap.iterations():  # as the trainer runs its iterations
            loop_iteration(pool, env, seed, tasks)  # warm, as the one-process figure is
            heap.settle()
            began = time.perf_counter()
            batch = loop_iteration(pool, env, seed, tasks)
            return time.perf_counter() - began, len(batch)
    finally:
        pool.close()


def measure(
    env: EnvSpec, repeats: int = 3, workers: int = 2, tasks: int = TASKS, group: int = GROUP_SIZE
) -> dict[str, float]:
    """The loop's rows/s and the bare env's steps/s (alternated, medians), the overhead, and the
    rows/s of ``workers`` processes at once against one."""
    loop_rates, bare_rates = [], []
    pool = LocalEnvPool(env, tasks * group)
    bare = [env.make() for _ in range(tasks * group)]
    try:
        with heap.iterations():  # as the trainer runs its iterations (core/heap.py)
            loop_iteration(pool, env, 10_000, tasks)  # warm-up: imports, data, compiled games
            for repeat in range(repeats):
                # the iteration once untimed, so the env's caches (ALFWorld's state memos,
                # WebShop's pages, Sokoban's grid hashes) are as warm for the timed loop as for
                # the replay
                loop_iteration(pool, env, repeat, tasks)
                heap.settle()
                began = time.perf_counter()
                batch = loop_iteration(pool, env, repeat, tasks)
                loop_rates.append(len(batch) / (time.perf_counter() - began))
                heap.settle()
                seconds, steps = bare_replay(bare, batch, repeat)
                bare_rates.append(steps / seconds)
    finally:
        pool.close()
    loop, bare_rate = statistics.median(loop_rates), statistics.median(bare_rates)
    loop_own = 1e6 * (1 / loop - 1 / bare_rate)  # µs a row the loop adds to the env's step
    # Each worker times its own iteration, after a warm-up one; started together, the timed
    # iterations overlap, so the rows of all over the slowest one's time is their joint rate.
    jobs = [(env, 100 + k, tasks, group) for k in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as processes:
        timed = list(processes.map(_timed_loop, jobs))
    parallel = sum(rows for _, rows in timed) / max(seconds for seconds, _ in timed)
    return {
        "loop_rows_per_s": loop,
        "bare_steps_per_s": bare_rate,
        "overhead": bare_rate / loop - 1.0,
        "loop_us_per_row": loop_own,
        "workers": float(workers),
        "parallel_rows_per_s": parallel,
        "scaling": parallel / loop,
    }


@dataclass(frozen=True)
class LoopProfile:
    """One warm iteration under cProfile (which inflates every call alike) against the same
    episodes replayed on bare envs, also profiled: the time a row takes in each, and the
    functions the loop spends more in than the bare env does (its own work: the loop's code,
    and the library calls it makes), in µs a row.

    Attributes:
        rows: the rows of the iteration.
        loop_us, bare_us: µs a row in the loop and in the bare replay.
        heaviest: ``(function, extra µs a row, calls a row in the loop, in the bare replay)``,
            the largest extra first (equal calls: the same work, slower in the loop's company).
    """

    rows: int
    loop_us: float
    bare_us: float
    heaviest: list[tuple[str, float, float, float]]


def _own_times(profiler: cProfile.Profile) -> dict[str, tuple[float, int]]:
    """Each profiled function's own seconds and calls, by ``file:line(name)`` (the file from
    the package root where it is ours, else its name alone)."""
    # pstats' table: (file, line, name) -> (calls, primitive calls, own s, cumulative s, callers)
    table: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    ours = f"{os.sep}agentbench_rl{os.sep}"
    own: dict[str, tuple[float, int]] = {}
    for (path, line, name), figures in table.items():
        where = path.rsplit(ours, 1)[-1] if ours in path else os.path.basename(path)
        key = f"{where}:{line}({name})" if line else name
        seconds, calls = own.get(key, (0.0, 0))
        own[key] = (seconds + figures[2], calls + figures[0])
    return own


def profile_loop(
    env: EnvSpec, tasks: int = TASKS, group: int = GROUP_SIZE, top: int = 10
) -> LoopProfile:
    """Profile one warm iteration of the loop on ``env`` and its bare replay (each played once
    untimed first)."""
    pool = LocalEnvPool(env, tasks * group)
    bare = [env.make() for _ in range(tasks * group)]
    loop_profiler, bare_profiler = cProfile.Profile(), cProfile.Profile()
    try:
        with heap.iterations():
            loop_iteration(pool, env, 0, tasks)
            heap.settle()
            loop_profiler.enable()
            batch = loop_iteration(pool, env, 0, tasks)
            loop_profiler.disable()
            bare_replay(bare, batch, 0)  # warm the bare envs' own caches as the pool's are
            heap.settle()
            bare_profiler.enable()
            bare_replay(bare, batch, 0)
            bare_profiler.disable()
    finally:
        pool.close()
    rows = len(batch)
    in_loop, in_bare = _own_times(loop_profiler), _own_times(bare_profiler)
    extra = []
    for name, (seconds, calls) in in_loop.items():
        bare_seconds, bare_calls = in_bare.get(name, (0.0, 0))
        extra.append((name, 1e6 * (seconds - bare_seconds) / rows, calls / rows, bare_calls / rows))
    extra.sort(key=lambda item: -item[1])
    return LoopProfile(
        rows,
        1e6 * sum(seconds for seconds, _ in in_loop.values()) / rows,
        1e6 * sum(seconds for seconds, _ in in_bare.values()) / rows,
        extra[:top],
    )


def print_profile(name: str, found: LoopProfile, console: Console) -> None:
    """The profile of ``name``'s loop as a table."""
    table = Table(
        title=f"{name} under cProfile ({found.rows} rows): the loop {found.loop_us:.1f} µs a row, "
        f"the bare env {found.bare_us:.1f}; where the loop spends more"
    )
    table.add_column("function")
    table.add_column("extra µs a row", justify="right")
    table.add_column("calls a row, loop / bare", justify="right")
    for function, micros, calls, bare_calls in found.heaviest:
        table.add_row(function, f"{micros:+.1f}", f"{calls:.2f} / {bare_calls:.2f}")
    console.print(table)


def available_envs() -> list[str]:
    """The text envs that play here (ALFWorld and WebShop need their data), in table order."""
    found: list[str] = []
    for name in ("sokoban", "textcraft", "alfworld", "webshop"):
        if name not in ENVS:
            continue
        try:
            EnvSpec(name=name, split="train").make()
        except (OSError, ValueError, ImportError):
            continue
        found.append(name)
    return found


def run(
    envs: Sequence[str] | None = None,
    repeats: int = 3,
    workers: int = 2,
    console: Console | None = None,
    profile: bool = False,
) -> dict[str, dict[str, float]]:
    """Measure every env (``envs``: those named; default: every text env that plays here) and
    print the table; with ``profile``, the profile of each env that misses the overhead goal."""
    names = list(envs) if envs else available_envs()
    for name in names:
        env_class(name)  # an unknown name: one line
    specs = {name: EnvSpec(name=name, split="train") for name in names}
    results = {name: measure(spec, repeats, workers) for name, spec in specs.items()}
    if console is not None:
        cores = os.cpu_count() or 1
        load = os.getloadavg()[0]
        table = Table(
            title=f"The rollout loop against the bare env ({TASKS} x {GROUP_SIZE} episodes, "
            f"uniform policy; medians of {repeats}; {cores} cores, load {load:.1f})"
        )
        columns = ("env", "bare steps/s", "loop rows/s", "overhead", "loop µs/row", "workers")
        for column in (*columns, "scaling"):
            table.add_column(column, justify="right")
        for name, figures in results.items():
            table.add_row(
                name,
                f"{figures['bare_steps_per_s']:,.0f}",
                f"{figures['loop_rows_per_s']:,.0f}",
                f"{100 * figures['overhead']:+.0f}%",
                f"{figures['loop_us_per_row']:.0f}",
                f"{figures['workers']:.0f}",
                f"{figures['scaling']:.2f}x ({figures['scaling'] / figures['workers']:.2f} N)",
            )
        console.print(table)
        console.print(
            f"goals: overhead <= {100 * OVERHEAD_GOAL:.0f}%; N workers >= {SCALING_GOAL} N on N "
            "free cores"
        )
        if profile:
            for name, figures in results.items():
                if figures["overhead"] > OVERHEAD_GOAL:
                    print_profile(name, profile_loop(specs[name]), console)
    return results
