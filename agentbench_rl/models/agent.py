"""A policy playing as a harness agent: one prompt per episode and step, answered in batches.

:class:`PolicyAgent` wraps a :class:`~agentbench_rl.models.policy.Policy` already in memory (the
trainer's validation hands its policy to the harness this way); ``agents/hf.py`` builds one from
an ``hf:`` spec, loading the weights on first use. The episode driver passes the history, so the
prompts are those training builds (:func:`~agentbench_rl.agents.prompting.build_prompt`).

It is a batched agent: ``act_batch`` answers every live episode of a batch with one padded
forward (``choose``) or one ``generate`` call; ``act`` is the batch of one. Draws are seeded per
episode *and step*: row r at step t draws from its own ``torch.Generator`` seeded with
:func:`step_seed` ``(episode seed, t)``, so an episode's answers depend only on (model, task,
seed), never on its batch neighbours or on how many tokens they generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbench_rl.agents.prompting import HistoryStep, build_prompt
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs.base import TextAgentEnv


def step_seed(episode_seed: int, t: int) -> int:
    """The seed of the draws of an episode's step ``t`` (below 2**63, as torch takes).

    Example:
        >>> step_seed(7, 0) != step_seed(7, 1)
        True
    """
    return seed_from(episode_seed, t) % 2**63


class PolicyAgent:
    """A causal-LM policy as a (batched) agent; see the module docstring."""

    #: The episode driver passes the history (see ``agents.base.Agent``).
    reads_history = True

    def __init__(self, name: str, policy: Any = None, greedy: bool = False) -> None:
        self.name = name
        self._policy: Any = policy
        self._greedy = greedy
        self._env_names: list[str] = []
        self._seeds: list[int] = []

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

    def begin_episodes(self, envs: Sequence[TextAgentEnv[Any]], seeds: Sequence[int]) -> None:
        """Remember each row's env and episode seed (the draws are seeded from it)."""
        self._env_names = [env.env_name for env in envs]
        self._seeds = list(seeds)

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """One episode: the batch of one."""
        self.begin_episodes([env], [seed])

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[dict[str, Any]],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[str]:
        """Every row's answer, from one batched call of the policy."""
        import torch

        if not self._seeds:
            raise RuntimeError(f"agent '{self.name}': act called before begin_episode")
        policy = self.policy
        admissible = [list(info["admissible_actions"]) for info in infos]
        prompts = [
            build_prompt(self._env_names[row], observation, history, actions, policy.prompt)
            for row, observation, history, actions in zip(
                rows, observations, histories, admissible, strict=True
            )
        ]
        generators = [
            torch.Generator().manual_seed(step_seed(self._seeds[row], len(history)))
            for row, history in zip(rows, histories, strict=True)
        ]
        out = policy.act(prompts, admissible, generators, greedy=self._greedy)
        return [str(response) for response in out.responses]

    def act(
        self, observation: Any, info: dict[str, Any], history: Sequence[HistoryStep] = ()
    ) -> str:
        """The model's answer to this step's prompt (``history``: the driver's past steps)."""
        return self.act_batch([observation], [info], rows=[0], histories=[history])[0]
