"""``agentbench-rl bench estimators``: rows per second of every estimator.

Batches are synthetic rollouts shaped like a training step: groups of 8 trajectories of 50
steps on a random 40-state task per group (so anchors recur the way they do in ALFWorld or
Sokoban), 4 actions, 5% invalid outputs. BiPACE gets hidden states of size 1536 (Qwen2.5-1.5B)
and 3584 (Qwen2.5-7B): one random direction per (group, state) plus 10% noise, stored as
float32 as a trainer would hand them over, so rows of one state cluster as real hidden states do.

Each estimator is timed on a fresh ``StepBatch`` (nothing cached from an earlier run: key
columns are factorised inside the clock), best of a few repeats. GiGPO is also run through a
per-row baseline written the way verl-agent's ``gigpo/core_gigpo.py`` is written (dicts keyed
by anchor observation, a Python loop over rows), kept here only as the yardstick; both must
agree to 1e-8 before the ratio is printed. With a verl-agent checkout named by
``AGENTBENCH_VERL_AGENT``, the authors' own GiGPO, HGPO and GraphGPO functions are timed on the
same rows too (:mod:`agentbench_rl.bench.peers`), compute alone and end to end from step
records, and compared with ours in their arithmetic and at our defaults.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from agentbench_rl.bench.peers import (
    PARITY_PARAMS,
    PARITY_TOLERANCE,
    PEERS,
    ROOT_VARIABLE,
    peer_estimator,
    peer_root,
)
from agentbench_rl.core.batch import StepBatch, StepColumns
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.estimators import NAMES, REGISTRY, EstimatorResult, compute

GROUP_SIZE = 8
MAX_STEPS = 50
N_STATES = 40
ACTION_NAMES = ("up", "down", "left", "right")
HIDDEN_SIZES = (1536, 3584)
FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)


@dataclass(frozen=True)
class SpeedTarget:
    """A target the project set: ``estimator`` answers a batch of ``rows`` rows (with
    hidden states of ``hidden_size`` when it needs them) in under ``seconds``."""

    estimator: str
    rows: int
    seconds: float
    hidden_size: int | None = None


# Configuration, not logic: the project's targets, and the estimator the
# per-row yardstick (:func:`gigpo_per_row`) writes out the way verl-agent does.
SPEED_TARGETS = (
    SpeedTarget("gigpo", 100_000, 0.1),
    SpeedTarget("bipace", 6_400, 0.5, hidden_size=3584),  # 16 groups x 8 trajectories x 50 steps
)
YARDSTICK_ESTIMATOR = "gigpo"
YARDSTICK_MIN_SPEEDUP = 10.0
FASTER_THAN_YARDSTICK = ("hgpo",)  # estimators meant to be at least as fast per row as GiGPO
LEVELS_PARAMETER = "history_length"  # of those, timed at each depth of their levels of groups
END_TO_END_MIN_SPEEDUP = 100.0  # build + compute against the authors' own function
# Best of this many runs per estimator and size: on a shared machine a run at 100k rows can
# take twice its best (seen here: GiGPO 12 to 20 ms in one process).
REPEATS = 7


class BaselineFigures(TypedDict):
    """The yardstick against its per-row baseline at one size (seconds; ratios: per-row over
    ours)."""

    per_row_s: float
    ratio: float
    write_s: float
    build_s: float
    from_records_s: float
    end_to_end_ratio: float


class PeerFigures(TypedDict):
    """One estimator beside its authors' function at one size."""

    theirs_s: float
    ratio: float
    end_to_end_ratio: float
    max_difference: float
    rows_apart_at_defaults: int


class TargetFigures(TypedDict):
    """A :class:`SpeedTarget` and its measured time (``None``: past a quick run's sizes)."""

    estimator: str
    rows: int
    seconds: float
    hidden_size: int | None
    measured_s: float | None


class KeepUpFigures(TypedDict):
    """An estimator timed in turn with the yardstick (``times_s``: every run's best, by label)."""

    estimator: str
    versus: str
    rows: int
    speed_ratio: float
    times_s: dict[str, float]


class SpeedFigures(TypedDict):
    """What ``bench estimators`` measured: seconds per batch by estimator and rows, the
    yardstick's baseline, the authors' functions, the targets."""

    sizes: list[int]
    estimators: dict[str, dict[int, float]]
    baseline: dict[int, BaselineFigures]
    peers: dict[str, dict[int, PeerFigures]]
    targets: list[TargetFigures]
    keep_up: list[KeepUpFigures]


#: One timed run: an estimator and its parameters.
Run = tuple[str, dict[str, float]]


@dataclass(frozen=True)
class SyntheticRollout:
    """The columns of a synthetic batch, and each row's latent state (what BiPACE's synthetic
    hidden states encode)."""

    columns: dict[str, np.ndarray]
    latent: np.ndarray

    def batch(self, hidden: np.ndarray | None = None) -> StepBatch:
        """A fresh, uncached ``StepBatch`` over these columns."""
        return StepBatch(**self.columns, hidden=hidden)


def synthetic_rollout(n_rows: int, seed: int = 0) -> SyntheticRollout:
    """``n_rows`` steps: ``n_rows / 50`` trajectories of 50 steps, 8 per group.

    Each group is a task: a random transition table over 40 states and 4 actions (10% of moves
    slip to a random state); entering the last state pays 1 and restarts at state 0. When
    ``n_rows`` is not a multiple of 50 the last trajectory is cut short.

    Example:
        >>> len(synthetic_rollout(430).batch())
        430
    """
    rng = np.random.default_rng(seed)
    n_trajs = math.ceil(n_rows / MAX_STEPS)
    n_groups = math.ceil(n_trajs / GROUP_SIZE)
    traj_group = np.arange(n_trajs) // GROUP_SIZE
    table = rng.integers(0, N_STATES, size=(n_groups, N_STATES, len(ACTION_NAMES)))
    goal = N_STATES - 1

    # Simulate every trajectory at once, one step at a time; rows come out step-major, the
    # order a trainer collects them in.
    state = np.zeros(n_trajs, dtype=np.int64)
    states, actions, rewards = [], [], []
    for _ in range(MAX_STEPS):
        action = rng.integers(0, len(ACTION_NAMES), size=n_trajs)
        slip = rng.random(n_trajs) < 0.1
        landed = np.where(
            slip, rng.integers(0, N_STATES, size=n_trajs), table[traj_group, state, action]
        )
        states.append(state)
        actions.append(action)
        rewards.append((landed == goal).astype(np.float64))
        state = np.where(landed == goal, 0, landed)

    traj = np.tile(np.arange(n_trajs), MAX_STEPS)
    t = np.repeat(np.arange(MAX_STEPS), n_trajs)
    last_length = n_rows - (n_trajs - 1) * MAX_STEPS
    keep = (traj < n_trajs - 1) | (t < last_length)
    traj, t = traj[keep], t[keep]
    group = traj_group[traj]
    latent = group * N_STATES + np.concatenate(states)[keep]  # (group, state) id
    keys = np.array(
        [stable_hash([g, s]) for g in range(n_groups) for s in range(N_STATES)], dtype=object
    )
    columns = {
        "group": group,
        "traj": traj,
        "t": t,
        "reward": np.concatenate(rewards)[keep],
        "obs_key": keys[latent],
        "state_key": keys[latent],
        "action_key": np.array(ACTION_NAMES, dtype=object)[np.concatenate(actions)[keep]],
        "valid": rng.random(int(keep.sum())) >= 0.05,
    }
    return SyntheticRollout(columns, latent)


def synthetic_hidden(latent: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """float32 hidden states: a random direction per latent state plus 10% Gaussian noise."""
    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((int(latent.max()) + 1, size), dtype=np.float32)
    hidden = np.empty((len(latent), size), dtype=np.float32)
    chunk = 8_192  # bounded temporaries at 100k x 3584
    for start in range(0, len(latent), chunk):
        rows = slice(start, start + chunk)
        noise = rng.standard_normal((len(latent[rows]), size), dtype=np.float32)
        hidden[rows] = directions[latent[rows]] + np.float32(0.1) * noise
    return hidden


def gigpo_per_row(
    group: Sequence[Any],
    traj: Sequence[Any],
    t: Sequence[int],
    reward: Sequence[float],
    obs_key: Sequence[Any],
    gamma: float = 0.95,
    omega: float = 1.0,
    epsilon: float = 1e-6,
) -> np.ndarray:
    """GiGPO (defaults: norm="mean_std", episode_stats="rows") the way verl-agent writes it.

    Dicts keyed by trajectory, group and (group, anchor observation), a Python loop over rows,
    a per-set mean and std; the spec's convention (a set of one row gets 0) replaces the code's
    std of 1. The benchmark's yardstick, not an estimator.
    """
    n = len(reward)
    # Discounted returns per trajectory (compute_step_discounted_returns).
    rows_by_traj: dict[Any, list[int]] = defaultdict(list)
    for i in range(n):
        rows_by_traj[traj[i]].append(i)
    step_return = np.zeros(n)
    episode_return: dict[Any, float] = {}
    for uid, rows in rows_by_traj.items():
        rows.sort(key=lambda i: t[i])
        running = 0.0
        for i in reversed(rows):
            running = reward[i] + gamma * running
            step_return[i] = running
        episode_return[uid] = sum(reward[i] for i in rows)

    def normalised(values: list[float], index: list[Any]) -> np.ndarray:
        # id2score -> id2mean / id2std -> (score - mean) / (std + epsilon), per row
        id2score: dict[Any, list[float]] = defaultdict(list)
        for i in range(n):
            id2score[index[i]].append(values[i])
        id2mean: dict[Any, float] = {}
        id2std: dict[Any, float] = {}
        for idx, scores in id2score.items():
            id2mean[idx] = float(np.mean(scores))
            id2std[idx] = float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0
        out = np.zeros(n)
        for i in range(n):
            if len(id2score[index[i]]) > 1:
                out[i] = (values[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        return out

    # Episode relative advantages (Eq. 3), every row of the group counted.
    scores = [episode_return[traj[i]] for i in range(n)]
    episode_adv = normalised(scores, list(group))
    # Anchor state grouping (Eq. 6): one step group per (group, identical observation).
    step_group_uids = [(group[i], obs_key[i]) for i in range(n)]
    # Step relative advantages (Eq. 7) and the joint advantage (Eq. 8).
    step_adv = normalised(list(step_return), step_group_uids)
    return episode_adv + omega * step_adv


def hidden_estimators() -> list[str]:
    """The built-in estimators that declare they need hidden states.

    Example:
        >>> hidden_estimators()
        ['bipace']
    """
    return [name for name in NAMES if "hidden" in REGISTRY[name].needs]


def best_time(function: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``function()`` over ``repeats`` calls, in seconds."""
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def time_estimator(
    name: str, rollout: SyntheticRollout, hidden: np.ndarray | None, repeats: int
) -> tuple[float, EstimatorResult]:
    """Best time of ``compute(name, fresh batch)`` and the result of the last run."""
    best, result = math.inf, None
    for _ in range(repeats):
        batch = rollout.batch(hidden)
        started = time.perf_counter()
        result = compute(name, batch)
        best = min(best, time.perf_counter() - started)
    assert result is not None, "repeats must be >= 1"
    return best, result


def time_target(
    target: SpeedTarget, quick: bool, rollouts: dict[int, SyntheticRollout]
) -> float | None:
    """Best time of the target's estimator on a rollout of its size (one of ``rollouts``, else
    made); ``None`` in a quick run when the size is past the quick sizes."""
    if quick and target.rows > max(QUICK_SIZES):
        return None
    rollout = rollouts.get(target.rows) or synthetic_rollout(target.rows, seed=target.rows)
    hidden = None
    if target.hidden_size is not None:
        hidden = synthetic_hidden(rollout.latent, target.hidden_size, seed=target.hidden_size)
    return time_estimator(target.estimator, rollout, hidden, 3)[0]


def interleaved_times(rollout: SyntheticRollout, runs: dict[str, Run]) -> dict[str, float]:
    """Best time of each run (label: estimator and parameters) on a fresh batch of
    ``rollout``, the runs taken in turn ``REPEATS`` times."""
    best = dict.fromkeys(runs, math.inf)
    for _ in range(REPEATS):
        for label, (name, params) in runs.items():
            batch = rollout.batch()
            started = time.perf_counter()
            compute(name, batch, **params)
            best[label] = min(best[label], time.perf_counter() - started)
    return best


def driver_chunks(records: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The records in the chunks the episode driver writes: one per step (the synthetic
    rollout is step-major, as the driver's rows are)."""
    chunks: list[list[Mapping[str, Any]]] = []
    for record in records:
        if not chunks or chunks[-1][-1]["t"] != record["t"]:
            chunks.append([])
        chunks[-1].append(record)
    return chunks


def time_build(records: Sequence[Mapping[str, Any]], repeats: int) -> tuple[float, float]:
    """Best times of writing ``records`` as the episode driver does (:class:`StepColumns`, one
    chunk per step) and of building the ``StepBatch`` from what was written."""
    chunks = driver_chunks(records)
    best_write, best_build = math.inf, math.inf
    for _ in range(repeats):
        rows = StepColumns()
        started = time.perf_counter()
        for chunk in chunks:
            rows.extend(chunk)
        written = time.perf_counter()
        rows.batch()
        best_write = min(best_write, written - started)
        best_build = min(best_build, time.perf_counter() - written)
    return best_write, best_build


def peer_table(
    root: Path, sizes: Sequence[int], rollouts: dict[int, SyntheticRollout], figures: SpeedFigures
) -> Table:
    """Our estimators beside their authors' functions (:mod:`agentbench_rl.bench.peers`) on the
    same rows: compute alone, and end to end (the build from the driver's columns plus
    compute); each peer is timed once. Their advantages are compared with ours in the code's
    arithmetic (:data:`PARITY_PARAMS`), which must agree to :data:`PARITY_TOLERANCE` (a check
    of the speed targets), and at our defaults, which differ on purpose on some rows (a set of
    equal values gives exactly 0; ``docs/estimators.md``). Fills ``figures["peers"]``."""
    table = Table(
        title=f"Against the authors' code (verl-agent at {root})",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    columns = ("estimator", "rows", "ours", "e2e", "theirs", "speed-up", "e2e x", "|diff|")
    for column in (*columns, "apart at defaults"):
        table.add_column(column, justify="right")
    for name in PEERS:
        peer = peer_estimator(name, root)
        for n in sizes:
            batch = rollouts[n].batch()
            started = time.perf_counter()
            theirs = peer(batch)
            theirs_s = time.perf_counter() - started
            difference = float(
                np.max(np.abs(compute(name, batch, **PARITY_PARAMS).advantages - theirs))
            )
            apart = int(np.sum(np.abs(compute(name, batch).advantages - theirs) > PARITY_TOLERANCE))
            ours_s = figures["estimators"][name][n]
            end_to_end_s = ours_s + figures["baseline"][n]["build_s"]
            figures["peers"].setdefault(name, {})[n] = {
                "theirs_s": theirs_s,
                "ratio": theirs_s / ours_s,
                "end_to_end_ratio": theirs_s / end_to_end_s,
                "max_difference": difference,
                "rows_apart_at_defaults": apart,
            }
            table.add_row(
                name,
                f"{n:,}",
                f"{1000 * ours_s:.1f} ms",
                f"{1000 * end_to_end_s:.1f} ms",
                f"{theirs_s:.2f} s",
                f"{theirs_s / ours_s:.0f}x",
                f"{theirs_s / end_to_end_s:.0f}x",
                f"{difference:.1e}",
                f"{apart:,}",
            )
    return table


def _cell(n_rows: int, seconds: float) -> str:
    rate = n_rows / seconds
    rate_text = f"{rate / 1e6:.1f}M/s" if rate >= 1e6 else f"{rate / 1e3:.1f}k/s"
    return f"{rate_text}  {1000 * seconds:.1f} ms"


def run(quick: bool, console: Console) -> SpeedFigures:
    """Time every estimator and the GiGPO baseline; print rich tables; return the figures."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    figures: SpeedFigures = {
        "sizes": list(sizes),
        "estimators": {},
        "baseline": {},
        "peers": {},
        "targets": [],
        "keep_up": [],
    }
    rollouts = {n: synthetic_rollout(n, seed=n) for n in sizes}
    time_every_estimator(sizes, rollouts, figures, console)
    compare_with_per_row(sizes, rollouts, figures, console)
    root = peer_root()
    if root is not None:
        console.print(peer_table(root, sizes, rollouts, figures))
    else:
        console.print(
            f"(set {ROOT_VARIABLE} to a verl-agent checkout to time the authors' own functions)"
        )
    check_targets(quick, sizes, rollouts, figures, console)
    return figures


def time_every_estimator(
    sizes: Sequence[int],
    rollouts: dict[int, SyntheticRollout],
    figures: SpeedFigures,
    console: Console,
) -> None:
    """Step 1: every estimator's time at every size (those that read hidden states at several
    widths), into ``figures["estimators"]``; prints the speed table."""
    speed = Table(
        title="Estimator speed: rows per second, time per batch",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    speed.add_column("estimator")
    for n in sizes:
        speed.add_column(f"{n:,} rows", justify="right")
    clusters_per_group: list[float] = []
    for name in NAMES:
        if REGISTRY[name].needs:  # timed below, on hidden states of several widths
            continue
        row = [name]
        for n in sizes:
            seconds, _ = time_estimator(name, rollouts[n], None, REPEATS)
            figures["estimators"].setdefault(name, {})[n] = seconds
            row.append(_cell(n, seconds))
        speed.add_row(*row)
    for estimator, size in itertools.product(hidden_estimators(), HIDDEN_SIZES):
        name = f"{estimator} (d={size})"
        row = [name]
        for n in sizes:
            hidden = synthetic_hidden(rollouts[n].latent, size, seed=size)
            seconds, result = time_estimator(estimator, rollouts[n], hidden, 2)
            diagnostics = result.diagnostics
            figures["estimators"].setdefault(name, {})[n] = seconds
            if "n_clusters" in diagnostics:
                clusters_per_group.append(diagnostics["n_clusters"] / diagnostics["n_groups"])
            row.append(_cell(n, seconds))
            del hidden
        speed.add_row(*row)
    console.print(speed)
    if clusters_per_group:
        console.print(
            f"{', '.join(hidden_estimators())} batches: {np.mean(clusters_per_group):.0f} "
            f"hidden-state clusters per group of {GROUP_SIZE * MAX_STEPS} rows."
        )
    console.print("Every time includes factorising the key columns.")


def compare_with_per_row(
    sizes: Sequence[int],
    rollouts: dict[int, SyntheticRollout],
    figures: SpeedFigures,
    console: Console,
) -> None:
    """Step 2: the yardstick against its per-row baseline (verl-agent's style), equal to 1e-8,
    and the cost of building the batch from the driver's rows, into ``figures["baseline"]``."""
    baseline = Table(
        title=f"{YARDSTICK_ESTIMATOR}: vectorised vs per-row baseline (verl-agent style)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # "build": the StepBatch from the episode driver's columns; "e2e": build plus compute,
    # against the baseline; "from records": StepBatch.from_records of one dict per row
    columns_shown = (
        "rows",
        "vectorised",
        "per-row",
        "speed-up",
        "build",
        "e2e",
        "e2e x",
        "from records",
        "|diff|",
    )
    for column in columns_shown:
        baseline.add_column(column, justify="right")
    for n in sizes:
        columns = rollouts[n].columns
        group, traj, t, reward, obs_key = (
            list(columns[key]) for key in ("group", "traj", "t", "reward", "obs_key")
        )
        started = time.perf_counter()
        per_row = gigpo_per_row(group, traj, t, reward, obs_key)
        per_row_s = time.perf_counter() - started
        vector_s = figures["estimators"][YARDSTICK_ESTIMATOR][n]
        vectorised = compute(YARDSTICK_ESTIMATOR, rollouts[n].batch()).advantages
        difference = float(np.max(np.abs(per_row - vectorised)))
        if difference > 1e-8:
            raise AssertionError(
                f"{YARDSTICK_ESTIMATOR} and its per-row baseline differ by {difference} at {n}"
            )
        # End to end: the trainer holds the rows as the episode driver wrote them.
        records = rollouts[n].batch().to_records()
        write_s, build_s = time_build(records, 3)
        from_records_s = best_time(functools.partial(StepBatch.from_records, records), 2)
        end_to_end_s = build_s + vector_s
        figures["baseline"][n] = {
            "per_row_s": per_row_s,
            "ratio": per_row_s / vector_s,
            "write_s": write_s,
            "build_s": build_s,
            "from_records_s": from_records_s,
            "end_to_end_ratio": per_row_s / end_to_end_s,
        }
        baseline.add_row(
            f"{n:,}",
            f"{1000 * vector_s:.1f} ms",
            f"{1000 * per_row_s:.1f} ms",
            f"{per_row_s / vector_s:.1f}x",
            f"{1000 * build_s:.1f} ms",
            f"{1000 * end_to_end_s:.1f} ms",
            f"{per_row_s / end_to_end_s:.1f}x",
            f"{1000 * from_records_s:.1f} ms",
            f"{difference:.1e}",
        )
    console.print(baseline)
    largest = max(sizes)
    console.print(
        f"build: the StepBatch from the rows as the episode driver keeps them (StepColumns, "
        f"written a step at a time, turned into columns in blocks of {StepColumns.BLOCK_ROWS:,} "
        f"rows); writing them costs {1000 * figures['baseline'][largest]['write_s']:.1f} ms at "
        f"{largest:,} rows, spread over the rollout's {MAX_STEPS} steps. from records: one "
        "dict per row."
    )


def _met(passed: bool) -> str:
    return "[green]yes[/]" if passed else "[red]no[/]"


def check_targets(
    quick: bool,
    sizes: Sequence[int],
    rollouts: dict[int, SyntheticRollout],
    figures: SpeedFigures,
    console: Console,
) -> None:
    """Step 4: the speed targets (absolute times, the yardstick's speed-up, each peer's end to
    end ratio, the estimators that must keep up with the yardstick), into
    ``figures["targets"]``; prints the targets table."""
    largest = max(sizes)
    targets = Table(title="Speed targets", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("figure", "measured", "target", "met"):
        targets.add_column(column)
    for target in SPEED_TARGETS:
        measured = time_target(target, quick, rollouts)
        figures["targets"].append(
            {
                "estimator": target.estimator,
                "rows": target.rows,
                "seconds": target.seconds,
                "hidden_size": target.hidden_size,
                "measured_s": measured,
            }
        )
        width = f" x {target.hidden_size}" if target.hidden_size else ""
        label = f"{target.estimator} time, {target.rows:,} rows{width}"
        if measured is None:
            targets.add_row(label, "(full run only)", f"< {target.seconds} s", "–")
            continue
        targets.add_row(
            label, f"{measured:.3f} s", f"< {target.seconds} s", _met(measured < target.seconds)
        )
    ratio = figures["baseline"][largest]["ratio"]
    targets.add_row(
        f"{YARDSTICK_ESTIMATOR} speed-up vs per-row, {largest:,} rows",
        f"{ratio:.1f}x",
        f">= {YARDSTICK_MIN_SPEEDUP:.0f}x",
        _met(ratio >= YARDSTICK_MIN_SPEEDUP),
    )
    for name, peer in figures["peers"].items():
        difference = max(size["max_difference"] for size in peer.values())
        targets.add_row(
            f"{name} equals verl-agent's (its arithmetic), every size",
            f"{difference:.1e}",
            f"<= {PARITY_TOLERANCE:.0e}",
            _met(difference <= PARITY_TOLERANCE),
        )
        if largest not in peer:
            continue
        ratio = peer[largest]["end_to_end_ratio"]
        targets.add_row(
            f"{name} end to end vs verl-agent's, {largest:,} rows",
            f"{ratio:.0f}x",
            f">= {END_TO_END_MIN_SPEEDUP:.0f}x",
            _met(ratio >= END_TO_END_MIN_SPEEDUP),
        )
    depth_notes = keep_up_with_yardstick(rollouts[largest], largest, figures, targets)
    console.print(targets)
    for note in depth_notes:
        console.print(note)
    if quick:
        console.print("(quick run: targets past its largest batch need the full run)")


def keep_up_with_yardstick(
    rollout: SyntheticRollout, rows: int, figures: SpeedFigures, targets: Table
) -> list[str]:
    """The estimators that must run at least as fast as the yardstick, each timed in turn with
    it (on a shared machine the speed drifts over seconds, and the table's times were taken
    apart); one with levels of groups also at each shallower depth. Adds their rows to
    ``targets`` and their figures to ``figures["keep_up"]``; returns the depth notes."""
    depth_notes: list[str] = []
    for name in (n for n in FASTER_THAN_YARDSTICK if n in figures["estimators"]):
        declared = REGISTRY[name].defaults
        depth = int(declared.get(LEVELS_PARAMETER, 0))
        runs: dict[str, Run] = {
            YARDSTICK_ESTIMATOR: (YARDSTICK_ESTIMATOR, {}),
            name: (name, {}),
            **{f"{name}:{k}": (name, {LEVELS_PARAMETER: k}) for k in range(depth)},
        }
        paired = interleaved_times(rollout, runs)
        per_row_ratio = paired[YARDSTICK_ESTIMATOR] / paired[name]
        figures["keep_up"].append(
            {
                "estimator": name,
                "versus": YARDSTICK_ESTIMATOR,
                "rows": rows,
                "speed_ratio": per_row_ratio,
                "times_s": paired,
            }
        )
        targets.add_row(
            f"{name} rows/s vs {YARDSTICK_ESTIMATOR}'s, {rows:,} rows",
            f"{per_row_ratio:.2f}x",
            ">= 1x",
            _met(per_row_ratio >= 1.0),
        )
        if LEVELS_PARAMETER in declared:
            by_depth = [paired[f"{name}:{k}"] for k in range(depth)] + [paired[name]]
            depth_notes.append(
                f"{name} at {rows:,} rows by {LEVELS_PARAMETER}, timed in turn with "
                f"{YARDSTICK_ESTIMATOR} ({1000 * paired[YARDSTICK_ESTIMATOR]:.1f} ms): "
                + ", ".join(f"{k}: {1000 * seconds:.1f} ms" for k, seconds in enumerate(by_depth))
                + ' (docs/estimators.md, "Benchmarks").'
            )
    return depth_notes
