"""Env workers as Ray actors (``--backend ray``, the ``ray`` extra).

The pool's envs are split over ``workers`` actors; each step sends every actor the actions of its
envs at once and gathers the answers, so the policy's batched forward stays in the trainer
process while env stepping runs in parallel (one machine, or a cluster through
``ray.init(address=...)``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from agentbench_rl.envs.base import StepInfo, StepResult
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.extras import install_hint
from agentbench_rl.rollout.workers import LocalEnvPool


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(f"backend 'ray' needs Ray: {install_hint('ray')}") from None
    return ray


def init_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """``ray.init`` once: a local instance (no dashboard, temp dir under the system's temp,
    ``num_cpus`` declared if given) or the cluster at ``address``; returns the ``ray`` module."""
    ray = _ray()
    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # else Ray writes ~/.ray
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["_temp_dir"] = os.path.join(tempfile.gettempdir(), "agentbench-ray")
            if num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
        ray.init(**kwargs)
    return ray


class _EnvShard:
    """The actor's body: a :class:`LocalEnvPool` of this worker's envs."""

    def __init__(self, env: EnvSpec, size: int) -> None:
        self.pool = LocalEnvPool(env, size)

    def reset(self, jobs: list[tuple[str, int]]) -> list[tuple[Any, StepInfo]]:
        return self.pool.reset(jobs)

    def step(self, indices: list[int], actions: list[str]) -> list[StepResult]:
        return self.pool.step(indices, actions)


class RayEnvPool:
    """``size`` envs spread over ``workers`` Ray actors, with :class:`LocalEnvPool`'s methods."""

    def __init__(
        self, env: EnvSpec, size: int, workers: int = 2, address: str | None = None
    ) -> None:
        if size < 1 or workers < 1:
            raise ValueError(f"ray env pool: size and workers must be >= 1 ({size}, {workers})")
        ray = init_ray(address)
        self._ray = ray
        self.size = size
        workers = min(workers, size)
        # env i lives on actor i % workers at slot i // workers
        self._shards = [len(range(w, size, workers)) for w in range(workers)]
        actor = ray.remote(num_cpus=0)(_EnvShard)
        self._actors = [actor.remote(env, n) for n in self._shards]
        self._workers = workers

    def reset(self, jobs: Sequence[tuple[str, int]]) -> list[tuple[Any, StepInfo]]:
        """Reset env i to ``jobs[i]`` = (task id, seed)."""
        if len(jobs) != self.size:
            raise ValueError(f"reset: {len(jobs)} jobs for {self.size} envs")
        futures = [
            actor.reset.remote(list(jobs[w :: self._workers]))
            for w, actor in enumerate(self._actors)
        ]
        answers = self._ray.get(futures)
        return [answers[i % self._workers][i // self._workers] for i in range(self.size)]

    def step(self, indices: Sequence[int], actions: Sequence[str]) -> list[StepResult]:
        """Step the envs at ``indices``, every actor's share in one call."""
        local: list[list[int]] = [[] for _ in self._actors]
        texts: list[list[str]] = [[] for _ in self._actors]
        for i, action in zip(indices, actions, strict=True):
            local[i % self._workers].append(i // self._workers)
            texts[i % self._workers].append(action)
        futures = {
            w: self._actors[w].step.remote(local[w], texts[w])
            for w in range(self._workers)
            if local[w]
        }
        answers = {w: iter(self._ray.get(future)) for w, future in futures.items()}
        return [next(answers[i % self._workers]) for i in indices]

    def close(self) -> None:
        """Stop the actors."""
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []
