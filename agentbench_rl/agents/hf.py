"""``hf:<id-or-path>``: a Hugging Face causal LM (or a checkpoint of ours) as a harness agent.

Options follow a ``?``: ``hf:runs/x/checkpoint/policy?mode=choose&greedy=true``. Accepted:
``mode`` (``generate`` or ``choose``), ``temperature``, ``greedy``, ``history``, ``device``,
``dtype``. A checkpoint written by the trainer carries its prompt and sampling settings
(``agentbench_policy.json``), so ``hf:<checkpoint>`` plays exactly as the policy was trained;
an option overrides the stored value. The model loads on the first episode, not when the agent
is built, so the harness's check of the agent spec costs nothing. Loading, scoring and generation
live in :mod:`agentbench_rl.models.policy`; this module only plays a policy in the harness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

from agentbench_rl.agents.prompting import (
    ACTION_MODES,
    HistoryStep,
    build_prompt,
)
from agentbench_rl.envs.base import TextAgentEnv

OPTIONS = ("mode", "temperature", "greedy", "history", "device", "dtype")


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``hf:<target>?k=v&...`` into the target and its options.

    Example:
        >>> parse_spec("hf:runs/a/policy?mode=choose&greedy=true")
        ('runs/a/policy', {'mode': 'choose', 'greedy': 'true'})
    """
    body = spec.removeprefix("hf:")
    target, _, query = body.partition("?")
    if not target:
        raise ValueError(f"agent '{spec}': expected hf:<model id or path>")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        accepted = ", ".join(OPTIONS)
        raise ValueError(f"agent '{spec}': unknown option(s) {', '.join(unknown)} ({accepted=})")
    if "mode" in options and options["mode"] not in ACTION_MODES:
        raise ValueError(f"agent '{spec}': mode must be generate or choose")
    return target, options


class HFAgent:
    """A causal LM answering each step's prompt (see the module docstring for the spec).

    Every step is one forward (``choose``) or one ``generate`` call; draws come from a generator
    seeded with the episode seed, so an episode depends only on (model, task, seed).
    """

    def __init__(self, spec: str, policy: Any = None) -> None:
        self.name = spec
        self.target, self.options = parse_spec(spec)
        self._policy: Any = policy
        self._env_name = ""
        self._generator: Any = None
        self._greedy = self.options.get("greedy", "false").lower() in ("1", "true", "yes")

    @classmethod
    def from_policy(cls, spec: str, policy: Any) -> HFAgent:
        """The agent of a policy already in memory (validation during training): nothing is
        read from disk; ``spec`` names it in results."""
        return cls(spec, policy)

    def _load(self) -> Any:
        from agentbench_rl.models.policy import load_saved_policy

        try:
            return load_saved_policy(self.target, self.options)
        except ValueError as problem:
            raise ValueError(f"agent '{self.name}': {problem}") from None

    @property
    def policy(self) -> Any:
        """The loaded policy (loads it on first use)."""
        if self._policy is None:
            self._policy = self._load()
        return self._policy

    #: The episode driver passes the history (see ``agents.base.Agent``).
    reads_history = True

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
            raise RuntimeError("HFAgent.act called before begin_episode")
        policy = self.policy
        actions = list(info["admissible_actions"])
        prompt = build_prompt(self._env_name, observation, history, actions, policy.prompt)
        out = policy.act([prompt], [actions], self._generator, greedy=self._greedy)
        return str(out.responses[0])
