"""ALFWorld speed: the native engine against TextWorld, and the gain from parallel workers.

Three engines play the same games side by side, each in a fresh process of its own (so a
first reset is a first reset, and the memory figure is that engine's alone):

* ``raw TextWorld``: what ALFWorld's ``AlfredTWEnv`` runs per episode, TextWorld's
  ``PddlEnv`` with ALFWorld's ``AlfredDemangler`` and ``AlfredInfos`` wrappers, ``load`` of the
  game file and ``reset`` (TextWorld's gym wrapper loads the game on every reset);
* ``agentbench, TextWorld engine``: our env with ``backend="textworld"``;
* ``agentbench, native``: our env with its default engine.

All play the walkthrough stored in each game, so the steps timed are the same commands.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.envs.alfworld.data import (
    TASK_TYPES,
    load_manifest,
    require_split_data,
    resolve_data_dir,
)
from agentbench_rl.extras import install_hint

SPLIT = "valid_seen"
#: The native engine's goals: first as ratios over raw TextWorld, then in seconds (a step on a
#: state met for the first time, and a first reset).
STEP_GOAL, FIRST_RESET_GOAL = 10.0, 20.0
STEP_SECONDS_GOAL, FIRST_RESET_SECONDS_GOAL = 0.001, 0.005


@dataclass(frozen=True)
class CallTimes:
    """Seconds per call, the median over the benchmarked games (of each game's own time, its
    mean over its steps for a step: one busy moment of the machine moves one game, not the
    figure), and the memory the engine took.

    Attributes:
        first_reset: reset on a game not played before in the process.
        repeat_reset: reset on a game played before.
        step: one walkthrough command (each state met for the first time).
        memory_mb: the process's resident memory after playing every game, less that of the
            same process before the engine was imported (its libraries, the compiled games it
            keeps, one env).
    """

    first_reset: float
    repeat_reset: float
    step: float
    memory_mb: float


def pick_games(count: int, split: str = SPLIT) -> list[str]:
    """``count`` task ids of ``split``, taking the task types in turn (manifest order within).

    Example:
        >>> [task.split("-")[0] for task in pick_games(2)]
        ['pick_and_place_simple', 'look_at_obj_in_light']
    """
    by_type: dict[str, list[str]] = {task_type: [] for task_type in TASK_TYPES}
    for game in load_manifest(split).games:
        by_type[game.task_type].append(game.task_id)
    picked: list[str] = []
    for index in range(max(len(ids) for ids in by_type.values())):
        for ids in by_type.values():
            if index < len(ids) and len(picked) < count:
                picked.append(ids[index])
    return picked


def _rss_mb() -> float:
    """The process's resident memory now (Linux), else its peak (``ru_maxrss``)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except OSError:  # no /proc: ru_maxrss is in bytes on macOS, in kilobytes elsewhere
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def time_textworld(task_ids: Sequence[str], data_dir: str) -> CallTimes:
    """Raw TextWorld + ALFWorld wrappers: load+reset (twice per game) and walkthrough steps."""
    before = _rss_mb()
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    manifest = load_manifest(SPLIT)
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["walkthrough"])
    first: list[float] = []
    repeat: list[float] = []
    step: list[float] = []
    env: Any = None
    for task_id in task_ids:
        path = os.path.join(data_dir, manifest.get(task_id).path)
        for visit in range(2):
            started = time.perf_counter()
            if env is None:
                env = textworld.start(path, infos, wrappers=[AlfredDemangler(), AlfredInfos])
            else:
                env.load(path)
            state = env.reset()
            elapsed = time.perf_counter() - started
            if visit == 0:
                first.append(elapsed)
                steps = []
                for command in state["extra.walkthrough"]:
                    started = time.perf_counter()
                    env.step(command)
                    steps.append(time.perf_counter() - started)
                step.append(statistics.fmean(steps) if steps else 0.0)
            else:
                repeat.append(elapsed)
    return _call_times(first, repeat, step, _rss_mb() - before)


def time_agentbench(task_ids: Sequence[str], data_dir: str, backend: str) -> CallTimes:
    """Our env on ``backend``: first and repeated reset of each game, its walkthrough steps."""
    before = _rss_mb()
    from agentbench_rl.envs.alfworld.env import ALFWorldEnv

    env = ALFWorldEnv(split=SPLIT, data_dir=data_dir, backend=backend)
    first: list[float] = []
    repeat: list[float] = []
    step: list[float] = []
    for task_id in task_ids:
        started = time.perf_counter()
        env.reset(options={"task_id": task_id})
        first.append(time.perf_counter() - started)
        steps = []
        while not env.episode_over:
            command = env.expert_action()
            started = time.perf_counter()
            env.step(command)
            steps.append(time.perf_counter() - started)
        step.append(statistics.fmean(steps) if steps else 0.0)
    for task_id in task_ids:
        started = time.perf_counter()
        env.reset(options={"task_id": task_id})
        repeat.append(time.perf_counter() - started)
    return _call_times(first, repeat, step, _rss_mb() - before)


def _call_times(
    first: list[float], repeat: list[float], step: list[float], memory_mb: float
) -> CallTimes:
    """The medians over games of each game's times."""
    return CallTimes(
        statistics.median(first), statistics.median(repeat), statistics.median(step), memory_mb
    )


#: The engines compared, by label: how each is timed.
ENGINES: dict[str, Callable[[Sequence[str], str], CallTimes]] = {
    "raw TextWorld": time_textworld,
    "agentbench, TextWorld engine": lambda ids, folder: time_agentbench(ids, folder, "textworld"),
    "agentbench, native": lambda ids, folder: time_agentbench(ids, folder, "native"),
}


def _time_engine(label: str, task_ids: Sequence[str], data_dir: str) -> CallTimes:
    return ENGINES[label](task_ids, data_dir)


def time_in_fresh_process(label: str, task_ids: Sequence[str], data_dir: str) -> CallTimes:
    """:data:`ENGINES` ``[label]`` timed in a spawned process of its own."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(_time_engine, (label, list(task_ids), data_dir))


# ---------------------------------------------------------------------- parallel workers
@dataclass(frozen=True)
class ParallelRun:
    """Wall times of expert episodes on a set of games with parallel workers.

    Attributes:
        startup: seconds until every worker held a warm env (process spawn, imports).
        episodes: seconds for the episodes themselves, once every worker was ready.
    """

    startup: float
    episodes: float


_WORKER_ENV: Any = None


def _init_worker(data_dir: str, ready: Any) -> None:
    global _WORKER_ENV
    from agentbench_rl.envs.alfworld.env import ALFWorldEnv

    _WORKER_ENV = ALFWorldEnv(split=SPLIT, data_dir=data_dir)
    ready.wait()  # the clock for the episodes starts once every worker is warm


def play_expert_episode(task_id: str, env: Any = None) -> bool:
    """One expert episode on ``task_id`` (in a worker, on the worker's warm env); won or not."""
    env = env if env is not None else _WORKER_ENV
    env.reset(options={"task_id": task_id})
    won = False
    while not env.episode_over:
        *_, info = env.step(env.expert_action())
        won = info["won"]
    return won


def time_processes(task_ids: Sequence[str], data_dir: str, workers: int) -> ParallelRun:
    """Expert episodes on every game with ``workers`` spawned processes, one warm env each.

    Games are handed out one at a time; every game is new to the worker that plays it.
    """
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(workers + 1)
    started = time.perf_counter()
    with context.Pool(workers, initializer=_init_worker, initargs=(data_dir, ready)) as pool:
        ready.wait(timeout=600)  # a worker that cannot start breaks the barrier, not the bench
        warm = time.perf_counter()
        won = pool.map(play_expert_episode, task_ids, chunksize=1)
        done = time.perf_counter()
    if not all(won):
        raise RuntimeError("alfworld bench: the expert lost a game")
    return ParallelRun(warm - started, done - warm)


class EpisodeActor:
    """A Ray actor body: one warm env playing expert episodes."""

    def __init__(self, data_dir: str) -> None:
        from agentbench_rl.envs.alfworld.env import ALFWorldEnv

        self.env = ALFWorldEnv(split=SPLIT, data_dir=data_dir)

    def ready(self) -> bool:
        """True once the actor holds its env."""
        return True

    def play(self, task_id: str) -> bool:
        """One expert episode; won or not."""
        return play_expert_episode(task_id, self.env)


def time_ray_actors(task_ids: Sequence[str], data_dir: str, workers: int) -> ParallelRun:
    """As :func:`time_processes` with Ray actors (one warm env each) instead of processes."""
    import ray
    from ray.util import ActorPool

    from agentbench_rl.rollout.ray_workers import init_ray

    remote_actor: Any = ray.remote(EpisodeActor)
    started = time.perf_counter()
    own_cluster = not ray.is_initialized()  # a caller's cluster is used as it is, and kept
    init_ray(num_cpus=workers)
    try:
        actors = [remote_actor.remote(data_dir) for _ in range(workers)]
        ray.get([actor.ready.remote() for actor in actors])
        warm = time.perf_counter()
        pool = ActorPool(actors)
        won = list(pool.map(lambda actor, task: actor.play.remote(task), list(task_ids)))
        done = time.perf_counter()
    finally:
        if own_cluster:
            ray.shutdown()
    if not all(won):
        raise RuntimeError("alfworld bench: the expert lost a game")
    return ParallelRun(warm - started, done - warm)


def per_call_table(figures: dict[str, CallTimes], games: int) -> Table:
    """One row per call and engine, with each engine's speed-up over raw TextWorld.

    Example:
        >>> slow = CallTimes(1.0, 0.5, 0.01, 300.0)
        >>> fast = CallTimes(0.02, 0.001, 0.0005, 40.0)
        >>> table = per_call_table({"raw TextWorld": slow, "agentbench, native": fast}, 2)
        >>> [column.header for column in table.columns][1:]
        ['raw TextWorld', 'agentbench, native']
        >>> list(table.columns[2].cells)[2]
        '0.50 ms (20.0x)'
    """
    raw = figures["raw TextWorld"]
    table = Table(title=f"ALFWorld per call ({games} {SPLIT} games, walkthrough steps)")
    table.add_column("call")
    for label in figures:
        table.add_column(label, justify="right")

    def cell(value: float, reference: float, label: str) -> str:
        ratio = "" if label == "raw TextWorld" else f" ({reference / value:.1f}x)"
        return f"{1000 * value:.2f} ms{ratio}"

    for call, name in (
        ("reset, first visit of a game", "first_reset"),
        ("reset, game played before", "repeat_reset"),
        ("step", "step"),
    ):
        reference = getattr(raw, name)
        table.add_row(call, *(cell(getattr(f, name), reference, lab) for lab, f in figures.items()))
    table.add_row("memory, one env (MB)", *(f"{f.memory_mb:.0f}" for f in figures.values()))
    return table


def report(console: Console, games: int = 12, workers: int | None = None) -> None:
    """Print ALFWorld's speed tables: per-call times against raw TextWorld, and worker scaling.

    Args:
        console: where the tables go.
        games: valid_seen games to time (the task types in turn).
        workers: parallel workers to compare with one (default: the CPU count, at most 8).

    Raises:
        DataMissingError: no valid_seen game files.
        ImportError: no TextWorld to compare with (the ``alfworld`` extra).

    Example:
        >>> report(Console(), games=6)  # doctest: +SKIP
    """
    data_dir = resolve_data_dir()
    require_split_data(data_dir, SPLIT)
    from agentbench_rl.envs.alfworld.env import load_backend

    load_backend(data_dir, "textworld")  # the comparison needs TextWorld
    task_ids = pick_games(games)
    folder = str(data_dir)
    figures = {label: time_in_fresh_process(label, task_ids, folder) for label in ENGINES}
    console.print(per_call_table(figures, len(task_ids)))
    raw, native = figures["raw TextWorld"], figures["agentbench, native"]
    console.print(
        f"native over raw TextWorld: step {raw.step / native.step:.1f}x (goal {STEP_GOAL:g}x), "
        f"first reset {raw.first_reset / native.first_reset:.1f}x (goal {FIRST_RESET_GOAL:g}x)\n"
        f"native: step {1000 * native.step:.2f} ms (goal {1000 * STEP_SECONDS_GOAL:g} ms), "
        f"first reset {1000 * native.first_reset:.2f} ms "
        f"(goal {1000 * FIRST_RESET_SECONDS_GOAL:g} ms); medians over the games"
    )

    count = workers or min(os.cpu_count() or 1, 8)
    scaling = Table(title=f"ALFWorld expert episodes on {len(task_ids)} new games, warm workers")
    for column in ("backend", "workers", "start-up (s)", "episodes (s)", "episodes/s", "speed-up"):
        scaling.add_column(column, justify="left" if column == "backend" else "right")
    one = time_processes(task_ids, folder, 1)
    rows = [("processes", 1, one), ("processes", count, time_processes(task_ids, folder, count))]
    try:
        import ray  # noqa: F401
    except ImportError:
        ray_note = f"Ray actors not measured: {install_hint('ray')}"
    else:
        ray_note = ""
        rows.append(("ray actors", count, time_ray_actors(task_ids, folder, count)))
    for backend, worker_count, run in rows:
        scaling.add_row(
            backend,
            str(worker_count),
            f"{run.startup:.1f}",
            f"{run.episodes:.1f}",
            f"{len(task_ids) / run.episodes:.2f}",
            f"{one.episodes / run.episodes:.2f}x",
        )
    console.print(scaling)
    console.print(
        f"speed-up: episode time of one process over that of the row ({os.cpu_count()} CPUs)"
    )
    if ray_note:
        console.print(ray_note)
