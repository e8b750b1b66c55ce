"""The agent protocol: what the harness and the rollouts call."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agentbench_rl.envs.base import TextAgentEnv


@runtime_checkable
class Agent(Protocol):
    """A policy from (observation, info) to the raw action text an LLM would write.

    ``begin_episode`` is called after every ``env.reset``, with the episode's seed, so an agent
    can reseed its randomness and, if it plays the env's expert, look at the env.

    Two optional attributes tell the episode driver (:mod:`agentbench_rl.rollout.episode`) more:
    ``reads_history = True`` makes it call ``act(observation, info, history)`` with the episode's
    past steps (the driver keeps the history, so every prompt-building agent sees the same one);
    ``answer_format = "generate"`` makes a step valid only when the answer keeps the
    ``<think>..</think><action>..</action>`` format (the rule training uses).
    """

    name: str

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Prepare for a new episode of ``env`` (already reset)."""

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        """The raw action text for this step."""
