"""Published models' shapes, built random-initialised with our tokenizer: what ``bench gpu``
times, so a GPU machine with no internet and no weights measures what the real models cost.

A shape is the numbers of the published ``config.json`` (layers, widths, heads, vocabulary,
tied embeddings, rotary base; for Qwen2.5-VL the vision tower too), written here in code, so
nothing is downloaded. The tokenizer is ours (the ``tiny`` byte-level BPE trained on the env's
own text); the model keeps the published vocabulary size, so its embedding and output layer
cost what the real ones cost, and ids our tokenizer lacks decode to nothing (a random model's
answers are noise either way). The weights are random: the figures are speed and memory, never
quality.

Example:
    >>> shape = ARCHITECTURES["qwen2.5-1.5b"]
    >>> shape.hidden_size, shape.layers, shape.with_layers(4).layers
    (1536, 28, 4)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentbench_rl.models.tiny import build_tokenizer
from agentbench_rl.models.vision import qwen25_vl_config, vl_tokenizer

#: Our tokenizer's vocabulary for these models (BPE stops earlier where the text runs out).
TOKENIZER_VOCAB = 8192


@dataclass(frozen=True)
class VisionShape:
    """A Qwen2.5-VL vision tower's sizes."""

    depth: int
    hidden_size: int
    intermediate_size: int
    heads: int
    fullatt_blocks: tuple[int, ...]


@dataclass(frozen=True)
class Architecture:
    """A Qwen2(.5) language model's sizes (and a vision tower's, for a vision-language one)."""

    hidden_size: int
    intermediate_size: int
    layers: int
    heads: int
    kv_heads: int
    vocab_size: int
    tie_embeddings: bool
    vision: VisionShape | None = None
    rope_theta: float = 1e6
    #: Qwen2.5-VL's M-RoPE sections of the rotary half-dimension (temporal, height, width).
    mrope_section: tuple[int, ...] | None = None

    def with_layers(self, layers: int) -> Architecture:
        """The same shape with ``layers`` language-model layers (a 7B that fits a time budget)."""
        return dataclasses.replace(self, layers=layers)

    def text_sizes(self) -> dict[str, Any]:
        """The language model's sizes under transformers' config keys."""
        return {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "max_position_embeddings": 32768,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_embeddings,
        }


#: The shapes of the papers' models, from their published ``config.json``.
ARCHITECTURES: dict[str, Architecture] = {
    "qwen2.5-0.5b": Architecture(896, 4864, 24, 14, 2, 151936, tie_embeddings=True),
    "qwen2.5-1.5b": Architecture(1536, 8960, 28, 12, 2, 151936, tie_embeddings=True),
    "qwen2.5-7b": Architecture(3584, 18944, 28, 28, 4, 152064, tie_embeddings=False),
    "qwen2.5-vl-3b": Architecture(
        2048,
        11008,
        36,
        16,
        2,
        151936,
        tie_embeddings=True,
        vision=VisionShape(32, 1280, 3420, 16, (7, 15, 23, 31)),
        mrope_section=(16, 24, 24),
    ),
}

#: What a rehearsal on a CPU builds in place of every shape (``bench gpu --dry-run``): the same
#: code paths, a few hundred thousand parameters besides the published vocabulary.
REHEARSAL_TEXT = Architecture(64, 128, 2, 4, 2, 151936, tie_embeddings=True)
REHEARSAL_VISION = dataclasses.replace(
    REHEARSAL_TEXT, vision=VisionShape(2, 32, 64, 2, (1,)), mrope_section=None
)


def build_architecture(
    shape: Architecture, texts: Iterable[str], seed: int, dtype: Any, device: str
) -> tuple[Any, Any, Any]:
    """The random-initialised model of ``shape`` (weights drawn from ``seed``, made directly on
    ``device`` in ``dtype``: a 7B never passes through the CPU), our tokenizer trained on
    ``texts``, and the image processor (``None`` for a text model)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    texts = list(texts)
    if shape.vision is None:
        tokenizer = build_tokenizer(texts, TOKENIZER_VOCAB)
        sizes = shape.text_sizes()
        theta = sizes.pop("rope_theta")
        config: Any = Qwen2Config(
            vocab_size=shape.vocab_size,
            **sizes,
            rope_parameters={"rope_type": "default", "rope_theta": theta},
            use_sliding_window=False,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        model_class: Any = Qwen2ForCausalLM
        image_processor = None
    else:
        from transformers import Qwen2_5_VLForConditionalGeneration
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )

        tokenizer = vl_tokenizer(texts, TOKENIZER_VOCAB)
        vision = shape.vision
        config = qwen25_vl_config(
            tokenizer,
            text=shape.text_sizes(),
            vision={
                "depth": vision.depth,
                "hidden_size": vision.hidden_size,
                "intermediate_size": vision.intermediate_size,
                "num_heads": vision.heads,
                "fullatt_block_indexes": list(vision.fullatt_blocks),
            },
            vocab_size=shape.vocab_size,
            mrope_section=shape.mrope_section,
        )
        model_class = Qwen2_5_VLForConditionalGeneration
        image_processor = Qwen2VLImageProcessorPil()
    previous = torch.get_default_dtype()
    torch.manual_seed(seed)
    try:
        torch.set_default_dtype(dtype)
        with torch.device(device):
            model = model_class(config)
    finally:
        torch.set_default_dtype(previous)
    return model, tokenizer, image_processor
