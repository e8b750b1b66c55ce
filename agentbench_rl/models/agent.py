"""A policy playing as a harness agent: one prompt per step, answered by the model.

:class:`PolicyAgent` wraps a :class:`~agentbench_rl.models.policy.Policy` already in memory (the
trainer's validation hands its policy to the harness this way); ``agents/hf.py`` builds one from
an ``hf:`` spec, loading the weights on first use. The episode driver passes the history, so the
prompts are those training builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbench_rl.agents.prompting import HistoryStep, build_prompt
from agentbench_rl.envs.base import TextAgentEnv


class PolicyAgent:
    """A causal-LM policy as an agent.

    Every step is one forward (``choose``) or one ``generate`` call; draws come from a generator
    seeded with the episode seed, so an episode depends only on (model, task, seed).
    """

    #: The episode driver passes the history (see ``agents.base.Agent``).
    reads_history = True

    def __init__(self, name: str, policy: Any = None, greedy: bool = False) -> None:
        self.name = name
        self._policy: Any = policy
        self._greedy = greedy
        self._env_name = ""
        self._generator: Any = None

    def _load(self) -> Any:
        """The policy, for an agent made without one (``HFAgent`` loads it from disk)."""
        raise RuntimeError(f"agent '{self.name}' has no policy")

    @property
    def policy(self) -> Any:
        """The policy (loaded on first use when the agent was made without one)."""
        if self._policy is None:
            self._policy = self._load()
        return self._policy

    @property
    def answer_format(self) -> str:
        """The policy's action mode: ``generate`` answers must keep the papers' format."""
        return str(self.policy.prompt.mode)

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Reseed the draws from the episode seed."""
        import torch

        self._env_name = env.env_name
        self._generator = torch.Generator().manual_seed(seed)

    def act(
        self, observation: Any, info: dict[str, Any], history: Sequence[HistoryStep] = ()
    ) -> str:
        """The model's answer to this step's prompt (``history``: the driver's past steps)."""
        if self._generator is None:
            raise RuntimeError(f"agent '{self.name}': act called before begin_episode")
        policy = self.policy
        actions = list(info["admissible_actions"])
        prompt = build_prompt(self._env_name, observation, history, actions, policy.prompt)
        out = policy.act([prompt], [actions], self._generator, greedy=self._greedy)
        return str(out.responses[0])
