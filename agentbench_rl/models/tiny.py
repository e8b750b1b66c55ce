"""The ``tiny`` model: a few-million-parameter Qwen2 and a BPE tokenizer trained on texts it is
handed (the env's own prompts and answers, which its caller plays:
:func:`agentbench_rl.rollout.scripted.tokenizer_texts`; a model builder plays no episode).

Everything is built on the spot, so the whole training loop runs on a CPU with nothing
downloaded. The tokenizer is byte-level BPE whose merges stay inside lower-case words: every
other character (grid symbols, digits, punctuation, capitals) is its own pre-token, so a Sokoban
row of six cells is six tokens and the model sees the grid's columns at fixed offsets. The answer
tags (``<think>``, ``<action>`` and their closing tags) are one token each.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import Field, model_validator

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.spec.typed import Spec, Whole

#: A size of the architecture: a whole number >= 1.
Size = Annotated[Whole, Field(ge=1)]


class TinyModelConfig(Spec):
    """The ``tiny`` model: a random-initialised Qwen2-architecture causal LM and a byte-level
    BPE tokenizer trained on the env's own text at start-up."""

    hidden_size: Size = 128
    layers: Size = 2
    heads: Size = 4
    kv_heads: Size = 2
    intermediate_size: Size = 256
    vocab_size: Size = 512
    max_positions: Size = 1024
    tokenizer_episodes: Size = 200  # expert and random episodes whose text trains the tokenizer

    @model_validator(mode="after")
    def _buildable(self) -> TinyModelConfig:
        _check_widths(self, [("hidden_size", "heads")])
        return self


class TinyVLConfig(Spec):
    """The ``tiny-vl`` model: a random-initialised Qwen2.5-VL (small vision tower, small
    language model) and the ``tiny`` byte-level BPE tokenizer plus the vision tokens."""

    hidden_size: Size = 64
    layers: Size = 2
    heads: Size = 4
    kv_heads: Size = 2
    intermediate_size: Size = 128
    vision_depth: Size = 2
    vision_hidden_size: Size = 32
    vision_heads: Size = 2
    vision_intermediate_size: Size = 64
    vocab_size: Size = 512
    tokenizer_episodes: Size = 100

    @model_validator(mode="after")
    def _buildable(self) -> TinyVLConfig:
        _check_widths(self, [("hidden_size", "heads"), ("vision_hidden_size", "vision_heads")])
        return self


def _check_widths(config: Any, widths: list[tuple[str, str]]) -> None:
    """Each width split into heads of an even size (rotary embeddings rotate pairs); the
    attention heads a multiple of the key-value heads."""
    for width, heads in widths:
        size, count = getattr(config, width), getattr(config, heads)
        if size % count or (size // count) % 2:
            raise ValueError(
                f"{width} {size} must split into {heads} {count} heads of an even size"
            )
    if config.heads % config.kv_heads:
        raise ValueError(f"heads {config.heads} must be a multiple of kv_heads {config.kv_heads}")


EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
# The answer format's tags are one token each, so a choose-mode answer "up</action>" is two
# tokens and PPO's token-mean is not spread over the pieces of a tag.
TAG_TOKENS = ("<think>", "</think>", "<action>", "</action>")
#: Bumped when the tokenizer's construction changes (cached BC results depend on it). 3: the
#: corpus's history shows the observation text and canonical actions (visual Sokoban read the
#: image array's repr before).
TOKENIZER_VERSION = 3
# Lower-case words, runs of whitespace, or any other single character.
PRE_TOKEN_PATTERN = r"[a-z]+|\s+|[^a-z\s]"


def build_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """Train a byte-level BPE tokenizer on ``texts``; returns a ``PreTrainedTokenizerFast``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.add_tokens(list(TAG_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN
    )


def build_tiny_model(tokenizer: Any, config: TinyModelConfig, seed: int) -> Any:
    """A random-initialised ``Qwen2ForCausalLM`` sized by ``config`` (weights drawn from
    ``seed``), with tied input and output embeddings."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.kv_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        use_sliding_window=False,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(model_config)
    return model


def build_tiny(texts: Iterable[str], config: TinyModelConfig, seed: int) -> tuple[Any, Any]:
    """The tiny model and its tokenizer, the tokenizer trained on ``texts``."""
    tokenizer = build_tokenizer(texts, config.vocab_size)
    return build_tiny_model(tokenizer, config, seed_from(seed, "init") % 2**31), tokenizer
