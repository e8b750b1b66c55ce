"""The ``tiny`` model: a few-million-parameter Qwen2 and a BPE tokenizer trained on the env's text.

Everything is built on the spot, so the whole training loop runs on a CPU with nothing
downloaded. The tokenizer is byte-level BPE whose merges stay inside lower-case words: every
other character (grid symbols, digits, punctuation, capitals) is its own pre-token, so a Sokoban
row of six cells is six tokens and the model sees the grid's columns at fixed offsets. The answer
tags (``<think>``, ``<action>`` and their closing tags) are one token each.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from agentbench_rl.agents.prompting import (
    ACTION_MODES,
    HistoryStep,
    PromptConfig,
    build_prompt,
    expert_response,
    response_prefix,
)
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs import env_class, make
from agentbench_rl.train.config import TinyModelConfig

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
# The answer format's tags are one token each, so a choose-mode answer "up</action>" is two
# tokens and PPO's token-mean is not spread over the pieces of a tag.
TAG_TOKENS = ("<think>", "</think>", "<action>", "</action>")
#: Bumped when the tokenizer's construction changes (cached BC results depend on it).
TOKENIZER_VERSION = 2
# Lower-case words, runs of whitespace, or any other single character.
PRE_TOKEN_PATTERN = r"[a-z]+|\s+|[^a-z\s]"


def train_task_ids(
    env_name: str, split: str, count: int, seed: int, categories: Sequence[str] = ()
) -> list[str]:
    """``count`` task ids of a split: ``train-<n>`` drawn from ``seed`` for Sokoban's unbounded
    train split, else a seeded draw from the fixed list (cycled when it is shorter), restricted
    to the tasks of ``categories`` (the env's ``category()``, such as ``depth-1``) when given."""
    cls = env_class(env_name)
    rng = random.Random(seed)
    try:
        ids = cls.task_ids(split)
    except ValueError:  # unbounded split: ids are <split>-<n>
        if categories:
            raise ValueError(
                f"train_categories: {env_name}'s split '{split}' has no fixed task list"
            ) from None
        return [f"{split}-{rng.randrange(2**31)}" for _ in range(count)]
    if categories:
        known = cls.task_categories(split)
        if known is None:
            raise ValueError(f"train_categories: {env_name} cannot tell its tasks' categories")
        wanted = set(categories)
        ids = [task for task in ids if known.get(task) in wanted]
        if not ids:
            raise ValueError(f"train_categories: no task of split '{split}' is in {categories}")
    return [ids[rng.randrange(len(ids))] for _ in range(count)]


def corpus_texts(
    env_name: str,
    env_kwargs: dict[str, Any],
    prompt: PromptConfig,
    episodes: int,
    seed: int,
    split: str = "train",
) -> Iterator[str]:
    """Prompts and answers from expert and random episodes (half each), in both action modes:
    the text the tokenizer is trained on."""
    env = make(env_name, split=split, **env_kwargs)
    rng = random.Random(seed)
    for index, task in enumerate(train_task_ids(env_name, split, episodes, seed)):
        use_expert = index % 2 == 0
        observation, info = env.reset(seed=seed_from(seed, task) % 2**31, options={"task_id": task})
        history: list[HistoryStep] = []
        done = False
        while not done:
            actions = list(info["admissible_actions"])
            action = env.expert_action() if use_expert else rng.choice(actions or [""])
            for mode in ACTION_MODES:
                config = PromptConfig(
                    history=prompt.history,
                    history_observations=prompt.history_observations,
                    mode=mode,  # type: ignore[arg-type]
                    instruction=prompt.instruction,
                )
                text = build_prompt(env_name, observation, history, actions, config)
                yield text + "\n" + response_prefix(config.mode) + expert_response(action, mode)  # type: ignore[arg-type]
            history.append(HistoryStep(str(observation), action))
            observation, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated


def build_tokenizer(texts: Iterator[str], vocab_size: int) -> Any:
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


def build_tiny(
    env_name: str,
    env_kwargs: dict[str, Any],
    prompt: PromptConfig,
    config: TinyModelConfig,
    seed: int,
    split: str = "train",
) -> tuple[Any, Any]:
    """The tiny model and its tokenizer for one env (tokenizer trained on that env's text)."""
    texts = corpus_texts(
        env_name, env_kwargs, prompt, config.tokenizer_episodes, seed_from(seed, "tok"), split
    )
    tokenizer = build_tokenizer(texts, config.vocab_size)
    return build_tiny_model(tokenizer, config, seed_from(seed, "init") % 2**31), tokenizer
