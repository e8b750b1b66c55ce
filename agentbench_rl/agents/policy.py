"""A policy playing as a harness agent: one prompt per episode and step, answered in batches.

:class:`PolicyAgent` wraps a :class:`~agentbench_rl.models.policy.Policy` already in memory (the
trainer's validation hands its policy to the harness this way); ``agents/hf.py`` builds one from
an ``hf:`` spec, loading the weights on first use. The episode driver passes the history, so the
prompts are those training builds (:func:`~agentbench_rl.prompting.build_prompt`).

It is a batched agent: ``act_batch`` answers every live episode of a batch with one padded
forward (``choose``) or one ``generate`` call; ``act`` is the batch of one. Draws are seeded per
episode *and step*: row r at step t draws from its own ``torch.Generator`` seeded with
:func:`step_seed` ``(episode seed, t)``, so an episode's answers depend only on (model, task,
seed), never on its batch neighbours or on how many tokens they generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbench_rl.agents.base import PromptingBatchAgent
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs.base import StepInfo
from agentbench_rl.prompting import HistoryStep, action_choices


def step_seed(episode_seed: int, t: int) -> int:
    """The seed of the draws of an episode's step ``t`` (below 2**63, as torch takes).

    Example:
        >>> step_seed(7, 0) != step_seed(7, 1)
        True
    """
    return seed_from(episode_seed, t) % 2**63


class PolicyAgent(PromptingBatchAgent):
    """A causal-LM policy as a (batched) agent; see the module docstring.

    With ``capture_hidden`` set, each ``act_batch`` also keeps the rows' hidden states (the
    policy's BiPACE layer at the last prompt token, read from the forward that answered) in
    ``last_hidden``: what the fidelity bench hands BiPACE.
    """

    def __init__(self, name: str, policy: Any = None, greedy: bool = False) -> None:
        super().__init__()
        self.name = name
        self._policy: Any = policy
        self._greedy = greedy
        self.capture_hidden = False
        self.last_hidden: Any = None

    def _load(self) -> Any:
        """The policy, for an agent made without one (``HFAgent`` loads it from disk)."""
        raise RuntimeError(f"agent '{self.name}' has no policy")

    @property
    def policy(self) -> Any:
        """The policy (loaded on first use when the agent was made without one)."""
        if self._policy is None:
            self._policy = self._load()
        return self._policy

    def prepare(self) -> None:
        """Load the policy now (the harness's check before a run; see
        :class:`~agentbench_rl.agents.base.Agent`)."""
        _ = self.policy

    @property
    def answer_format(self) -> str:
        """The policy's action mode: ``generate`` answers must keep the papers' format."""
        return str(self.policy.prompt.mode)

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[StepInfo],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[str]:
        """Every row's answer, from one batched call of the policy."""
        import torch

        generators = [
            torch.Generator().manual_seed(step_seed(self.row_seed(row), len(history)))
            for row, history in zip(rows, histories, strict=True)
        ]
        policy = self.policy
        prompts = self.row_prompts(observations, infos, rows, histories, policy.prompt)
        admissible = [action_choices(info, policy.prompt.mode) for info in infos]
        out = policy.act(
            prompts, admissible, generators, capture_hidden=self.capture_hidden, greedy=self._greedy
        )
        self.last_hidden = out.hidden
        return [str(response) for response in out.responses]
