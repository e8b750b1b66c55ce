"""``hf:<id-or-path>``: a Hugging Face causal LM (or a checkpoint of ours) as a harness agent.

Options follow a ``?``: ``hf:runs/x/checkpoint/policy?mode=choose&greedy=true``. Accepted:
``mode`` (``generate`` or ``choose``), ``temperature``, ``greedy``, ``history``, ``device``,
``dtype``. A checkpoint written by the trainer carries its prompt and sampling settings
(``agentbench_policy.json``), so ``hf:<checkpoint>`` plays exactly as the policy was trained;
an option overrides the stored value. The model loads on the first episode, not when the agent
is built, so the harness's check of the agent spec costs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from agentbench_rl.agents.prompting import (
    ACTION_MODES,
    HistoryStep,
    PromptConfig,
    build_prompt,
    observation_text,
)
from agentbench_rl.envs.base import TextAgentEnv

OPTIONS = ("mode", "temperature", "greedy", "history", "device", "dtype")
# The last policy loaded, by (path, weights' modification time): the harness builds the agent
# more than once per evaluation, and validation during training evaluates a policy already in
# memory (see ``remember``).
_LOADED: dict[tuple[str, float], Any] = {}


def _weights_stamp(target: str) -> float:
    path = Path(target)
    if not path.is_dir():
        return 0.0
    stamps = [p.stat().st_mtime for p in path.iterdir() if p.suffix in (".safetensors", ".bin")]
    return max(stamps, default=0.0)


def remember(target: str, policy: Any) -> None:
    """Make ``hf:<target>`` use ``policy`` (already in memory, with the weights just saved
    there) instead of reading the folder again."""
    _LOADED.clear()
    _LOADED[(str(Path(target).resolve()), _weights_stamp(target))] = policy


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

    def __init__(self, spec: str) -> None:
        self.name = spec
        self.target, self.options = parse_spec(spec)
        self._policy: Any = None
        self._env_name = ""
        self._history: list[HistoryStep] = []
        self._previous: str | None = None
        self._generator: Any = None
        self._greedy = self.options.get("greedy", "false").lower() in ("1", "true", "yes")

    def _load(self) -> Any:
        from agentbench_rl.train.policy import Policy, load_pretrained, read_settings

        key = (str(Path(self.target).resolve()), _weights_stamp(self.target))
        # ``greedy`` changes how the policy draws, not the policy: a remembered one serves it
        shapes_policy = any(name != "greedy" for name in self.options)
        if not shapes_policy and key in _LOADED:
            return _LOADED[key]
        settings = read_settings(Path(self.target))
        options = self.options

        def pick(name: str, default: Any) -> Any:
            return options.get(name, settings.get(name, default))

        device = options.get("device", "cuda" if _cuda() else "cpu")
        try:
            model, tokenizer = load_pretrained(
                self.target, dtype=options.get("dtype", "float32"), device=device
            )
        except OSError as problem:
            raise ValueError(f"agent '{self.name}': cannot load the model ({problem})") from None
        prompt = PromptConfig(
            history=int(pick("history", 2)),
            history_observations=bool(settings.get("history_observations", True)),
            mode=pick("mode", "generate"),
            instruction=settings.get("instruction"),
        )
        policy = Policy(
            model,
            tokenizer,
            prompt,
            temperature=float(pick("temperature", 1.0)),
            top_p=float(settings.get("top_p", 1.0)),
            max_new_tokens=int(settings.get("max_new_tokens", 256)),
            max_prompt_tokens=int(settings.get("max_prompt_tokens", 2048)),
            hidden_layer=1,
        )
        if not shapes_policy:
            _LOADED.clear()
            _LOADED[key] = policy
        return policy

    @property
    def policy(self) -> Any:
        """The loaded policy (loads it on first use)."""
        if self._policy is None:
            self._policy = self._load()
        return self._policy

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Start a new history and reseed the draws from the episode seed."""
        import torch

        self._env_name = env.env_name
        self._history = []
        self._previous = None
        self._generator = torch.Generator().manual_seed(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        """The model's answer to this step's prompt."""
        if self._generator is None:
            raise RuntimeError("HFAgent.act called before begin_episode")
        if self._previous is not None:
            # info of a step carries the canonical form of the action just taken
            self._history.append(HistoryStep(self._previous, info["action_canonical"]))
        policy = self.policy
        actions = list(info["admissible_actions"])
        prompt = build_prompt(self._env_name, observation, self._history, actions, policy.prompt)
        out = policy.act([prompt], [actions], self._generator, greedy=self._greedy)
        self._previous = observation_text(observation)
        return str(out.responses[0])


def _cuda() -> bool:
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    import torch

    return bool(torch.cuda.is_available())
