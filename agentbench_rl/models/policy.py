"""The policy: a causal LM and its tokenizer, acting on batches of prompts in either action mode.

One batched forward per step serves every live trajectory of every group:

- ``choose``: the prompts (ending in ``<action>``) go through the model once, left-padded; the
  key/value cache is then copied per admissible action and each action's continuation
  ``<name></action>`` is scored in one more forward. An action's score is the sum of its tokens'
  log-probs under logits / temperature (the temperature applies once); the policy is the softmax
  of the scores over the admissible actions, ``π(a|s) = exp(score_a) / Σ_b exp(score_b)``, the
  action is drawn from it and its log-prob is stored (one value per row). Training uses the same
  normalised probability (:func:`choice_logprobs`): with the raw sum of token log-probs, PPO
  can lower a bad action's probability by moving mass onto text that is no action at all,
  which changes nothing the agent does but lets the KL to the reference grow without bound.
- ``generate``: Hugging Face ``generate`` with sampling; the sampled tokens' log-probs come from
  the logits ``generate`` returns.

Either way the hidden state BiPACE needs (layer ``-hidden_layer``, last prompt token) is read
from the prompt forward that already happened (``output_hidden_states``), never from a second
pass. :func:`response_logprobs` is the training-side forward: the same left-padded-prompt plus
right-padded-response layout, so a freshly sampled row has a PPO ratio of 1 up to rounding.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError

from agentbench_rl.models.choices import ChoiceScorer, ChoiceScores
from agentbench_rl.models.hub import check_loadable
from agentbench_rl.models.vision import (
    FramePixels,
    encode_with_images,
    is_vision_language,
    load_image_processor,
    load_vision_model,
    stack_images,
    vision_inputs,
    vision_token_ids,
)
from agentbench_rl.prompting import (
    PromptConfig,
    choice_continuation,
    chosen_response,
    format_ok,
    response_prefix,
)

POLICY_FILE = "agentbench_policy.json"  # prompt and sampling settings saved beside the weights


def _quiet_transformers() -> None:
    """No per-file progress bars when weights are saved and loaded every few iterations."""
    from transformers.utils import logging

    logging.disable_progress_bar()


@dataclass
class ActOutput:
    """What the policy did for a batch of prompts (one entry per prompt).

    Attributes:
        responses: the answer text as the env receives it.
        prompt_ids: the tokens of the model input (chat template and answer prefix included).
        response_ids: the tokens that PPO trains (the chosen continuation, or the generated text).
        logprobs: the sampling policy's log-prob of each response token (float32).
        hidden: (n, d) float32 hidden states at the last prompt token, or ``None``.
        format_ok: whether the answer kept the action mode's format.
        choices: ``choose`` mode: the tokens of every admissible continuation of each row (the
            ``logprobs`` entry is then the one log-prob of the drawn action among them).
        chosen: ``choose`` mode: the index of the drawn continuation in ``choices``.
    """

    responses: list[str]
    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    logprobs: list[np.ndarray]
    hidden: np.ndarray | None
    format_ok: list[bool]
    choices: list[list[list[int]]] | None = None
    chosen: list[int] | None = None


@dataclass
class Packed:
    """Left-padded prompts followed by right-padded responses, as model inputs."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor  # (n, R), pad where response_mask is False
    response_mask: torch.Tensor  # (n, R) bool
    # the prompts' images, in row order (vision-language rows, see models.vision)
    pixel_values: torch.Tensor | None = None
    image_grid_thw: torch.Tensor | None = None


def pack(
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device | str = "cpu",
) -> Packed:
    """Lay out ``prompt + response`` rows: prompts left-padded to one length, responses
    right-padded after them, so every response starts at the same column.

    Example:
        >>> packed = pack([[5, 6], [7]], [[8], [9, 10]], pad_id=0)
        >>> packed.input_ids.tolist(), packed.position_ids.tolist()
        ([[5, 6, 8, 0], [0, 7, 9, 10]], [[0, 1, 2, 2], [0, 0, 1, 2]])
    """
    n = len(prompt_ids)
    prompt_width = max(len(p) for p in prompt_ids)
    response_width = max(1, max(len(r) for r in response_ids))
    input_ids = torch.full((n, prompt_width + response_width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, prompt_width + response_width), dtype=torch.long)
    responses = torch.full((n, response_width), pad_id, dtype=torch.long)
    response_mask = torch.zeros((n, response_width), dtype=torch.bool)
    for row, (prompt, response) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        start = prompt_width - len(prompt)
        input_ids[row, start:prompt_width] = torch.tensor(prompt, dtype=torch.long)
        mask[row, start:prompt_width] = 1
        if response:
            end = prompt_width + len(response)
            input_ids[row, prompt_width:end] = torch.tensor(response, dtype=torch.long)
            mask[row, prompt_width:end] = 1
            responses[row, : len(response)] = torch.tensor(response, dtype=torch.long)
            response_mask[row, : len(response)] = True
    position_ids = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return Packed(
        input_ids.to(device),
        mask.to(device),
        position_ids.to(device),
        responses.to(device),
        response_mask.to(device),
        *stack_images(prompt_ids),
    )


def left_pad(
    prompt_ids: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompts alone, left-padded: input ids, attention mask and position ids (the prompt part
    of :func:`pack`, so the last column is every row's last prompt token).

    Example:
        >>> [t.tolist() for t in left_pad([[5, 6], [7]], pad_id=0)]
        [[[5, 6], [0, 7]], [[1, 1], [0, 1]], [[0, 1], [0, 0]]]
    """
    packed = pack(prompt_ids, [[] for _ in prompt_ids], pad_id, device)
    width = packed.input_ids.shape[1] - 1  # pack keeps one (empty) response column
    return (
        packed.input_ids[:, :width],
        packed.attention_mask[:, :width],
        packed.position_ids[:, :width],
    )


def response_logprobs(
    model: Any,
    packed: Packed,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (n, R) of the packed responses under ``model`` (logits divided by
    ``temperature``, as at sampling), and the per-token entropy when asked.

    Only the logits of the response columns are computed (``logits_to_keep``).
    """
    width = packed.response_ids.shape[1]
    images = vision_inputs(
        model, packed.input_ids, packed.attention_mask, packed.pixel_values, packed.image_grid_thw
    )
    output = model(
        input_ids=packed.input_ids,
        attention_mask=packed.attention_mask,
        position_ids=images.pop("position_ids", packed.position_ids),
        logits_to_keep=width + 1,
        use_cache=False,
        **images,
    )
    # The logit at column c predicts the token at c + 1: drop the one after the last token.
    logits = output.logits[:, :-1, :].float() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    token_logprobs = log_probs.gather(-1, packed.response_ids.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    return token_logprobs, entropy


class RowSampler:
    """A ``transformers`` logits processor that samples every row's next token from the row's
    own ``torch.Generator`` (temperature, then top-p), then leaves only that token, so a greedy
    ``generate`` keeps it. A row that has written its end token draws nothing more, so a row's
    stream depends on its own tokens only, never on how long its batch neighbours run.

    Example:
        >>> sampler = RowSampler([torch.Generator().manual_seed(0)], 1.0, 1.0, eos=0, width=1)
        >>> scores = sampler(torch.tensor([[5]]), torch.tensor([[0.0, 9.0, -9.0]]))
        >>> int(scores.argmax())
        1
    """

    def __init__(
        self,
        generators: Sequence[torch.Generator],
        temperature: float,
        top_p: float,
        eos: int | None,
        width: int,
    ) -> None:
        self.generators = list(generators)
        self.temperature = temperature
        self.top_p = top_p
        self.eos = eos
        self.width = width  # the prompt columns; tokens after them are generated

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Scores where each row's drawn token is the only finite one."""
        kept = torch.full_like(scores, -float("inf"))
        for row in range(scores.shape[0]):
            generated = input_ids[row, self.width :]
            if self.eos is not None and bool((generated == self.eos).any()):
                kept[row, self.eos] = 0.0  # finished: generate pads it, nothing is drawn
                continue
            probabilities = torch.softmax(scores[row].float() / self.temperature, dim=-1).cpu()
            if self.top_p < 1.0:
                ordered, order = torch.sort(probabilities, descending=True)
                outside = ordered.cumsum(0) - ordered >= self.top_p  # the nucleus keeps >= 1
                probabilities[order[outside]] = 0.0
            token = int(torch.multinomial(probabilities, 1, generator=self.generators[row]))
            kept[row, token] = 0.0
        return kept


# On the CPU rows are scored in groups of equal prompt length. A padded batch makes every row
# attend over its longest prompt, through SDPA's masked path, and copies that padding into each
# (row, action) pair's cache; a group without padding takes the causal kernel. Against one
# batch (``bench choices``): 3.5x faster on TextCraft's prompts (75 to 884 tokens), 3.4x on
# WebShop's (up to 2,048), 1.2x on Sokoban's (three lengths), where single rows are 2.8x slower;
# buckets of lengths within 1.25x (padded, so masked) were slower than groups on all three. On
# an accelerator the batch stays whole: there a forward costs its launch more than its positions.
def equal_length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Row indices grouped by equal length, shortest first.

    Example:
        >>> equal_length_groups([90, 10, 90, 100, 10])
        [[1, 4], [0, 2], [3]]
    """
    groups: dict[int, list[int]] = {}
    for row, length in enumerate(lengths):
        groups.setdefault(length, []).append(row)
    return [groups[length] for length in sorted(groups)]


def distinct_rows(
    prompt_ids: Sequence[Sequence[int]], choices: Sequence[Sequence[Sequence[int]]]
) -> tuple[list[int], list[int]]:
    """The rows to score and where every row's scores are: the first of each distinct (prompt,
    choices), and for each row the index of its distinct row among them. A prompt that shows
    images is never merged (its token ids do not say which images).

    Example:
        >>> distinct_rows([[1, 2], [3], [1, 2], [1, 2]], [[[5]], [[5]], [[5]], [[6]]])
        ([0, 1, 3], [0, 1, 0, 2])
    """
    first: dict[Any, int] = {}
    kept: list[int] = []
    source: list[int] = []
    for row, (ids, options) in enumerate(zip(prompt_ids, choices, strict=True)):
        key: Any = row if getattr(ids, "images", None) else (tuple(ids), tuple(map(tuple, options)))
        if key not in first:
            first[key] = len(kept)
            kept.append(row)
        source.append(first[key])
    return kept, source


def score_choices(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    choices: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    temperature: float = 1.0,
    capture_hidden: bool = False,
) -> ChoiceScores:
    """Score each row's continuations: the prompts go through the model once (left-padded), the
    key/value cache is copied per (row, continuation) pair, and the continuations run in one
    more forward (on the CPU, per group of equal prompt length: :func:`equal_length_groups`).
    Rows that repeat one (:func:`distinct_rows`: the K continuations of a fidelity run replay
    the same prefix, a group's members start from the same observation) are scored once.
    Differentiable (no ``no_grad`` here): training and acting share it.
    """
    for row, options in enumerate(choices):
        if not options:
            raise ValueError(f"choose mode: row {row} has no admissible actions")
    if isinstance(model, ChoiceScorer):
        return model.score_choices(prompt_ids, choices, temperature, capture_hidden)

    def scored(rows: Sequence[int], scorer: Callable[..., ChoiceScores]) -> ChoiceScores:
        """``scorer`` on these rows only."""
        picked = [prompt_ids[row] for row in rows], [choices[row] for row in rows]
        return scorer(model, *picked, pad_id, temperature, capture_hidden)

    kept, source = distinct_rows(prompt_ids, choices)
    if len(kept) < len(prompt_ids):
        return scored(kept, score_choices).for_rows(source)
    if next(model.parameters()).device.type != "cpu":
        return score_padded_batch(model, prompt_ids, choices, pad_id, temperature, capture_hidden)
    groups = equal_length_groups([len(ids) for ids in prompt_ids])
    parts = [scored(group, score_padded_batch) for group in groups]
    return ChoiceScores.of_groups(parts, groups)


def score_padded_batch(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    choices: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    temperature: float,
    capture_hidden: bool,
) -> ChoiceScores:
    """:func:`score_choices` on one left-padded batch of rows, whatever the device."""
    device = next(model.parameters()).device
    input_ids, prompt_mask, positions = left_pad(prompt_ids, pad_id, device)
    images = vision_inputs(model, input_ids, prompt_mask, *stack_images(prompt_ids))
    positions = images.pop("position_ids", positions)
    first = model(
        input_ids=input_ids,
        attention_mask=prompt_mask,
        position_ids=positions,
        use_cache=True,
        output_hidden_states=capture_hidden,
        logits_to_keep=1,
        **images,
    )
    first_logprobs = torch.log_softmax(first.logits[:, -1, :].float() / temperature, -1)
    pair_rows = [row for row, options in enumerate(choices) for _ in options]
    pair_columns = [column for options in choices for column in range(len(options))]
    flat = [list(ids) for options in choices for ids in options]
    index = torch.tensor(pair_rows, dtype=torch.long, device=device)
    cache = first.cache if "cache" in first else first.past_key_values
    cache.batch_select_indices(index)
    width = max(len(ids) for ids in flat)
    choice_ids = torch.full((len(flat), width), pad_id, dtype=torch.long)
    choice_mask = torch.zeros((len(flat), width), dtype=torch.long)
    for pair, ids in enumerate(flat):
        choice_ids[pair, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        choice_mask[pair, : len(ids)] = 1
    choice_ids, choice_mask = choice_ids.to(device), choice_mask.to(device)
    # each continuation goes on from its prompt's last position (rows are the second-last
    # axis: (rows, L) text positions, (3, rows, L) M-RoPE ones)
    following = positions[..., -1:] + 1 + torch.arange(width, device=device)
    choice_positions = following.index_select(-2, index)
    columns = [first_logprobs[index].gather(1, choice_ids[:, :1])]
    if width > 1:
        rest = model(
            input_ids=choice_ids,
            attention_mask=torch.cat([prompt_mask[index], choice_mask], dim=1),
            position_ids=choice_positions,
            use_cache=True,
            **{_cache_argument(model): cache},
        )
        rest_logprobs = torch.log_softmax(rest.logits[:, :-1, :].float() / temperature, -1)
        columns.append(rest_logprobs.gather(-1, choice_ids[:, 1:, None]).squeeze(-1))
    token_logprobs = torch.cat(columns, dim=1) * choice_mask
    return ChoiceScores(
        index,
        torch.tensor(pair_columns, dtype=torch.long, device=device),
        token_logprobs.sum(dim=1),
        # left-padded: the last column is every row's last prompt token
        tuple(layer[:, -1, :] for layer in first.hidden_states) if capture_hidden else None,
    )


def choice_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    choices: Sequence[Sequence[Sequence[int]]],
    chosen: Sequence[int],
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``choose`` mode's policy at training time: per row the log-prob of the chosen action
    under the softmax of the scores over the row's admissible actions, and that
    distribution's entropy when asked. Shapes (rows,).
    """
    scored = score_choices(model, prompt_ids, choices, pad_id, temperature)
    rows, width = len(choices), max(len(options) for options in choices)
    table = torch.full((rows, width), -torch.inf, device=scored.scores.device)
    table = table.index_put((scored.pair_rows, scored.pair_columns), scored.scores)
    log_policy = torch.log_softmax(table, dim=1)
    picked = torch.tensor(list(chosen), dtype=torch.long, device=table.device)
    logprobs = log_policy.gather(1, picked[:, None]).squeeze(1)
    entropy = None
    if with_entropy:
        # Masked before the product: a padded column's 0 * -inf would make the gradient NaN
        # in every row that has fewer actions than the widest one.
        present = torch.isfinite(table)
        log_present = torch.where(present, log_policy, 0.0)
        entropy = -(log_present.exp() * log_present * present).sum(dim=1)
    return logprobs, entropy


def _joined(parts: Sequence[list[Any] | None]) -> list[Any] | None:
    """Concatenate per-chunk lists, ``None`` when the chunks have none."""
    if not parts or any(part is None for part in parts):
        return None
    return [item for part in parts if part is not None for item in part]


class Policy:
    """A causal LM acting on prompts built by :mod:`agentbench_rl.prompting`.

    Args:
        model: a Hugging Face causal LM.
        tokenizer: its tokenizer (a chat template, when it has one, wraps each prompt).
        prompt: the prompt settings (the action mode among them).
        temperature, top_p, max_new_tokens: sampling settings.
        max_prompt_tokens: longer prompts keep their last tokens.
        forward_batch_size: rows per forward (bounds memory).
        hidden_layer: BiPACE's layer, counted from the top (1 = last).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        prompt: PromptConfig,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        max_prompt_tokens: int = 2048,
        forward_batch_size: int = 64,
        hidden_layer: int = 1,
        image_processor: Any = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        if is_vision_language(model) and image_processor is None:
            raise ValueError("a vision-language model needs its image processor")
        if isinstance(model, ChoiceScorer) and prompt.mode != "choose":
            raise ValueError(f"{type(model).__name__} scores admissible actions: use choose mode")
        self.image_processor = image_processor
        self.frame_pixels = FramePixels(image_processor) if image_processor is not None else None
        self.prompt = prompt
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.forward_batch_size = forward_batch_size
        layers = text_layers(model)
        if not 1 <= hidden_layer <= layers + 1:
            raise ValueError(
                f"hidden_layer {hidden_layer} is out of range for a model of {layers} layers "
                f"(1 .. {layers + 1})"
            )
        self.hidden_layer = hidden_layer
        self.pad_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        self._choice_cache: dict[str, list[int]] = {}

    @property
    def device(self) -> torch.device:
        """Where the model's weights are."""
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ text -> tokens
    def model_input(self, prompt_text: str) -> str:
        """The text the model reads: the prompt in the chat template (if the tokenizer has one),
        then the answer prefix of the action mode. A vision-language policy puts the prompt's
        frames (:class:`~agentbench_rl.prompting.Prompt`) as image parts before it."""
        prefix = response_prefix(self.prompt.mode)
        if getattr(self.tokenizer, "chat_template", None):
            content: Any = prompt_text
            if self._images(prompt_text):
                content = [{"type": "image"} for _ in self._images(prompt_text)]
                content.append({"type": "text", "text": str(prompt_text)})
            chat = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": content}],
                tokenize=False,
                add_generation_prompt=True,
            )
            return str(chat) + prefix
        return prompt_text + "\n" + prefix

    def _images(self, prompt_text: str) -> tuple[Any, ...]:
        """The frames this policy shows the model: the prompt's, when the model sees images."""
        if self.image_processor is None:
            return ()
        return tuple(getattr(prompt_text, "images", ()))

    def encode_prompt(self, prompt_text: str) -> list[int]:
        """Token ids of :meth:`model_input`, cut to the last ``max_prompt_tokens`` (a prompt
        with images never inside an image: see :meth:`ImagePromptIds.last`)."""
        images = self._images(prompt_text)
        if images and self.frame_pixels is not None:
            return encode_with_images(
                self.tokenizer, self.frame_pixels, self.model_input(prompt_text), images
            ).last(self.max_prompt_tokens)
        ids: list[int] = self.tokenizer(self.model_input(prompt_text), add_special_tokens=False)[
            "input_ids"
        ]
        return ids[-self.max_prompt_tokens :]

    def encode_choice(self, action: str) -> list[int]:
        """Token ids of one action's continuation in ``choose`` mode (cached)."""
        if action not in self._choice_cache:
            self._choice_cache[action] = self.tokenizer(
                choice_continuation(action), add_special_tokens=False
            )["input_ids"]
        return self._choice_cache[action]

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(
        self,
        prompts: Sequence[str],
        admissible: Sequence[Sequence[str]],
        generator: torch.Generator | Sequence[torch.Generator],
        capture_hidden: bool = False,
        greedy: bool = False,
    ) -> ActOutput:
        """Answer every prompt, in chunks of ``forward_batch_size`` rows.

        ``generator`` (a CPU ``torch.Generator``) makes the draws reproducible: one for the
        whole batch (training's rollouts), or one per prompt, so that each row's draws come
        from its own stream and never depend on the other rows (the harness's batched
        evaluation; see :class:`RowSampler` for ``generate`` mode).
        """
        if not isinstance(generator, torch.Generator) and len(generator) != len(prompts):
            raise ValueError(f"policy: {len(generator)} generators for {len(prompts)} prompts")
        was_training = self.model.training
        self.model.eval()
        outputs = []
        try:
            for start in range(0, len(prompts), self.forward_batch_size):
                end = start + self.forward_batch_size
                prompt_ids = [self.encode_prompt(text) for text in prompts[start:end]]
                draws = (
                    generator if isinstance(generator, torch.Generator) else generator[start:end]
                )
                if self.prompt.mode == "choose":
                    outputs.append(
                        self._choose(
                            prompt_ids, admissible[start:end], draws, capture_hidden, greedy
                        )
                    )
                else:
                    outputs.append(self._generate(prompt_ids, draws, capture_hidden, greedy))
        finally:
            self.model.train(was_training)
        hidden = (
            np.concatenate([o.hidden for o in outputs if o.hidden is not None])
            if capture_hidden and outputs
            else None
        )
        return ActOutput(
            responses=[r for o in outputs for r in o.responses],
            prompt_ids=[p for o in outputs for p in o.prompt_ids],
            response_ids=[r for o in outputs for r in o.response_ids],
            logprobs=[lp for o in outputs for lp in o.logprobs],
            hidden=hidden,
            format_ok=[f for o in outputs for f in o.format_ok],
            choices=_joined([o.choices for o in outputs]),
            chosen=_joined([o.chosen for o in outputs]),
        )

    def _hidden_at_layer(self, last_prompt_hidden: Sequence[torch.Tensor]) -> np.ndarray:
        """BiPACE's vectors: ``hidden_layer``'s (counted from the top) of each row's last
        prompt token, given every layer's (rows, hidden)."""
        layer = last_prompt_hidden[len(last_prompt_hidden) - self.hidden_layer]
        return layer.float().cpu().numpy().astype(np.float32)

    def _choose(
        self,
        prompt_ids: list[list[int]],
        admissible: Sequence[Sequence[str]],
        generator: torch.Generator | Sequence[torch.Generator],
        capture_hidden: bool,
        greedy: bool,
    ) -> ActOutput:
        choices = [[self.encode_choice(a) for a in actions] for actions in admissible]
        scored = score_choices(
            self.model, prompt_ids, choices, self.pad_id, self.temperature, capture_hidden
        )
        scores = scored.scores.cpu().double()
        responses, response_ids, logprobs, chosen = [], [], [], []
        offset = 0
        for row, (actions, options) in enumerate(zip(admissible, choices, strict=True)):
            # the policy: softmax of the scores over the row's admissible actions
            log_policy = torch.log_softmax(scores[offset : offset + len(actions)], dim=0)
            if greedy:
                pick = int(torch.argmax(log_policy))
            else:
                draws = generator if isinstance(generator, torch.Generator) else generator[row]
                pick = int(torch.multinomial(log_policy.exp(), 1, generator=draws))
            responses.append(chosen_response(actions[pick]))
            response_ids.append(list(options[pick]))
            logprobs.append(np.array([log_policy[pick]], dtype=np.float32))
            chosen.append(pick)
            offset += len(actions)
        hidden = None
        if capture_hidden and scored.last_prompt_hidden is not None:
            hidden = self._hidden_at_layer(scored.last_prompt_hidden)
        return ActOutput(
            responses,
            prompt_ids,
            response_ids,
            logprobs,
            hidden,
            [True] * len(responses),
            choices,
            chosen,
        )

    def _generate(
        self,
        prompt_ids: list[list[int]],
        generator: torch.Generator | Sequence[torch.Generator],
        capture_hidden: bool,
        greedy: bool,
    ) -> ActOutput:
        input_ids, prompt_mask, _ = left_pad(prompt_ids, self.pad_id, self.device)
        images = vision_inputs(self.model, input_ids, prompt_mask, *stack_images(prompt_ids))
        images.pop("position_ids", None)  # generate derives them from the same inputs
        width = input_ids.shape[1]
        # One generator for the batch: generate draws from the global torch stream, seeded from
        # it in a fork so the caller's global stream is untouched. One generator per row: the
        # RowSampler draws every token, and generate only keeps it (no sampling of its own).
        processors: list[RowSampler] = []
        if isinstance(generator, torch.Generator):
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        else:
            seed = 0  # unused: greedy, or every draw is the RowSampler's
            if not greedy:
                eos = self.tokenizer.eos_token_id
                processors.append(
                    RowSampler(list(generator), self.temperature, self.top_p, eos, width)
                )
        per_row = bool(processors)
        sample = not greedy and not per_row
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=prompt_mask,
                do_sample=sample,
                temperature=self.temperature if sample else None,
                top_p=self.top_p if sample else None,
                logits_processor=processors or None,
                top_k=None,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.pad_id,
                eos_token_id=self.tokenizer.eos_token_id,
                return_dict_in_generate=True,
                output_logits=True,
                output_hidden_states=capture_hidden,
                # vision placeholders are slots for image features, never an answer's tokens
                suppress_tokens=vision_token_ids(self.model) or None,
                **images,
            )
        new_tokens = output.sequences[:, width:]
        logits = torch.stack(output.logits, dim=1).float() / self.temperature
        all_logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new_tokens[..., None])[..., 0]
        eos = self.tokenizer.eos_token_id
        responses, response_ids, logprobs, ok = [], [], [], []
        for row in range(new_tokens.shape[0]):
            tokens = new_tokens[row].tolist()
            length = tokens.index(eos) + 1 if eos in tokens else len(tokens)
            text = self.tokenizer.decode(tokens[:length], skip_special_tokens=True)
            responses.append(text)
            response_ids.append(tokens[:length])
            logprobs.append(all_logprobs[row, :length].cpu().numpy().astype(np.float32))
            ok.append(format_ok(text))
        hidden = None
        if capture_hidden:
            # left-padded: the last column is every row's last prompt token
            hidden = self._hidden_at_layer([layer[:, -1, :] for layer in output.hidden_states[0]])
        return ActOutput(responses, prompt_ids, response_ids, logprobs, hidden, ok)

    # ------------------------------------------------------------------ files
    def settings(self) -> dict[str, Any]:
        """The prompt and sampling settings (saved beside the weights)."""
        return {
            "history": self.prompt.history,
            "history_observations": self.prompt.history_observations,
            "mode": self.prompt.mode,
            "instruction": self.prompt.instruction,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "max_prompt_tokens": self.max_prompt_tokens,
            "hidden_layer": self.hidden_layer,
        }

    def save(self, folder: Path) -> None:
        """Write weights, tokenizer and settings to ``folder`` (``hf:<folder>`` loads them)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        _quiet_transformers()
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        if self.image_processor is not None:
            self.image_processor.save_pretrained(folder)
        (folder / POLICY_FILE).write_text(json.dumps(self.settings(), indent=1) + "\n", "utf-8")


def read_settings(folder: Path) -> dict[str, Any]:
    """The settings a saved policy was trained with (empty for a plain Hugging Face model)."""
    path = Path(folder) / POLICY_FILE
    if not path.is_file():
        return {}
    settings: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return settings


def load_saved_policy(target: str, options: Mapping[str, str] | None = None) -> Policy:
    """A :class:`Policy` from a folder :meth:`Policy.save` wrote (its stored prompt and sampling
    settings) or any Hugging Face model id or folder (the defaults); ``options`` (``mode``,
    ``temperature``, ``history``, ``device``, ``dtype``) override. Raises ``ValueError`` when
    the model cannot be loaded."""
    options = dict(options or {})
    check_loadable(target)
    try:
        settings = read_settings(Path(target))
        model, tokenizer = load_pretrained(
            target,
            dtype=options.get("dtype", "float32"),
            device=resolve_device(options.get("device", "auto")),
        )
        image_processor = load_image_processor(target)
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as problem:
        # transformers' reasons run over several lines; the first one says what is wrong.
        reason = next((line for line in str(problem).splitlines() if line.strip()), "")
        reason = reason.strip() or type(problem).__name__
        raise ValueError(f"cannot load the model '{target}' ({reason})") from None

    def pick(name: str, default: Any) -> Any:
        return options.get(name, settings.get(name, default))

    prompt = PromptConfig(
        history=int(pick("history", 2)),
        history_observations=bool(settings.get("history_observations", True)),
        mode=pick("mode", "generate"),
        instruction=settings.get("instruction"),
    )
    return Policy(
        model,
        tokenizer,
        prompt,
        temperature=float(pick("temperature", 1.0)),
        top_p=float(settings.get("top_p", 1.0)),
        max_new_tokens=int(settings.get("max_new_tokens", 256)),
        max_prompt_tokens=int(settings.get("max_prompt_tokens", 2048)),
        hidden_layer=1,
        image_processor=image_processor,
    )


def text_layers(model: Any) -> int:
    """The language model's layer count (a vision-language config keeps it in ``text_config``)."""
    config = getattr(model.config, "text_config", None) or model.config
    return int(config.num_hidden_layers)


def load_pretrained(name_or_path: str, dtype: str = "float32", device: str = "cpu") -> Any:
    """A Hugging Face model and tokenizer by hub id or local folder (``AutoModelForCausalLM``;
    a vision-language model through :func:`~agentbench_rl.models.vision.load_vision_model`), or
    a saved :class:`~agentbench_rl.models.drrn.DRRN` and its features (float32 always)."""
    from agentbench_rl.models.drrn import is_drrn_folder, load_drrn

    if is_drrn_folder(name_or_path):
        return load_drrn(name_or_path, device)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet_transformers()
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if load_image_processor(name_or_path) is not None:
        model: Any = load_vision_model(name_or_path, torch_dtype[dtype])
    else:
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype[dtype])
    return model.to(device), tokenizer


def _cache_argument(model: Any) -> str:
    """The forward's name for the key/value cache: ``cache`` (transformers 5.2x) or
    ``past_key_values`` (earlier releases)."""
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def resolve_device(device: str) -> str:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``; ``cuda`` on a machine without
    one is a one-line ``ValueError``."""
    if device == "auto":
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
            return "cpu"
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device}: this machine has no CUDA GPU (use device=cpu or auto)")
    return device
