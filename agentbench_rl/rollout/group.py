"""Group rollouts: G members play the same task, and their steps become a ``StepBatch``.

``GroupEnv`` is the group as a PettingZoo ``ParallelEnv`` (agents = group members), so anything
that speaks PettingZoo can drive it; :func:`rollout_group` plays its members with agents through
the episode driver (:mod:`agentbench_rl.rollout.episode`) and returns the rows the estimators
take, plus the group's ``StepGraph``.

Nothing of the package's own runs on it (the trainer plays many groups at once with
:func:`~agentbench_rl.rollout.batched.rollout_groups`): it is the public door for a user's own
loop or a multi-agent library (docs/estimators-in-use.md), which is why ``pettingzoo`` stays a
core dependency rather than a test-only one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gymnasium import spaces
from pettingzoo import ParallelEnv

from agentbench_rl.agents.base import Agent
from agentbench_rl.core.batch import StepBatch, StepColumns, StepRecord
from agentbench_rl.core.graph import StepGraph
from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.rollout.episode import EpisodeSlot, episode_seed, member_seed, play


class GroupEnv(ParallelEnv[str, Any, str]):
    """G copies of one env, all reset to the same task: a group of GRPO-style comparisons.

    Members that finish leave ``agents`` (the PettingZoo convention); the episode ends when all
    have finished.

    Example:
        >>> group = GroupEnv(EnvSpec(name="sokoban", split="test"), group_size=2)
        >>> observations, infos = group.reset(seed=0, options={"task_id": "test-0003"})
        >>> observations["member_0"] == observations["member_1"]
        True
    """

    metadata: dict[str, Any] = {"name": "agentbench_group_v0", "render_modes": []}  # noqa: RUF012

    def __init__(self, env: EnvSpec, group_size: int = 8) -> None:
        if group_size < 1:
            raise ValueError(f"GroupEnv: group_size must be >= 1, got {group_size}")
        self.members: dict[str, TextAgentEnv[Any]] = {
            f"member_{index}": env.make() for index in range(group_size)
        }
        self.possible_agents = list(self.members)
        self.agents: list[str] = []
        self.task_id: str | None = None

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The member env's observation space."""
        return self.members[agent].observation_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """Raw action text."""
        return self.members[agent].action_space

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, StepInfo]]:
        """Reset every member to one task: ``options["task_id"]``, or one drawn from ``seed``
        (other options, such as PettingZoo's API test passes, are not the members' to see)."""
        options = {"task_id": (options or {}).get("task_id")}
        first = self.members[self.possible_agents[0]]
        observations, infos = {}, {}
        observation, info = first.reset(seed=seed, options=options)
        options["task_id"] = info["task_id"]  # the others get the same task by id
        observations[self.possible_agents[0]], infos[self.possible_agents[0]] = observation, info
        for agent in self.possible_agents[1:]:
            observations[agent], infos[agent] = self.members[agent].reset(
                seed=seed, options=options
            )
        self.task_id = info["task_id"]
        self.agents = list(self.possible_agents)
        return observations, infos

    def step(
        self, actions: dict[str, str]
    ) -> tuple[
        dict[str, Any],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, StepInfo],
    ]:
        """Step every live member with its action; finished members leave ``agents``."""
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(f"GroupEnv.step: no action for {', '.join(missing)}")
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            observation, reward, terminated, truncated, info = self.members[agent].step(
                actions[agent]
            )
            observations[agent], rewards[agent] = observation, reward
            terminations[agent], truncations[agent], infos[agent] = terminated, truncated, info
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def close(self) -> None:
        """Close every member env."""
        for member in self.members.values():
            member.close()


@dataclass
class GroupRollout:
    """The steps of one group: estimator rows (as the episode driver wrote them) and
    per-trajectory outcomes."""

    group: Any
    task_id: str
    rows: StepColumns = field(default_factory=StepColumns)
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def records(self) -> list[StepRecord]:
        """The estimator rows as dicts (new ones on each call)."""
        return self.rows.records()

    def batch(self) -> StepBatch:
        """The group's rows as a ``StepBatch``."""
        return self.rows.batch()

    def graph(self, gamma: float = 1.0) -> StepGraph:
        """The group's step graph."""
        return StepGraph.from_batch(self.batch(), gamma=gamma)[self.group]


def rollout_group(
    group_env: GroupEnv,
    agents: Agent | Sequence[Agent],
    task_id: str,
    seed: int,
    group: Any | None = None,
) -> GroupRollout:
    """Play one group on ``task_id`` through the episode driver: every member's env resets with
    the episode seed of ``(seed, task_id)``, member i's agent is seeded from ``(seed, task_id,
    i)``; trajectory ids are ``"<group>/member_<i>"``.

    ``agents`` is one agent per member, or one agent that every member gets a shallow copy of
    (weights shared, per-episode state such as the random stream not).

    Example:
        >>> from agentbench_rl.agents.simple import RandomAgent
        >>> env = GroupEnv(EnvSpec(name="sokoban", split="test"), group_size=4)
        >>> rollout = rollout_group(env, RandomAgent(), "test-0000", seed=0)
        >>> len({row["traj"] for row in rollout.records})
        4
    """
    members = group_env.possible_agents
    if isinstance(agents, Sequence):
        if len(agents) != len(members):
            raise ValueError(f"rollout_group: {len(agents)} agents for {len(members)} members")
        playing = list(agents)
    else:
        playing = [copy.copy(agents) for _ in members]
    group = task_id if group is None else group
    slots = [
        EpisodeSlot(task_id, episode_seed(seed, task_id), group, f"{group}/{member}")
        for member in members
    ]
    lock = play(
        [group_env.members[member] for member in members],
        slots,
        playing,
        [member_seed(seed, task_id, index) for index in range(len(members))],
    )
    result = GroupRollout(group=group, task_id=task_id, rows=lock.rows)
    for slot, episode in zip(slots, lock.episodes, strict=True):
        outcome = episode.outcome()
        result.outcomes[slot.traj] = {
            "success": outcome.success,
            "score": outcome.score,
            "steps": outcome.steps,
        }
    return result
