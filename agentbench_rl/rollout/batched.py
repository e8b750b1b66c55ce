"""Batched group rollouts: N groups of G members step in lockstep, one batched forward per step.

Every live member of every group is one row of the step's batch: the policy answers all of them
at once (:meth:`agentbench_rl.models.policy.Policy.act`), then the episode driver
(:mod:`agentbench_rl.rollout.episode`) steps the env pool. Rows come out in the driver's record
format (group, traj, t, reward, obs_key, state_key, action_key, valid, success), plus the token
data PPO needs and, when asked, the hidden states an estimator that needs them takes, from the
same forward.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from agentbench_rl.core.batch import StepBatch, StepColumns, StepRecord
from agentbench_rl.prompting import PromptConfig, action_choices, build_prompt
from agentbench_rl.rollout.episode import EpisodeOutcome, EpisodeSlot, Lockstep, episode_seed
from agentbench_rl.rollout.workers import EnvPool

if TYPE_CHECKING:
    import torch


class BatchPolicy(Protocol):
    """What the driver needs of a policy (see ``agentbench_rl.models.policy.Policy``)."""

    def act(
        self,
        prompts: Sequence[str],
        admissible: Sequence[Sequence[str]],
        generator: torch.Generator,
        capture_hidden: bool = False,
        greedy: bool = False,
    ) -> Any:
        """Answer every prompt (an ``ActOutput``)."""


@dataclass(frozen=True)
class RolloutEpisode:
    """One trajectory of a rollout batch: its group, its index (the rows' ``traj``) and its
    outcome as the episode driver typed it where the episode ended."""

    group: int
    traj: int
    outcome: EpisodeOutcome


@dataclass
class RolloutBatch:
    """Every step of one iteration's rollouts.

    ``rows`` holds the estimator row of every step, as the episode driver wrote it (columns;
    ``records[i]`` reads row i back as a dict); ``prompt_ids[i]``, ``response_ids[i]`` and
    ``logprobs[i]`` its tokens; ``hidden[i]`` its hidden state (when captured). ``episodes`` has
    one :class:`RolloutEpisode` per trajectory (its group, its index, its typed outcome).
    In ``choose`` mode ``choices[i]`` holds the tokens of every admissible continuation,
    ``chosen[i]`` the drawn one's index and ``logprobs[i]`` its one log-prob among them.
    """

    rows: StepColumns = field(default_factory=StepColumns)
    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    logprobs: list[np.ndarray] = field(default_factory=list)
    hidden_rows: list[np.ndarray] = field(default_factory=list)
    episodes: list[RolloutEpisode] = field(default_factory=list)
    choices: list[list[list[int]]] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def records(self) -> list[StepRecord]:
        """The estimator rows as dicts (new ones on each call)."""
        return self.rows.records()

    @property
    def hidden(self) -> np.ndarray | None:
        """(n, d) hidden states, or ``None`` when they were not captured."""
        return np.stack(self.hidden_rows) if self.hidden_rows else None

    def step_batch(self, rewards: np.ndarray | None = None, with_hidden: bool = False) -> StepBatch:
        """The rows as a ``StepBatch`` (``rewards`` replaces the env rewards when given)."""
        replaced: dict[str, Any] = {}
        if rewards is not None:
            replaced["reward"] = rewards
        if with_hidden:
            replaced["hidden"] = self.hidden
        return self.rows.batch(**replaced)


def rollout_groups(
    pool: EnvPool,
    policy: BatchPolicy,
    env_name: str,
    prompt: PromptConfig,
    tasks: Sequence[str],
    group_size: int,
    seed: int,
    generator: torch.Generator,
    capture_hidden: bool = False,
) -> RolloutBatch:
    """Play ``len(tasks)`` groups of ``group_size`` members; group g plays ``tasks[g]``.

    The pool must hold ``len(tasks) * group_size`` envs; the episode driver
    (:class:`~agentbench_rl.rollout.episode.Lockstep`) seeds the resets, keeps the histories and
    applies the validity rule (``generate`` mode: the answer must keep the format), and the
    policy's draws come from ``generator``. Rows use integer ids: group g, trajectory
    ``g * group_size + member``.
    """
    n = len(tasks) * group_size
    if pool.size != n:
        raise ValueError(f"rollout: the pool has {pool.size} envs, {n} are needed")
    slots = [
        EpisodeSlot(task, episode_seed(seed, task), group, group * group_size + member)
        for group, task in enumerate(tasks)
        for member in range(group_size)
    ]
    lock = Lockstep(pool, slots)
    result = RolloutBatch()
    while lock.live:
        episodes = [lock.episodes[i] for i in lock.live]
        admissible = [action_choices(e.info, prompt.mode) for e in episodes]
        prompts = [
            build_prompt(env_name, e.observation, e.history, choices, prompt)
            for e, choices in zip(episodes, admissible, strict=True)
        ]
        out = policy.act(prompts, admissible, generator, capture_hidden=capture_hidden)
        lock.step(out.responses, [bool(kept) for kept in out.format_ok])
        result.prompt_ids.extend(out.prompt_ids)
        result.response_ids.extend(out.response_ids)
        result.logprobs.extend(out.logprobs)
        if out.choices is not None and out.chosen is not None:
            result.choices.extend(out.choices)
            result.chosen.extend(out.chosen)
        if out.hidden is not None:
            result.hidden_rows.extend(out.hidden[k] for k in range(len(episodes)))
    result.rows = lock.rows
    for index in range(n):
        outcome = lock.episodes[index].outcome()
        result.episodes.append(RolloutEpisode(index // group_size, index, outcome))
    return result


#: The rewards a run can train on: ``success`` (``success_reward`` at the last step of a won
#: trajectory, the papers' ``10 * won``) or ``env`` (the env's own reward at every step).
Reward = Literal["success", "env"]
REWARDS: tuple[str, ...] = typing.get_args(Reward)


def training_reward(record: Mapping[str, Any], reward: str, success_reward: float) -> float:
    """The reward one step trains on: the one rule, which the home trainer and verl's agent
    loop both apply. ``record`` holds the step's ``t``, its trajectory's ``steps`` and
    ``success``, and the env's ``reward``.

    Example:
        >>> last = {"t": 2, "steps": 3, "success": True, "reward": 0.5}
        >>> training_reward(last, "success", 10.0), training_reward(last, "env", 10.0)
        (10.0, 0.5)
    """
    if reward == "env":
        return float(record["reward"])
    if reward != "success":
        raise ValueError(f"reward '{reward}' (choose from {', '.join(REWARDS)})")
    last = int(record["t"]) == int(record["steps"]) - 1
    return float(success_reward) if record["success"] and last else 0.0


def training_rewards(
    batch: RolloutBatch, reward: Reward, success_reward: float
) -> np.ndarray | None:
    """The rows' training rewards as a run of ``reward`` declares them: ``success`` pays
    :func:`success_rewards`; ``env`` gives ``None``, the env's own rewards that the rows hold
    (what :meth:`RolloutBatch.step_batch` keeps). Every trainer and bench reads rewards here."""
    return success_rewards(batch, success_reward) if reward == "success" else None


def success_rewards(batch: RolloutBatch, success_reward: float) -> np.ndarray:
    """:func:`training_reward` with ``reward="success"`` for every row of a rollout batch.

    Example:
        >>> rows = StepColumns.of([{"group": 0, "traj": traj, "t": t, "reward": 0.0,
        ...     "obs_key": "o", "state_key": "s", "action_key": "a", "valid": True,
        ...     "success": traj == 0} for traj, t in ((0, 0), (0, 1), (1, 0))])
        >>> def ended(traj, steps):
        ...     outcome = EpisodeOutcome("t", "c", traj == 0, 0.0, steps, 0.0, 0, 0)
        ...     return RolloutEpisode(0, traj, outcome)
        >>> rollout = RolloutBatch(rows, episodes=[ended(0, 2), ended(1, 1)])
        >>> success_rewards(rollout, 10.0).tolist()
        [0.0, 10.0, 0.0]
    """
    steps = {episode.traj: episode.outcome.steps for episode in batch.episodes}
    traj, t, success = (batch.rows.column(name).tolist() for name in ("traj", "t", "success"))
    return np.array(
        [
            training_reward(
                {"t": t, "steps": steps[traj], "success": success, "reward": 0.0},
                "success",
                success_reward,
            )
            for traj, t, success in zip(traj, t, success, strict=True)
        ]
    )
