"""``agentbench-rl bench fidelity --env NAME --agent SPEC``: every estimator against a
Monte-Carlo estimate of the true advantage, on a real env.

Every env here is deterministic given (task, reset seed, action prefix), so the advantage of the
policy that produced a batch can be estimated by playing that policy on from each visited step:

1. **The batch** is the trainer's: N tasks of the split, of the given categories if any
   (``EnvSpec.draw_tasks``, seeded) x G
   trajectories; member m of task τ resets with ``episode_seed(seed, τ)`` and its agent is seeded
   ``member_seed(seed, τ, m)``, as training seeds them.
2. **The truth.** For each visited prefix h_t (trajectory m, step t), K continuations: a fresh env
   is reset with the trajectory's seed and the agent replays steps 0 .. t−1 with the
   trajectory's own seed (each action must come out as recorded and the state reached must
   carry the recorded ``state_hash``: a replay that does not is an error, not noise); then the
   agent is reseeded with ``continuation_seed(seed, τ, m, t, k)`` and plays to the episode's end
   (success, or the env's step limit: the truth is that of the episode's finite horizon)::

       G_t^(k)    = Σ_{u ≥ t} γ^(u−t) r_u^(k)                                       (1)
       V̂(h_t)     = mean_k G_t^(k),      se(h_t) = std_k G_t^(k) / √K               (2)
       Q̂(h_t, a_t) = r_t + γ·V̂(h_{t+1})  (V̂ = 0 after the trajectory's last step)  (3)
       Â_t        = Q̂(h_t, a_t) − V̂(h_t),  se(Â_t) = √(γ²·se(h_{t+1})² + se(h_t)²)  (4)

   Q needs no continuations of its own: the env being deterministic, a_t leads to exactly one
   h_{t+1}, whose K continuations are V̂(h_{t+1})'s. V is the mean over the policy's own draws at
   h_t, not Σ_a π(a|h_t)·Q(h_t, a) over the admissible actions (which needs every action's Q).
   The replay restores the whole prefix, so for a policy that reads its history (``hf:``
   prompts show it) this is the advantage of that history, as the estimators see it.
3. **Scores**, per estimator run (each registered estimator at its defaults, plus the variants
   ``bench fidelity`` runs; BiPACE only when the agent hands over hidden states, which no agent
   here does yet), over the batch's rows: Pearson and Spearman correlation with Â, sign
   agreement on the rows whose Â is more than two standard errors from 0, and the relative
   error after the best scale ``min_c mean((c·est − Â)²) / mean(Â²)``, each with a 95%
   bootstrap interval over tasks; and the same broken down by category, by half of the
   trajectory (early: t < T/2) and by the trajectory's success.

The continuations from step t are jobs (trajectory, k), in trajectory then k order; each
``--parallel`` of them played at once are one piece, journaled when done
(``continuations.jsonl`` in the output folder), so a killed run loses at most the piece it was
playing, and resumes with the job after the last journaled one, whatever its own ``--parallel``.
Each piece carries its batch's fingerprint and a checksum, so an edited return, a piece spliced
from another seed's journal or a damaged line is refused in one line naming the file and the
line (journals from before checksums, whose header does not promise them, still read).
The numbers do not depend on ``--parallel``: every episode's draws are fixed by its seeds (an
``hf:`` policy's scores to float rounding, which its batch's grouping can move).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

import numpy as np
import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table
from scipy.stats import rankdata

from agentbench_rl.agents import load_agent
from agentbench_rl.agents.base import Agent, BatchAgent
from agentbench_rl.bench.credit.sets import CreditSet, write_set
from agentbench_rl.bench.fidelity import estimator_runs, json_number, step_set_purity
from agentbench_rl.bench.truth_settings import TruthSettings
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.batch import StepBatch, StepRecord
from agentbench_rl.core.hashing import seed_from, tuple_hash
from agentbench_rl.core.jsonfile import complete_lines, json_lines
from agentbench_rl.core.text import portable_values
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.estimators import EstimatorParams, compute, resolve
from agentbench_rl.estimators.common import combine_codes
from agentbench_rl.harness.provenance import Machine, agent_weights_fingerprint, machine
from agentbench_rl.progress import duration, progress_display
from agentbench_rl.rollout.episode import (
    EpisodeSlot,
    Lockstep,
    as_batch_agent,
    drive,
    episode_seed,
    member_seed,
)
from agentbench_rl.spec.records import HiddenSource

JOURNAL = "continuations.jsonl"
BOOTSTRAP = 1000
MIN_INTERVAL_TASKS = 5  # fewer tasks give a handful of distinct resamples, not an interval
Metric = Literal["pearson", "spearman", "sign_agreement", "relative_mse"]
METRICS: tuple[Metric, ...] = ("pearson", "spearman", "sign_agreement", "relative_mse")


class Interval(TypedDict):
    """A figure and its 95% bootstrap interval over tasks (NaN: too few tasks)."""

    value: float
    ci95: tuple[float, float]


class PartFigures(TypedDict):
    """One estimator's :data:`METRICS` on one part of the rows (all, early, late, a category,
    the rows of its pure or impure sets)."""

    rows: int
    tasks: int
    pearson: Interval
    spearman: Interval
    sign_agreement: Interval
    relative_mse: Interval


class EstimatorFigures(TypedDict):
    """One estimator run scored against the truth: its parameters, the purity of its
    step-level sets (``None``: it has none) and its figures per part."""

    estimator: str
    params: EstimatorParams
    purity: float | None
    breakdowns: dict[str, PartFigures]


class TruthFigures(TypedDict):
    """The truth's size, spread and noise."""

    rows: int
    trajectories: int
    success_rate: float
    std_advantage: float
    mean_standard_error: float
    #: the share of the true advantages' variance that is Monte-Carlo noise: what K buys
    noise_share: float


class Cost(TypedDict):
    """The continuations' cost over every invocation (``None``: a piece's time was not
    journaled), and this invocation's whole."""

    truth_seconds: float | None
    truth_cpu_seconds: float | None
    truth_env_steps: int
    batch_env_steps: int
    seconds: float
    cpu_seconds: float


class FidelityReport(TypedDict):
    """What ``bench fidelity --env`` reports (``fidelity.json``, and ``rows`` in
    ``fidelity.csv``): the settings, the truth, every estimator's figures, the per-row values,
    where the continuations were played and what they cost."""

    settings: dict[str, Any]
    truth: TruthFigures
    results: dict[str, EstimatorFigures]
    rows: dict[str, list[str] | list[int] | list[float]]
    machines: NotRequired[list[MachineShare]]
    cost: NotRequired[Cost]


def continuation_seed(seed: int, task_id: str, member: int, t: int, k: int) -> int:
    """The agent's seed for continuation ``k`` from step ``t`` of member ``member``'s trajectory.

    Example:
        >>> continuation_seed(0, "train-1", 0, 3, 0) != continuation_seed(0, "train-1", 0, 3, 1)
        True
    """
    return seed_from(seed, task_id, member, t, k, "continuation")


def policy(spec: str, rows: int) -> BatchAgent:
    """The policy for up to ``rows`` episodes at once: one batched agent, or one agent per row.
    Made once per run (a model loads once) and told each piece's episodes anew, which reseeds
    every agent here."""
    agent = load_agent(spec)
    if isinstance(agent, BatchAgent):
        prepare = getattr(agent, "prepare", None)
        if prepare:
            prepare()
        return agent
    agents: list[Agent] = [agent] + [load_agent(spec) for _ in range(rows - 1)]
    return as_batch_agent(agents)


@dataclass(frozen=True)
class Trajectory:
    """One played trajectory of the batch: its task, member, reset seed, rewards, the state hash
    and canonical action of each step, whether it succeeded and its category."""

    traj: str
    group: str
    task_id: str
    member: int
    reset_seed: int
    rewards: tuple[float, ...]
    states: tuple[str, ...]
    actions: tuple[str, ...]
    success: bool
    category: str


@dataclass(frozen=True)
class PlayedBatch:
    """The batch the estimators score: its step records and its trajectories (record ``traj``
    ids are the trajectories' ``traj``)."""

    records: list[StepRecord]
    trajectories: list[Trajectory]

    def fingerprint(self) -> str:
        """What the continuations replay, hashed: every trajectory's states, actions and
        rewards. A journal's continuations belong to this batch only."""
        return tuple_hash(
            [
                [tr.traj, list(tr.states), list(tr.actions), list(tr.rewards)]
                for tr in self.trajectories
            ]
        )


def play_batch(
    settings: TruthSettings, envs: Sequence[TextAgentEnv[Any]], agent: BatchAgent
) -> PlayedBatch:
    """Play ``tasks`` x ``group_size`` episodes on ``envs`` (one env per episode) with
    ``agent`` (:func:`policy`), seeded as the trainer seeds a batch."""
    task_ids = settings.env_spec().draw_tasks(settings.tasks, settings.seed)
    slots, members, agent_seeds = [], [], []
    for index, task_id in enumerate(task_ids):
        group = f"{index}:{task_id}"  # a task drawn twice is two groups
        for member in range(settings.group_size):
            slots.append(
                EpisodeSlot(
                    task_id, episode_seed(settings.seed, task_id), group, f"{group}/{member}"
                )
            )
            members.append(member)
            agent_seeds.append(member_seed(settings.seed, task_id, member))
    lock = _play(agent, envs[: len(slots)], slots, agent_seeds, switch=None)
    steps: dict[str, list[StepRecord]] = {str(slot.traj): [] for slot in slots}
    for record in lock.records:
        steps[str(record["traj"])].append(record)
    trajectories = []
    for slot, member, episode in zip(slots, members, lock.episodes, strict=True):
        rows = steps[str(slot.traj)]
        trajectories.append(
            Trajectory(
                traj=str(slot.traj),
                group=str(slot.group),
                task_id=slot.task_id,
                member=member,
                reset_seed=slot.seed,
                rewards=tuple(float(row["reward"]) for row in rows),
                states=tuple(str(row["state_key"]) for row in rows),
                actions=tuple(str(row["action_key"]) for row in rows),
                success=bool(episode.info["won"]),
                category=str(episode.info["category"]),
            )
        )
    return PlayedBatch(lock.records, trajectories)


@dataclass(frozen=True)
class Switch:
    """Where a piece of continuations hands over from replay to fresh draws: at step ``t``, each row
    ``i`` must stand in state ``states[i]`` and its agent is reseeded with ``seeds[i]``; before
    it, row ``i`` must act ``actions[i][u]`` at step u."""

    t: int
    states: list[str]
    actions: list[tuple[str, ...]]
    seeds: list[int]


def _play(
    agent: BatchAgent,
    envs: Sequence[TextAgentEnv[Any]],
    slots: Sequence[EpisodeSlot],
    agent_seeds: Sequence[int],
    switch: Switch | None,
) -> Lockstep:
    """Play one episode per env through the episode driver; with a ``switch``, check the
    replay after each step and reseed the agent once step ``switch.t`` is reached."""
    lock = Lockstep.of_envs(envs, slots)
    # The batch keeps each row's hidden state when the agent can hand it over (BiPACE's input);
    # the continuations need none.
    capture = switch is None and hasattr(agent, "capture_hidden")
    hidden: list[Any] = []  # row i's vector, rows in the order the driver writes them

    def checked(episodes: list[int], rows: list[int]) -> None:
        if capture:
            hidden.extend(agent.last_hidden)  # type: ignore[attr-defined]
        if switch is None or lock.t > switch.t:
            return
        step = lock.t - 1
        for index, row in zip(episodes, rows, strict=True):
            acted = lock.rows.row(row)["action_key"]
            if acted != switch.actions[index][step]:
                raise RuntimeError(
                    f"fidelity: replaying {slots[index].traj}, step {step} acted "
                    f"{acted!r}, not the recorded "
                    f"{switch.actions[index][step]!r}: the agent is not deterministic "
                    "given its seed"
                )
        if lock.t == switch.t:
            handover()

    def handover() -> None:  # at step switch.t: the recorded state, then fresh draws
        assert switch is not None
        for index in lock.live:
            if lock.episodes[index].info["state_hash"] != switch.states[index]:
                raise RuntimeError(
                    f"fidelity: replaying {slots[index].traj} did not restore the state of "
                    f"step {switch.t} (state_hash differs): the env or the agent is not "
                    "deterministic given its seeds"
                )
        agent.begin_episodes(envs, switch.seeds)

    if capture:
        agent.capture_hidden = True  # type: ignore[attr-defined]
    agent.begin_episodes(envs, agent_seeds)
    if switch is not None and switch.t == 0:
        handover()
    for _ in drive(lock, agent, checked):
        pass
    if capture:
        agent.capture_hidden = False  # type: ignore[attr-defined]
        lock.rows.set_column("hidden", np.stack(hidden))
    return lock


def discounted_return(rewards: Sequence[float], gamma: float) -> float:
    """Σ_u γ^u r_u (equation 1).

    Example:
        >>> discounted_return([1.0, 0.0, 2.0], 0.5)
        1.5
    """
    total = 0.0
    for reward in reversed(rewards):
        total = reward + gamma * total
    return total


Job = tuple[Trajectory, int]  # a continuation from step t: (the trajectory, k)


def continuation_jobs(settings: TruthSettings, batch: PlayedBatch, t: int) -> list[Job]:
    """The continuations from step ``t``, in journal order: K for every trajectory longer
    than t."""
    return [
        (trajectory, k)
        for trajectory in batch.trajectories
        if len(trajectory.rewards) > t
        for k in range(settings.continuations)
    ]


def continuation_returns(
    settings: TruthSettings,
    jobs: Sequence[Job],
    t: int,
    envs: Sequence[TextAgentEnv[Any]],
    agent: BatchAgent,
) -> tuple[list[float], int]:
    """The return from step ``t`` (equation 1) of each job, played at once (one env each),
    and the env steps they took (replays included)."""
    slots = [
        EpisodeSlot(trajectory.task_id, trajectory.reset_seed, trajectory.traj, f"{i}")
        for i, (trajectory, _) in enumerate(jobs)
    ]
    switch = Switch(
        t=t,
        states=[trajectory.states[t] for trajectory, _ in jobs],
        actions=[trajectory.actions for trajectory, _ in jobs],
        seeds=[
            continuation_seed(settings.seed, trajectory.task_id, trajectory.member, t, k)
            for trajectory, k in jobs
        ],
    )
    agent_seeds = [
        member_seed(settings.seed, trajectory.task_id, trajectory.member) for trajectory, _ in jobs
    ]
    lock = _play(agent, envs[: len(jobs)], slots, agent_seeds, switch)
    rewards: list[list[float]] = [[] for _ in jobs]
    for record in lock.records:
        if record["t"] >= t:
            rewards[int(record["traj"])].append(float(record["reward"]))
    return [discounted_return(episode, settings.gamma) for episode in rewards], len(lock.rows)


@dataclass(frozen=True)
class Truth:
    """Per row of the batch (in record order): Â (equation 3), its standard error (4), V̂ and
    its standard error (2)."""

    advantage: np.ndarray
    standard_error: np.ndarray
    value: np.ndarray
    value_error: np.ndarray


def assemble_truth(
    settings: TruthSettings, batch: PlayedBatch, returns: dict[int, dict[str, list[float]]]
) -> Truth:
    """Equations 2-4 from the continuation returns of every prefix length."""
    gamma = settings.gamma
    k = settings.continuations
    advantage = np.zeros(len(batch.records))
    error = np.zeros(len(batch.records))
    value = np.zeros(len(batch.records))
    value_error = np.zeros(len(batch.records))
    row_of = {(record["traj"], record["t"]): row for row, record in enumerate(batch.records)}
    for trajectory in batch.trajectories:
        length = len(trajectory.rewards)
        means = np.zeros(length + 1)  # V̂ after the last step: 0
        errors = np.zeros(length + 1)
        for t in range(length):
            samples = np.asarray(returns[t][trajectory.traj])
            means[t] = samples.mean()
            errors[t] = samples.std(ddof=1) / math.sqrt(k)
        for t in range(length):
            row = row_of[(trajectory.traj, t)]
            q = trajectory.rewards[t] + gamma * means[t + 1]
            advantage[row] = q - means[t]
            error[row] = math.sqrt(gamma**2 * errors[t + 1] ** 2 + errors[t] ** 2)
            value[row], value_error[row] = means[t], errors[t]
    return Truth(advantage, error, value, value_error)


def _pearson(sums: np.ndarray) -> np.ndarray:
    """Pearson correlation from (..., 6) sums n, Σx, Σy, Σx², Σy², Σxy; 0 where either side is
    constant."""
    n, sx, sy, sxx, syy, sxy = np.moveaxis(sums, -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = sxy - sx * sy / n
        spread = np.sqrt(np.maximum(sxx - sx * sx / n, 0.0) * np.maximum(syy - sy * sy / n, 0.0))
        return np.where(spread > 1e-12 * np.maximum(1.0, n), covariance / spread, 0.0)


def _task_sums(columns: Sequence[np.ndarray], tasks: np.ndarray, n_tasks: int) -> np.ndarray:
    """(n_tasks, len(columns)): each column summed over each task's rows."""
    return np.stack(
        [np.bincount(tasks, weights=column, minlength=n_tasks) for column in columns], axis=1
    )


def task_metrics(
    estimate: np.ndarray,
    truth: np.ndarray,
    error: np.ndarray,
    tasks: np.ndarray,
    counts: np.ndarray,
    shared: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The four scores (module docstring) of the rows, each task counted ``counts[b, k]``
    times in resample ``b`` (``counts`` (B, tasks): ones for the batch itself, a multinomial
    draw for a bootstrap resample). Everything is a ratio of sums over rows, so it is summed
    per task once and each resample is one matrix product. Spearman is the Pearson
    correlation of the rows' ranks in the whole batch (mid-ranks for ties; a resample reuses
    them). Sign agreement is NaN where no row's true advantage is clear of its noise (two
    standard errors); the relative error NaN where every true A is 0.

    ``shared``: for an estimate that reads the truth's own Monte-Carlo estimates, each row's
    covariance of its noise with the truth's noise. It is subtracted from every Σ estimate·truth
    (the Pearson covariance, the relative error's cross term), which removes the correlation
    the two owe to sharing one draw; Spearman and sign agreement cannot be corrected so, and
    are NaN.

    Example:
        >>> tasks, ones = np.array([0, 0, 1]), np.ones((1, 2))
        >>> figures = task_metrics(np.array([2.0, -2.0, 0.0]), np.array([1.0, -1.0, 0.5]),
        ...                        np.zeros(3), tasks, ones)
        >>> round(float(figures["relative_mse"][0]), 4), float(figures["sign_agreement"][0])
        (0.1111, 0.6666666666666666)
    """
    n_tasks = counts.shape[1]
    ones = np.ones_like(truth)

    cross_terms = estimate * truth - (shared if shared is not None else 0.0)

    def moments(x: np.ndarray, y: np.ndarray, xy: np.ndarray) -> np.ndarray:
        return counts @ _task_sums((ones, x, y, x * x, y * y, xy), tasks, n_tasks)

    ranks_x, ranks_y = rankdata(estimate), rankdata(truth)
    decided = np.abs(truth) > 2 * error
    agrees = (np.sign(estimate) == np.sign(truth)) & decided
    signs = counts @ _task_sums((agrees.astype(float), decided.astype(float)), tasks, n_tasks)
    fit = counts @ _task_sums((estimate * estimate, cross_terms, truth * truth), tasks, n_tasks)
    energy, cross, target = fit[:, 0], fit[:, 1], fit[:, 2]
    uncorrectable = np.full(len(counts), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(energy > 0, cross / energy, 0.0)
        residual = scale * scale * energy - 2 * scale * cross + target
        return {
            "pearson": _pearson(moments(estimate, truth, cross_terms)),
            "spearman": _pearson(moments(ranks_x, ranks_y, ranks_x * ranks_y))
            if shared is None
            else uncorrectable,
            "sign_agreement": signs[:, 0] / signs[:, 1] if shared is None else uncorrectable,
            "relative_mse": np.maximum(residual, 0.0) / target,
        }


def metrics(estimate: np.ndarray, truth: np.ndarray, error: np.ndarray) -> dict[str, float]:
    """The four scores of one estimator on some rows.

    Example:
        >>> figures = metrics(np.array([2.0, -2.0, 0.0]), np.array([1.0, -1.0, 0.5]),
        ...                   np.zeros(3))
        >>> round(figures["relative_mse"], 4), figures["sign_agreement"]
        (0.1111, 0.6666666666666666)
    """
    figures = task_metrics(estimate, truth, error, np.zeros(len(truth), int), np.ones((1, 1)))
    return {name: float(values[0]) for name, values in figures.items()}


def resample_counts(tasks: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows' task codes and :data:`BOOTSTRAP` resamples of the tasks with replacement
    (counts, (B, tasks)); ``None`` for rows of fewer than :data:`MIN_INTERVAL_TASKS` tasks,
    whose few distinct resamples make no interval."""
    codes, uniques = pd.factorize(tasks)
    n_tasks = len(uniques)
    if n_tasks < MIN_INTERVAL_TASKS:
        return None
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_tasks, np.full(n_tasks, 1 / n_tasks), size=BOOTSTRAP)
    return codes, counts.astype(float)


def percentile_interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of the finite values (NaN when none is)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return (float("nan"), float("nan"))
    return (float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5)))


def bootstrap(
    estimate: np.ndarray,
    truth: np.ndarray,
    error: np.ndarray,
    tasks: np.ndarray,
    seed: int,
) -> dict[str, tuple[float, float]]:
    """95% percentile intervals of each metric, resampling tasks (groups) with replacement
    (:func:`task_metrics`); NaN for rows of fewer than :data:`MIN_INTERVAL_TASKS` tasks."""
    drawn = resample_counts(tasks, seed)
    if drawn is None:
        return {name: (float("nan"), float("nan")) for name in METRICS}
    codes, counts = drawn
    figures = task_metrics(estimate, truth, error, codes, counts)
    return {name: percentile_interval(values) for name, values in figures.items()}


def breakdowns(batch: PlayedBatch) -> dict[str, np.ndarray]:
    """Boolean row masks: every row, each category, early / late half, success / failure."""
    lengths = {trajectory.traj: len(trajectory.rewards) for trajectory in batch.trajectories}
    success = {trajectory.traj: trajectory.success for trajectory in batch.trajectories}
    category = {trajectory.traj: trajectory.category for trajectory in batch.trajectories}
    traj = [str(record["traj"]) for record in batch.records]
    t = np.array([record["t"] for record in batch.records])
    length = np.array([lengths[key] for key in traj])
    masks = {"all": np.ones(len(traj), dtype=bool)}
    for name in sorted(set(category.values())):
        masks[f"category {name}"] = np.array([category[key] == name for key in traj])
    masks["early (t < T/2)"] = 2 * t < length
    masks["late"] = 2 * t >= length
    masks["succeeded"] = np.array([success[key] for key in traj])
    masks["failed"] = ~masks["succeeded"]
    return {name: mask for name, mask in masks.items() if mask.any()}


# ------------------------------------------------------------------------------ the run
@dataclass(frozen=True)
class Piece:
    """Continuations from step ``t``, jobs ``first_job`` on (:func:`continuation_jobs`), as
    journaled: one return per job, what they cost (env steps, wall and CPU seconds) and the
    machine that played them (:func:`piece_machine`); ``None`` in journals written before each
    was kept. A journal resumes on another machine, so its pieces say where each was played."""

    t: int
    first_job: int
    returns: list[float]
    env_steps: int
    seconds: float | None = None
    cpu_seconds: float | None = None
    machine: Machine | None = None


class MachineShare(TypedDict):
    """A machine the pieces were played on (``None``: not journaled), and how many of the
    continuations it played."""

    machine: Machine | None
    continuations: int


def piece_machine(agent: BatchAgent) -> Machine:
    """What a piece's draws depend on beyond the code and the seeds (provenance's
    :func:`~agentbench_rl.harness.provenance.machine`): torch's intra-op thread count where the
    agent runs on torch (``None`` where none is loaded), and the GPU where its model runs on one.

    Example:
        >>> piece_machine(policy("random", 1))["cpu"] != ""
        True
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return machine()
    device = getattr(getattr(agent, "policy", None), "device", None)  # a model's weights
    on_gpu = device is not None and device.type == "cuda"
    return machine(torch.get_num_threads(), torch.cuda.get_device_name(device) if on_gpu else None)


def machines_played(pieces: Sequence[Piece]) -> list[MachineShare]:
    """The machines the pieces were played on, each with its continuation count, in first-played
    order (``machine`` ``None``: pieces journaled before machines were kept).

    Example:
        >>> here = {"cpu": "x", "threads": 1}
        >>> played = [Piece(0, 0, [1.0, 0.0], 4), Piece(0, 2, [1.0], 2, machine=here)]
        >>> [(entry["machine"], entry["continuations"]) for entry in machines_played(played)]
        [(None, 2), ({'cpu': 'x', 'threads': 1}, 1)]
    """
    counts: dict[str, int] = {}
    for piece in pieces:
        key = json.dumps(piece.machine, sort_keys=True)
        counts[key] = counts.get(key, 0) + len(piece.returns)
    return [{"machine": json.loads(key), "continuations": n} for key, n in counts.items()]


def _total(seconds: list[float | None]) -> float | None:
    """The sum, or ``None`` when a piece's time was not journaled."""
    return None if any(value is None for value in seconds) else sum(v for v in seconds if v)


def _duration(seconds: float | None) -> str:
    return "(not journaled)" if seconds is None else duration(seconds)


def _recorded(line: dict[str, Any]) -> TruthSettings | None:
    """The settings a journal's first line holds (a field added since takes its default), or
    ``None`` for a line that holds none."""
    if "settings" not in line or not set(line) <= {
        "settings",
        "agent_weights",
        "batch",
        "checksums",
    }:
        return None
    try:
        return TruthSettings(**line["settings"])  # the record as it was written
    except (TypeError, ValueError):
        return None


def same_settings(recorded: TruthSettings | None, settings: TruthSettings) -> bool:
    """Whether a journal's settings are ``settings``, paths of the machines compared as their
    portable forms (a journal shipped with a credit set resumes on another machine).

    Example:
        >>> here = TruthSettings(env="sokoban", agent="hf:/home/me/runs/policy")
        >>> there = TruthSettings(env="sokoban", agent="hf:/tmp/x/policy")
        >>> same_settings(there, here), same_settings(there.model_copy(update={"seed": 1}), here)
        (True, False)
    """
    return recorded is not None and portable_values(recorded.record()) == portable_values(
        settings.record()
    )


def _read_journal(
    path: Path, settings: TruthSettings, weights: str | None, batch: PlayedBatch
) -> dict[int, list[Piece]]:
    """The journaled pieces of an earlier run of the same settings, the same weights (an
    ``hf:`` agent's fingerprint: a folder retrained in place holds another policy under the same
    spec) and the same batch (a policy whose scores moved with the code may draw other actions
    at the same seeds), per step t in job order, a torn last line cut off; journals from before
    a check go without it. A line of a whole step t (journals from before pieces) is its one
    piece."""
    if not path.exists():
        return {}
    text, complete = complete_lines(path.read_bytes(), str(path))
    if complete != path.stat().st_size:
        with path.open("r+b") as handle:
            handle.truncate(complete)
    pieces: dict[int, list[Piece]] = {}
    sealed = False  # whether the header promises a checksum on every piece
    for number, line in json_lines(text, str(path)):
        if number == 1:
            if not isinstance(line, dict):
                raise ValueError(f"{path} line 1: not a journal header; delete the file")
            sealed = line.get("checksums") is True
            if not same_settings(_recorded(line), settings):
                raise ValueError(
                    f"{path} holds continuations of other settings ({line}); "
                    "use another --out or delete it"
                )
            recorded_weights = line.get("agent_weights", weights)
            if recorded_weights != weights:
                raise ValueError(
                    f"{path} holds continuations of other weights ({settings.agent} was "
                    f"{recorded_weights}, is {weights}); use another --out or delete it"
                )
            if line.get("batch", batch.fingerprint()) != batch.fingerprint():
                raise ValueError(
                    f"{path} holds continuations of another batch (the policy played other "
                    "trajectories at these seeds); use another --out or delete it"
                )
            continue
        piece = _piece_of(line, f"{path} line {number}", batch, sealed, settings)
        done = sum(len(earlier.returns) for earlier in pieces.get(piece.t, []))
        if piece.first_job != done:
            raise ValueError(
                f"{path} line {number}: continuations from step {piece.t} start at job "
                f"{piece.first_job}, but {done} are journaled before it; delete the file to "
                "start over"
            )
        pieces.setdefault(piece.t, []).append(piece)
    return pieces


def _checksum(body: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _piece_line(piece: Piece, batch: PlayedBatch) -> str:
    """A piece as journaled: its fields, its batch's fingerprint and a checksum of both."""
    body = {**asdict(piece), "batch": batch.fingerprint()}
    return json.dumps({**body, "sha256": _checksum(body)})


def _piece_of(
    line: Any, where: str, batch: PlayedBatch, sealed: bool, settings: TruthSettings
) -> Piece:
    """A journaled piece, checked (``where`` names the file and line in the one-line error):
    its checksum and batch where it carries them (every piece of a sealed journal must); its
    fields of their kinds. A line of a whole step t (journals from before pieces) is its one
    piece."""
    if not isinstance(line, dict):
        raise ValueError(f"{where}: not a journal piece (a {type(line).__name__})")
    body = {key: value for key, value in line.items() if key != "sha256"}
    if "sha256" in line or sealed:
        if line.get("sha256") != _checksum(body):
            raise ValueError(f"{where}: the piece's checksum does not match (edited or damaged)")
        if body.get("batch") != batch.fingerprint():
            raise ValueError(f"{where}: a piece of another batch (spliced from another journal)")
    try:
        t, returns = int(line["t"]), line["returns"]
        if isinstance(returns, dict):  # a whole step t
            returns = [
                returns[trajectory.traj][k]
                for trajectory, k in continuation_jobs(settings, batch, t)
            ]
        returns = [float(value) for value in returns]
        piece = Piece(
            t,
            int(line.get("first_job", 0)),
            returns,
            int(line["env_steps"]),
            line.get("seconds"),
            line.get("cpu_seconds"),
            line.get("machine"),
        )
    except (KeyError, TypeError, ValueError, IndexError) as problem:
        raise ValueError(
            f"{where}: not a journal piece ({type(problem).__name__}: {problem})"
        ) from None
    if not all(math.isfinite(value) for value in returns) or t < 0 or piece.env_steps < 0:
        raise ValueError(f"{where}: not a journal piece (a return not finite, or a negative count)")
    if piece.first_job + len(returns) > len(continuation_jobs(settings, batch, t)):
        raise ValueError(f"{where}: not a journal piece (more returns than step {t} has jobs)")
    return piece


def _returns_by_trajectory(jobs: Sequence[Job], pieces: Sequence[Piece]) -> dict[str, list[float]]:
    """The K returns of each trajectory from the pieces of one step t."""
    returns: dict[str, list[float]] = {}
    flat = [value for piece in pieces for value in piece.returns]
    for (trajectory, _), value in zip(jobs, flat, strict=True):
        returns.setdefault(trajectory.traj, []).append(value)
    return returns


def run(
    settings: TruthSettings,
    out: Path,
    console: Console,
    parallel: int = 64,
    export_set: Path | None = None,
    made: dict[str, Any] | None = None,
) -> FidelityReport:
    """Play the batch, estimate the truth (resuming from ``out``), score every estimator;
    print the table and write ``fidelity.md``, ``fidelity.csv``, ``fidelity.json`` and
    ``fidelity.png`` to ``out``; with ``export_set``, the batch and its truth as a credit set
    there (``made``: the commit and command recorded with it)."""
    if parallel < 1:
        raise ValueError(f"fidelity: parallel must be >= 1, got {parallel}")
    started, cpu_started = time.monotonic(), time.process_time()
    spec = settings.env_spec()
    n_episodes = settings.tasks * settings.group_size
    envs = [spec.make() for _ in range(max(parallel, n_episodes))]
    agent = policy(settings.agent, len(envs))
    batch = play_batch(settings, envs, agent)
    out.mkdir(parents=True, exist_ok=True)
    journal_path = out / JOURNAL
    weights = agent_weights_fingerprint(settings.agent)  # None but for hf: agents
    pieces = _read_journal(journal_path, settings, weights, batch)
    horizon = max(len(trajectory.rewards) for trajectory in batch.trajectories)
    jobs = {t: continuation_jobs(settings, batch, t) for t in range(horizon)}
    done = {t: sum(len(piece.returns) for piece in pieces.get(t, [])) for t in range(horizon)}
    here = piece_machine(agent)
    with journal_path.open("a", encoding="utf-8") as journal, progress_display(console) as bar:
        if journal.tell() == 0:
            header = {
                # paths of this machine left out: a journal shipped with a set resumes anywhere
                "settings": portable_values(settings.record()),
                "agent_weights": weights,
                "batch": batch.fingerprint(),
                "checksums": True,
            }
            journal.write(json.dumps(header) + "\n")
        task = bar.add_task(
            f"{settings.env.name} {settings.agent}: continuations",
            total=sum(map(len, jobs.values())),
            completed=sum(done.values()),
            every=1,  # a line per piece in a log: a long run's log is never silent for hours
        )
        for t in range(horizon):
            for first in range(done[t], len(jobs[t]), parallel):
                piece_jobs = jobs[t][first : first + parallel]
                began, cpu_began = time.monotonic(), time.process_time()
                returns, env_steps = continuation_returns(settings, piece_jobs, t, envs, agent)
                piece = Piece(
                    t,
                    first,
                    returns,
                    env_steps,
                    time.monotonic() - began,
                    time.process_time() - cpu_began,
                    here,
                )
                pieces.setdefault(t, []).append(piece)
                journal.write(_piece_line(piece, batch) + "\n")
                journal.flush()
                os.fsync(journal.fileno())
                bar.advance(task, len(piece_jobs))
    for env in envs:
        env.close()
    truth = assemble_truth(
        settings, batch, {t: _returns_by_trajectory(jobs[t], pieces[t]) for t in range(horizon)}
    )
    journaled = [piece for step in pieces.values() for piece in step]
    played_on = machines_played(journaled)
    if export_set is not None:
        name = Path(export_set).name
        made = {**(made or {}), "agent_weights": weights, "machines": played_on}
        write_set(monte_carlo_set(name, settings, batch, truth, agent, made), export_set)
        console.print(f"wrote the credit set {export_set} ({len(batch.records)} rows)")
    payload = score_batch(settings, batch, truth)
    payload["machines"] = played_on
    payload["cost"] = {
        # the continuations' cost over every invocation (a resumed run's pieces included) ...
        "truth_seconds": _total([piece.seconds for piece in journaled]),
        "truth_cpu_seconds": _total([piece.cpu_seconds for piece in journaled]),
        "truth_env_steps": sum(piece.env_steps for piece in journaled),
        "batch_env_steps": len(batch.records),
        # ... and this invocation's whole (loading, the batch, scoring)
        "seconds": time.monotonic() - started,
        "cpu_seconds": time.process_time() - cpu_started,
    }
    write_outputs(payload, out, console)
    return payload


def monte_carlo_set(
    name: str,
    settings: TruthSettings,
    batch: PlayedBatch,
    truth: Truth,
    agent: BatchAgent,
    made: dict[str, Any],
) -> CreditSet:
    """The batch and its Monte-Carlo truth as a credit set (``bench fidelity --export-set``):
    every column an estimator may read, the hidden states where the policy handed them over
    (its layer ``-hidden_layer`` at the last prompt token, stored as float16)."""
    steps = StepBatch.from_records(batch.records)
    category = {trajectory.traj: trajectory.category for trajectory in batch.trajectories}
    layer = getattr(getattr(agent, "policy", None), "hidden_layer", None)
    hidden: HiddenSource | None = None
    if steps.hidden is not None:
        hidden = {
            "source": f"the policy's layer -{layer} at the last prompt token, from the forward "
            "that answered",
            "dim": int(steps.hidden.shape[1]),
            "dtype": "float16",
        }
    return CreditSet(
        name=name,
        kind="monte-carlo",
        batch=steps,
        category=np.array([category[str(record["traj"])] for record in batch.records], object),
        true_advantage=truth.advantage,
        standard_error=truth.standard_error,
        value=truth.value,
        value_standard_error=truth.value_error,
        settings=settings.record(),
        hidden=hidden,
        made=made,
    )


def purity_masks(steps: StepBatch, name: str, params: EstimatorParams) -> dict[str, np.ndarray]:
    """For an estimator with step-level sets (anchor sets, clusters, HGPO's first level): the
    rows alone in their set, the rows of sets of two or more that hold one ``state_hash``, and
    the rows of sets that mix states (each part only when it has rows); nothing for an
    estimator without sets.

    Example:
        >>> steps = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": 0.0, "obs_key": "o",
        ...      "state_key": state, "action_key": "a", "valid": True}
        ...     for traj, state in (("x", "s"), ("y", "u"), ("z", "u"))])
        >>> {part: mask.tolist() for part, mask in purity_masks(steps, "gigpo", {}).items()}
        {'in impure sets': [True, True, True]}
    """
    sets = resolve(name).step_set_codes(steps, params)
    if sets is None:
        return {}
    codes, n_sets = sets
    states, _ = steps.codes("state_key")
    pairs, _ = combine_codes(codes, states)
    first_state = np.full(n_sets, -1)
    first_state[codes] = pairs
    mixed = np.zeros(n_sets, dtype=bool)
    np.logical_or.at(mixed, codes, pairs != first_state[codes])
    pure = ~mixed[codes]
    alone = np.bincount(codes, minlength=n_sets)[codes] == 1  # pure, and no peer to compare
    parts = {
        "in singleton sets": alone,
        "in pure sets of 2+": pure & ~alone,
        "in impure sets": ~pure,
    }
    return {part: mask for part, mask in parts.items() if mask.any()}


def score_batch(settings: TruthSettings, batch: PlayedBatch, truth: Truth) -> FidelityReport:
    """Every estimator run scored against the truth, overall and per breakdown."""
    steps = StepBatch.from_records(batch.records)
    tasks = np.array([str(record["group"]) for record in batch.records])
    masks = breakdowns(batch)
    spread = float(np.var(truth.advantage))
    noise = float(np.mean(truth.standard_error**2))
    results: dict[str, EstimatorFigures] = {}
    advantages: dict[str, np.ndarray] = {}
    columns = ("hidden",) if steps.hidden is not None else ()
    for label, name, params in estimator_runs(columns):
        # γ of the truth for the estimators that discount (GRPO and RLOO do not)
        discount = {"gamma": settings.gamma} if "gamma" in resolve(name).params else {}
        estimate = compute(name, steps, **discount, **params).advantages
        advantages[label] = estimate
        results[label] = {
            "estimator": name,
            "params": params,
            # share of its step-level sets (anchor sets, clusters) whose rows share one state
            "purity": json_number(step_set_purity(steps, name, params)),
            "breakdowns": {},
        }
        for part, mask in {**masks, **purity_masks(steps, name, params)}.items():
            figures = metrics(estimate[mask], truth.advantage[mask], truth.standard_error[mask])
            intervals = bootstrap(
                estimate[mask],
                truth.advantage[mask],
                truth.standard_error[mask],
                tasks[mask],
                seed_from(settings.seed, label, part) % 2**32,
            )
            scored = {name: {"value": figures[name], "ci95": intervals[name]} for name in METRICS}
            results[label]["breakdowns"][part] = cast(
                PartFigures,  # its METRICS keys, each an Interval
                {"rows": int(mask.sum()), "tasks": len(set(tasks[mask].tolist())), **scored},
            )
    return {
        "settings": settings.record(),
        "truth": {
            "rows": len(batch.records),
            "trajectories": len(batch.trajectories),
            "success_rate": float(np.mean([tr.success for tr in batch.trajectories])),
            "std_advantage": math.sqrt(spread),
            "mean_standard_error": float(np.mean(truth.standard_error)),
            # the share of the true advantages' variance that is Monte-Carlo noise: what K buys
            "noise_share": noise / spread if spread > 0 else float("nan"),
        },
        "results": results,
        "rows": {
            "traj": [str(record["traj"]) for record in batch.records],
            "t": [int(record["t"]) for record in batch.records],
            "reward": [float(record["reward"]) for record in batch.records],
            "true_advantage": truth.advantage.tolist(),
            "standard_error": truth.standard_error.tolist(),
            "value": truth.value.tolist(),
            "value_standard_error": truth.value_error.tolist(),
            **{label: values.tolist() for label, values in advantages.items()},
        },
    }


def _ceiling(noise_share: float) -> float:
    """The highest correlation any estimate can reach with a truth whose variance is that
    share noise: sqrt(1 − share) (the correlation of the noiseless truth with the noisy one)."""
    return math.sqrt(max(0.0, 1.0 - noise_share)) if not math.isnan(noise_share) else math.nan


def _figure(entry: Interval, digits: int = 2) -> str:
    value, (low, high) = entry["value"], entry["ci95"]
    if isinstance(value, float) and math.isnan(value):
        return "–"
    if math.isnan(low):  # too few tasks for an interval
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _machine_label(record: Machine | None) -> str:
    """A piece's machine in words.

    Example:
        >>> _machine_label({"cpu": "AMD EPYC", "threads": 1}), _machine_label(None)
        ('AMD EPYC, 1 torch thread', 'not recorded')
        >>> _machine_label({"cpu": "Intel Xeon", "threads": 8, "gpu": "NVIDIA H200"})
        'NVIDIA H200 (host Intel Xeon)'
    """
    if record is None:
        return "not recorded"
    if record.get("gpu"):
        return f"{record['gpu']} (host {record['cpu']})"
    threads = record.get("threads")
    if threads is None:
        return str(record["cpu"])
    return f"{record['cpu']}, {threads} torch thread{'s' if threads != 1 else ''}"


def markdown(payload: FidelityReport) -> str:
    """The tables of a run: one per breakdown, estimators as rows."""
    settings, truth = payload["settings"], payload["truth"]
    lines = [
        f"# Advantage fidelity on {settings['env']} ({settings['split']}), agent "
        f"`{settings['agent']}`",
        "",
        f"{settings['tasks']} tasks x {settings['group_size']} trajectories, seed "
        f"{settings['seed']}, γ = {settings['gamma']}; truth by K = {settings['continuations']} "
        f"continuations per visited prefix. {truth['rows']} rows, success rate "
        f"{truth['success_rate']:.2f}; std of the true advantage {truth['std_advantage']:.4f}, "
        f"mean standard error {truth['mean_standard_error']:.4f} (Monte-Carlo noise is "
        f"{truth['noise_share']:.1%} of its variance, so no estimate can correlate above "
        f"{_ceiling(truth['noise_share']):.2f}). Cells: value [95% bootstrap interval over "
        f"tasks; none where a part holds fewer than {MIN_INTERVAL_TASKS} tasks].",
    ]
    cost = payload.get("cost")
    if cost:
        lines += [
            "",
            f"Cost: the truth took {cost['truth_env_steps']:,} env steps, "
            f"{_duration(cost['truth_seconds'])} wall and {_duration(cost['truth_cpu_seconds'])} "
            f"CPU over every invocation; this invocation {duration(cost['seconds'])} wall, "
            f"{duration(cost['cpu_seconds'])} CPU (the batch: {cost['batch_env_steps']:,} env "
            "steps).",
        ]
    if payload.get("machines"):
        played = "; ".join(
            f"{_machine_label(entry['machine'])}: {entry['continuations']:,}"
            for entry in payload["machines"]
        )
        lines += ["", f"Continuations played on: {played}."]
    purity = [
        f"{label} {result['purity']:.2f}"
        for label, result in payload["results"].items()
        if result["purity"] is not None
    ]
    if purity:
        lines += [
            "",
            "Purity of the step-level sets (share whose rows share one state_hash): "
            + ", ".join(purity)
            + ".",
        ]
    parts: list[str] = []  # every part, in first-seen order (the sets' parts are per estimator)
    for result in payload["results"].values():
        parts += [part for part in result["breakdowns"] if part not in parts]
    for part in parts:
        rows = {
            result["breakdowns"][part]["rows"]
            for result in payload["results"].values()
            if part in result["breakdowns"]
        }
        size = f"{rows.pop()} rows" if len(rows) == 1 else "rows vary by estimator"
        lines += ["", f"## {part} ({size})", ""]
        lines.append("| estimator | " + " | ".join(METRICS) + " |")
        lines.append("|---" * (len(METRICS) + 1) + "|")
        for label, result in payload["results"].items():
            entry = result["breakdowns"].get(part)
            if entry is not None:
                cells = " | ".join(_figure(entry[name]) for name in METRICS)
                lines.append(f"| {label} | {cells} |")
    return "\n".join(lines) + "\n"


PLOTTED_PARTS = ("early (t < T/2)", "late", "succeeded", "failed")  # besides "all"


def plot(payload: FidelityReport, path: Path) -> None:
    """Per estimator, Pearson and Spearman correlation with the truth: a bar for all rows with
    its interval over tasks, and a marker for each half of the trajectories and each outcome
    (categories are in the Markdown)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(payload["results"])
    positions = np.arange(len(labels))
    figure, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True)
    markers = dict(zip(PLOTTED_PARTS, ("v", "^", "o", "x"), strict=True))
    correlations: tuple[Metric, Metric] = ("pearson", "spearman")
    for axis, name in zip(axes, correlations, strict=True):
        overall = [payload["results"][label]["breakdowns"]["all"][name] for label in labels]
        values = np.array([entry["value"] for entry in overall], dtype=float)
        bounds = np.array([entry["ci95"] for entry in overall], dtype=float)
        spread = np.nan_to_num(np.abs(bounds.T - values), nan=0.0)
        axis.bar(positions, values, 0.6, yerr=spread, capsize=3, color="#9ab", label="all")
        for part, marker in markers.items():
            parts = [payload["results"][label]["breakdowns"].get(part) for label in labels]
            points = [None if figures is None else figures[name]["value"] for figures in parts]
            shown = [(x, y) for x, y in zip(positions, points, strict=True) if y is not None]
            if shown:
                axis.scatter(*zip(*shown, strict=True), marker=marker, label=part, zorder=3)
        axis.set_title(f"{name} correlation with the Monte-Carlo A")
        axis.set_xticks(positions)
        axis.set_xticklabels(labels, rotation=30, ha="right")
        axis.axhline(0.0, color="black", linewidth=0.6)
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    settings = payload["settings"]
    figure.suptitle(
        f"{settings['env']}, agent {settings['agent']} (bars: all rows, 95% interval over tasks)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_outputs(payload: FidelityReport, out: Path, console: Console) -> None:
    """Print the overall table; write the Markdown, the per-row CSV, the JSON and the plot (the
    settings without this machine's paths: a reader elsewhere could not use them)."""
    payload = {**payload, "settings": portable_values(payload["settings"])}
    table = Table(
        title=f"Advantage fidelity on {payload['settings']['env']} against the Monte-Carlo truth",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("estimator", no_wrap=True)
    for name in METRICS:
        table.add_column(name, justify="right")
    table.add_column("purity", justify="right")
    for label, result in payload["results"].items():
        purity = "–" if result["purity"] is None else f"{result['purity']:.2f}"
        cells = (_figure(result["breakdowns"]["all"][name]) for name in METRICS)
        table.add_row(label, *cells, purity)
    console.print(table)
    truth, cost = payload["truth"], payload["cost"]
    console.print(
        f"{truth['rows']} rows; Monte-Carlo noise {truth['noise_share']:.1%} of the true "
        f"advantages' variance (correlation ceiling {_ceiling(truth['noise_share']):.2f}); "
        f"the truth took {cost['truth_env_steps']:,} env steps and "
        f"{_duration(cost['truth_cpu_seconds'])} of CPU; this run {duration(cost['seconds'])} "
        f"({duration(cost['cpu_seconds'])} of CPU)."
    )
    atomic_write_text(out / "fidelity.md", markdown(payload))
    rows = pd.DataFrame(payload["rows"])
    atomic_write_text(out / "fidelity.csv", rows.to_csv(index=False))
    summary = {key: value for key, value in payload.items() if key != "rows"}
    atomic_write_text(out / "fidelity.json", json.dumps(summary, indent=1, allow_nan=True))
    plot(payload, out / "fidelity.png")
    console.print(f"wrote {out / 'fidelity.md'}, fidelity.csv, fidelity.json, fidelity.png")
