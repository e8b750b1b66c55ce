"""Agents that need no model: ``random``, ``expert`` and a user's own callable."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agentbench_rl.agents.base import Agent, Capabilities
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.prompting import HistoryStep


class RandomAgent:
    """Uniform over the choices a user has now (``env.user_choices()``), seeded per episode.

    Those are the admissible actions, except where an env lists a placeholder: on WebShop's
    search page the one choice is searching the goal instruction, elsewhere every clickable is
    equally likely. Without such an env (``begin_episode(None, ...)``, or an env of another
    library) it draws from ``info["admissible_actions"]``.

    Example:
        >>> agent = RandomAgent()
        >>> agent.begin_episode(None, seed=3)  # type: ignore[arg-type]
        >>> agent.act("", {"admissible_actions": ["up", "down"]}) in ("up", "down")
        True
    """

    name = "random"

    def __init__(self) -> None:
        self._rng = random.Random(0)
        self._env: TextAgentEnv[Any] | None = None

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Reseed from the episode seed, so an episode never depends on the ones before it."""
        self._rng = random.Random(seed)
        self._env = getattr(env, "unwrapped", env)

    def act(self, observation: Any, info: StepInfo) -> str:
        """A uniformly drawn choice (``""`` if there is none)."""
        return uniform_choice(self._env, info, self._rng)


def uniform_choice(env: TextAgentEnv[Any] | None, info: StepInfo, rng: random.Random) -> str:
    """A uniform draw from the choices a user has now: ``env.user_choices()`` where the env has
    them, else ``info["admissible_actions"]`` (``""`` if there is none)."""
    user_choices = getattr(env, "user_choices", None)  # None: no env, or not ours
    actions = user_choices() if user_choices else info["admissible_actions"]
    return str(rng.choice(actions or [""]))


class ExpertAgent:
    """The env's own expert: solver, planner or walkthrough (``env.expert_action()``)."""

    name = "expert"

    def __init__(self) -> None:
        self._env: TextAgentEnv[Any] | None = None

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Bind to the env whose expert will act."""
        self._env = env

    def act(self, observation: Any, info: StepInfo) -> str:
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
        policy: Callable[[Any, StepInfo], Any],
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

    def act(self, observation: Any, info: StepInfo) -> Any:
        """Whatever the user's callable returned: the episode driver counts anything that is
        not a string as an invalid action (it is never silently turned into text)."""
        return self.policy(observation, info)


class NoisyAgent:
    """Another agent with ε-noise: each step, with probability ``epsilon`` a uniform choice (as
    :class:`RandomAgent` draws it), else the inner agent's answer. ``noisy:0.2:expert`` is the
    expert that slips one step in five: a policy neither trivial nor perfect, for the fidelity
    bench. The noise has its own generator, seeded from the episode seed.

    Example:
        >>> agent = NoisyAgent(CallableAgent(lambda obs, info: "up", name="up"), 1.0)
        >>> agent.begin_episode(None, seed=0)  # type: ignore[arg-type]
        >>> agent.act("", {"admissible_actions": ["down"]}), agent.name
        ('down', 'noisy:1:up')
    """

    def __init__(self, inner: Agent, epsilon: float) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"agent 'noisy:{epsilon}:...': the noise must be in [0, 1]")
        self.inner = inner
        self.epsilon = epsilon
        self.name = f"noisy:{epsilon:g}:{inner.name}"
        capabilities = Capabilities.of(inner)
        self.reads_history = capabilities.reads_history
        self.answer_format = capabilities.answer_format
        self._rng = random.Random(0)
        self._env: TextAgentEnv[Any] | None = None

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Reseed the noise and begin the inner agent's episode."""
        self._rng = random.Random(seed_from(seed, "noise"))
        self._env = getattr(env, "unwrapped", env)
        self.inner.begin_episode(env, seed)

    def act(
        self, observation: Any, info: StepInfo, history: list[HistoryStep] | None = None
    ) -> Any:
        """A uniform choice with probability ε, else the inner agent's action."""
        if self._rng.random() < self.epsilon:
            return uniform_choice(self._env, info, self._rng)
        if self.reads_history:
            return self.inner.act(observation, info, history)  # type: ignore[call-arg]
        return self.inner.act(observation, info)
