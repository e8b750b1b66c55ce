"""Agents that need no model: ``random``, ``expert`` and a user's own callable."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agentbench_rl.envs.base import TextAgentEnv


class RandomAgent:
    """Uniform over the admissible actions, seeded per episode.

    Example:
        >>> agent = RandomAgent()
        >>> agent.begin_episode(None, seed=3)  # type: ignore[arg-type]
        >>> agent.act("", {"admissible_actions": ["up", "down"]}) in ("up", "down")
        True
    """

    name = "random"

    def __init__(self) -> None:
        self._rng = random.Random(0)

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Reseed from the episode seed, so an episode never depends on the ones before it."""
        self._rng = random.Random(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        """A uniformly drawn admissible action (``""`` if there is none)."""
        actions = info.get("admissible_actions") or [""]
        return str(self._rng.choice(actions))


class ExpertAgent:
    """The env's own expert: solver, planner or walkthrough (``env.expert_action()``)."""

    name = "expert"

    def __init__(self) -> None:
        self._env: TextAgentEnv[Any] | None = None

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Bind to the env whose expert will act."""
        self._env = env

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        """The expert's next action."""
        if self._env is None:
            raise RuntimeError("ExpertAgent.act called before begin_episode")
        return self._env.expert_action()


class CallableAgent:
    """A user's function ``(observation, info) -> action text`` as an agent.

    ``on_episode(env, seed)``, when given, is called at every episode start.

    Example:
        >>> agent = CallableAgent(lambda obs, info: "up", name="always-up")
        >>> agent.act("", {})
        'up'
    """

    def __init__(
        self,
        policy: Callable[[Any, dict[str, Any]], Any],
        name: str,
        on_episode: Callable[[TextAgentEnv[Any], int], Any] | None = None,
    ) -> None:
        if not callable(policy):
            raise ValueError(f"agent '{name}' is not callable")
        self.policy = policy
        self.on_episode = on_episode
        self.name = name

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Forward to the user's hook, if any."""
        if self.on_episode is not None:
            self.on_episode(env, seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """Whatever the user's callable returned: the episode driver counts anything that is
        not a string as an invalid action (it is never silently turned into text)."""
        return self.policy(observation, info)
