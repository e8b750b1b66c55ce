"""Env workers: a pool of envs that the batched rollout steps in lockstep.

:class:`LocalEnvPool` keeps every env in this process (the default). The Ray pool in
:mod:`agentbench_rl.rollout.ray_workers` has the same methods and spreads the envs over actors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agentbench_rl.envs.base import StepInfo, StepResult, TextAgentEnv
from agentbench_rl.envs.remote import step_all
from agentbench_rl.envs.spec import EnvSpec


class EnvPool(Protocol):
    """``size`` envs of one kind, addressed by index."""

    size: int

    def reset(self, jobs: Sequence[tuple[str, int]]) -> list[tuple[Any, StepInfo]]:
        """Reset env i to task ``jobs[i][0]`` with seed ``jobs[i][1]`` (one job per env)."""

    def step(self, indices: Sequence[int], actions: Sequence[str]) -> list[StepResult]:
        """Step env ``indices[k]`` with ``actions[k]``."""

    def close(self) -> None:
        """Release the envs."""


class LocalEnvPool:
    """``size`` envs of one declaration, in this process.

    Example:
        >>> from agentbench_rl.envs.spec import EnvSpec
        >>> pool = LocalEnvPool(EnvSpec(name="sokoban", split="test"), 2)
        >>> [info["task_id"] for _, info in pool.reset([("test-0000", 0), ("test-0001", 0)])]
        ['test-0000', 'test-0001']
    """

    def __init__(self, env: EnvSpec, size: int) -> None:
        if size < 1:
            raise ValueError(f"env pool size must be >= 1, got {size}")
        self.size = size
        self.envs: list[TextAgentEnv[Any]] = [env.make() for _ in range(size)]

    @classmethod
    def of(cls, envs: Sequence[TextAgentEnv[Any]]) -> LocalEnvPool:
        """A pool over envs that already exist (a harness worker's env, a group's members).

        Example:
            >>> from agentbench_rl.envs import make
            >>> LocalEnvPool.of([make("sokoban", split="test")]).size
            1
        """
        if not envs:
            raise ValueError("env pool size must be >= 1, got 0")
        pool = cls.__new__(cls)
        pool.size = len(envs)
        pool.envs = list(envs)
        return pool

    def reset(self, jobs: Sequence[tuple[str, int]]) -> list[tuple[Any, StepInfo]]:
        """Reset env i to ``jobs[i]`` = (task id, seed)."""
        if len(jobs) != self.size:
            raise ValueError(f"reset: {len(jobs)} jobs for {self.size} envs")
        return [
            env.reset(seed=seed, options={"task_id": task})
            for env, (task, seed) in zip(self.envs, jobs, strict=True)
        ]

    def step(self, indices: Sequence[int], actions: Sequence[str]) -> list[StepResult]:
        """Step the envs at ``indices`` (served envs' requests all in flight at once)."""
        if len(indices) != len(actions):
            raise ValueError(f"step: {len(actions)} actions for {len(indices)} envs")
        return step_all([self.envs[i] for i in indices], actions)

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()
