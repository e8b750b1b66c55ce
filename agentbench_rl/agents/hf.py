"""``hf:<id-or-path>``: a Hugging Face causal LM (or a checkpoint of ours) as a harness agent.

Options follow a ``?``: ``hf:runs/x/checkpoint/policy?mode=choose&greedy=true``. Accepted:
``mode`` (``generate`` or ``choose``), ``temperature``, ``greedy``, ``history``, ``device``,
``dtype``, ``engine`` (``hf``, the default, or ``vllm``: sampling in vLLM, on its CUDA or CPU
build, ``generate`` mode only, the trainer's :class:`~agentbench_rl.models.vllm_engine.VLLMActor`)
and ``memory`` (with ``engine=vllm``: vLLM's ``gpu_memory_utilization``, on the CPU build the
share of the machine's memory held for its KV cache; default 0.5). A checkpoint
written by the trainer carries its prompt and sampling settings
(``agentbench_policy.json``), so ``hf:<checkpoint>`` plays exactly as the policy was trained;
an option overrides the stored value. The model loads in ``prepare()``, which the harness calls
before the run (or on the first episode), not when the agent is built, so checking the agent
spec costs nothing; a model that cannot load is a one-line ``ValueError`` naming it. Loading,
scoring and generation live in :mod:`agentbench_rl.models.policy`; this module only plays a
policy in the harness.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qsl

from agentbench_rl.agents.policy import PolicyAgent
from agentbench_rl.prompting import ACTION_MODES

OPTIONS = ("mode", "temperature", "greedy", "history", "device", "dtype", "engine", "memory")
ENGINES = ("hf", "vllm")


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
    if options.get("engine", "hf") not in ENGINES:
        raise ValueError(f"agent '{spec}': engine must be hf or vllm")
    if "memory" in options and not 0 < _number(options["memory"]) <= 1:
        raise ValueError(f"agent '{spec}': memory must be in (0, 1], got {options['memory']}")
    return target, options


def _number(text: str) -> float:
    """``text`` as a float, NaN when it is not one (so every range check refuses it)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


class HFAgent(PolicyAgent):
    """A causal LM answering each step's prompt (see the module docstring for the spec); the
    playing itself is :class:`~agentbench_rl.agents.policy.PolicyAgent`'s."""

    def __init__(self, spec: str) -> None:
        self.target, self.options = parse_spec(spec)
        greedy = self.options.get("greedy", "false").lower() in ("1", "true", "yes")
        super().__init__(spec, greedy=greedy)

    def _load(self) -> Any:
        from agentbench_rl.models.policy import load_saved_policy

        options = {k: v for k, v in self.options.items() if k not in ("engine", "memory")}
        vllm = self.options.get("engine", "hf") == "vllm"
        if vllm:  # torch only tokenizes: its copy of the weights stays off the GPU
            options.setdefault("device", "cpu")
        try:
            policy = load_saved_policy(self.target, options)
        except ValueError as problem:
            raise ValueError(f"agent '{self.name}': {problem}") from None
        if not vllm:
            return policy
        if policy.prompt.mode != "generate":
            raise ValueError(f"agent '{self.name}': engine vllm plays generate mode only")
        from agentbench_rl.models.vllm_engine import EngineSettings, VLLMActor

        try:
            memory = float(self.options.get("memory", EngineSettings.gpu_memory_utilization))
            settings = EngineSettings(options.get("dtype", "float32"), memory)
            return VLLMActor(policy, settings)
        except (ImportError, RuntimeError) as problem:  # no vLLM, no GPU
            raise ValueError(f"agent '{self.name}': {problem}") from None
