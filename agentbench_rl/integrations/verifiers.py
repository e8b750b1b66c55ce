"""Our envs in verifiers (Prime Intellect's env library, ``verifiers`` 0.4.0), through its own
OpenEnv taskset.

verifiers 0.4.0 is its ``verifiers.v1`` stack (tasksets, harnesses, envs), not the
``MultiTurnEnv`` of its earlier releases. It ships an OpenEnv taskset
(``verifiers.v1.tasksets.openenv``): its env resets an OpenEnv server once per task with the
task's reset arguments, hands the model ``{"observation", "action_schema"}`` as JSON each turn,
steps the server with the model's JSON action and scores the episode by the sum of the step
rewards. ``agentbench-rl serve-env`` is such a server, so :func:`openenv_config` is all our side
needs: the taskset's config over a split's pinned tasks, each reset with the harness's seed for
it (:func:`~agentbench_rl.rollout.episode.episode_seed`), so verifiers plays the episodes the
harness plays.

Two commands::

    agentbench-rl serve-env --env sokoban --split test      # the openenv extra
    # then, in Python, the taskset verifiers runs:
    from agentbench_rl.integrations.verifiers import openenv_config
    config = openenv_config(EnvSpec(name="sokoban", split="test"), "http://127.0.0.1:8000")

What verifiers' loop cannot see: an episode's success (it sums rewards, and the last answer,
the one that ends the episode, is not shown to the model), so its score is the env's return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.rollout.episode import episode_seed


def resets(spec: EnvSpec, seeds: Sequence[int] = (0,)) -> list[dict[str, Any]]:
    """One reset per task of ``spec`` and seed, seed-major as the harness orders its episodes:
    the keywords our OpenEnv server's reset takes (``task_id``, and the harness's seed).

    Example:
        >>> first = resets(EnvSpec(name="sokoban", split="test"))[0]
        >>> first["task_id"], first["seed"] == episode_seed(0, "test-0000")
        ('test-0000', True)
    """
    return [
        {"task_id": task, "seed": episode_seed(seed, task)}
        for seed in seeds
        for task in spec.tasks()
    ]


def openenv_config(spec: EnvSpec, base_url: str, seeds: Sequence[int] = (0,)) -> Any:
    """verifiers' ``OpenEnvConfig`` for the env ``agentbench-rl serve-env`` serves at
    ``base_url`` (``spec`` is what it serves): a task per task of the split and seed."""
    from verifiers.v1.tasksets.openenv import OpenEnvConfig

    return OpenEnvConfig(id="openenv", base_url=base_url, resets=resets(spec, seeds))
