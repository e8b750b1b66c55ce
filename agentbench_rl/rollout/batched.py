"""Batched group rollouts: N groups of G members step in lockstep, one batched forward per step.

Every live member of every group is one row of the step's batch: the policy answers all of them
at once (:meth:`agentbench_rl.train.policy.Policy.act`), then the env pool steps them. Rows come
out in the record format of :func:`agentbench_rl.rollout.group.rollout_group` (group, traj, t,
reward, obs_key, state_key, action_key, valid, success), plus the token data PPO needs and, when
asked, the hidden states BiPACE needs, taken from the same forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from agentbench_rl.agents.prompting import HistoryStep, PromptConfig, build_prompt, observation_text
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.rollout.workers import EnvPool

if TYPE_CHECKING:
    import torch


class BatchPolicy(Protocol):
    """What the driver needs of a policy (see ``agentbench_rl.train.policy.Policy``)."""

    def act(
        self,
        prompts: Sequence[str],
        admissible: Sequence[Sequence[str]],
        generator: torch.Generator,
        capture_hidden: bool = False,
        greedy: bool = False,
    ) -> Any:
        """Answer every prompt (an ``ActOutput``)."""


@dataclass
class RolloutBatch:
    """Every step of one iteration's rollouts.

    ``records[i]`` is the estimator row of step i; ``prompt_ids[i]``, ``response_ids[i]`` and
    ``logprobs[i]`` its tokens; ``hidden[i]`` its hidden state (when captured). ``episodes`` has
    one entry per trajectory (group, traj, task_id, success, score, steps, return, invalid).
    In ``choose`` mode ``choices[i]`` holds the tokens of every admissible continuation,
    ``chosen[i]`` the drawn one's index and ``logprobs[i]`` its one log-prob among them.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    logprobs: list[np.ndarray] = field(default_factory=list)
    hidden_rows: list[np.ndarray] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    choices: list[list[list[int]]] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def hidden(self) -> np.ndarray | None:
        """(n, d) hidden states, or ``None`` when they were not captured."""
        return np.stack(self.hidden_rows) if self.hidden_rows else None

    def step_batch(self, rewards: np.ndarray | None = None, with_hidden: bool = False) -> StepBatch:
        """The rows as a ``StepBatch`` (``rewards`` replaces the env rewards when given)."""
        columns: dict[str, Any] = {
            name: [record[name] for record in self.records]
            for name in (
                "group",
                "traj",
                "t",
                "reward",
                "obs_key",
                "state_key",
                "action_key",
                "valid",
                "success",
            )
        }
        if rewards is not None:
            columns["reward"] = rewards
        if with_hidden:
            columns["hidden"] = self.hidden
        object_columns = ("group", "traj", "obs_key", "state_key", "action_key")
        for name in object_columns:
            array = np.empty(len(self.records), dtype=object)
            array[:] = columns[name]
            columns[name] = array
        return StepBatch(**columns)


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

    The pool must hold ``len(tasks) * group_size`` envs. Env resets are seeded from
    ``(seed, task_id)`` as in :func:`~agentbench_rl.rollout.group.rollout_group`; the policy's
    draws come from ``generator``. In ``generate`` mode a row is valid only when the answer kept
    the format and the env accepted the action (the papers' rule); in ``choose`` mode, when the
    env accepted it.
    """
    n = len(tasks) * group_size
    if pool.size != n:
        raise ValueError(f"rollout: the pool has {pool.size} envs, {n} are needed")
    jobs = [(task, seed_from(seed, task) % 2**31) for task in tasks for _ in range(group_size)]
    started = pool.reset(jobs)
    observations = [obs for obs, _ in started]
    infos = [info for _, info in started]
    histories: list[list[HistoryStep]] = [[] for _ in range(n)]
    totals = [0.0] * n
    invalid = [0] * n
    live = list(range(n))
    result = RolloutBatch()
    rows_of: list[list[int]] = [[] for _ in range(n)]
    t = 0
    while live:
        prompts = [
            build_prompt(
                env_name,
                observations[i],
                histories[i],
                infos[i]["admissible_actions"],
                prompt,
            )
            for i in live
        ]
        admissible = [list(infos[i]["admissible_actions"]) for i in live]
        out = policy.act(prompts, admissible, generator, capture_hidden=capture_hidden)
        steps = pool.step(live, out.responses)
        still_live = []
        for k, i in enumerate(live):
            observation, reward, terminated, truncated, info = steps[k]
            valid = bool(info["action_valid"]) and bool(out.format_ok[k])
            rows_of[i].append(len(result.records))
            result.records.append(
                {
                    "group": i // group_size,
                    "traj": i,
                    "t": t,
                    "reward": float(reward),
                    "obs_key": infos[i]["obs_hash"],
                    "state_key": infos[i]["state_hash"],
                    "action_key": info["action_canonical"],
                    "valid": valid,
                }
            )
            result.prompt_ids.append(out.prompt_ids[k])
            result.response_ids.append(out.response_ids[k])
            result.logprobs.append(out.logprobs[k])
            if out.hidden is not None:
                result.hidden_rows.append(out.hidden[k])
            if out.choices is not None and out.chosen is not None:
                result.choices.append(out.choices[k])
                result.chosen.append(out.chosen[k])
            histories[i].append(
                HistoryStep(observation_text(observations[i]), info["action_canonical"])
            )
            totals[i] += float(reward)
            invalid[i] += not valid
            observations[i], infos[i] = observation, info
            if terminated or truncated:
                result.episodes.append(
                    {
                        "group": i // group_size,
                        "traj": i,
                        "task_id": tasks[i // group_size],
                        "success": bool(info["won"]),
                        "score": float(info["score"]),
                        "steps": t + 1,
                        "return": totals[i],
                        "invalid": invalid[i],
                    }
                )
            else:
                still_live.append(i)
        live = still_live
        t += 1
    success = {episode["traj"]: episode["success"] for episode in result.episodes}
    for record in result.records:
        record["success"] = success[record["traj"]]
    result.episodes.sort(key=lambda episode: episode["traj"])
    return result


def success_rewards(batch: RolloutBatch, success_reward: float) -> np.ndarray:
    """Sparse training rewards: ``success_reward`` on the last step of a won trajectory, 0
    elsewhere (the papers' ``10 * won``).

    Example:
        >>> rollout = RolloutBatch(records=[
        ...     {"traj": 0, "t": 0, "success": True}, {"traj": 0, "t": 1, "success": True},
        ...     {"traj": 1, "t": 0, "success": False}],
        ...     episodes=[{"traj": 0, "steps": 2}, {"traj": 1, "steps": 1}])
        >>> success_rewards(rollout, 10.0).tolist()
        [0.0, 10.0, 0.0]
    """
    steps = {episode["traj"]: episode["steps"] for episode in batch.episodes}
    return np.array(
        [
            success_reward
            if record["success"] and record["t"] == steps[record["traj"]] - 1
            else 0.0
            for record in batch.records
        ]
    )
