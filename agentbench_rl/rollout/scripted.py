"""Scripted episodes: the expert's (and a seeded random player's) episodes on training tasks,
played through the episode driver, for behaviour cloning and the tiny tokenizer's corpus.

Both read the same history and prompt text the policy reads in training (the driver's history,
observation text rather than ``str()`` of an image observation), so a tokenizer and a warm start
are built from exactly the text the policy will see.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs import env_class, make, tasks_of_categories
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.prompting import (
    ACTION_MODES,
    PromptConfig,
    build_prompt,
    expert_response,
    response_prefix,
)
from agentbench_rl.rollout.episode import Episode, EpisodeSlot, Lockstep, episode_seed

#: Chooses a step's action from the env (its expert) and the episode (what the agent sees).
Chooser = Callable[[TextAgentEnv[Any], Episode], str]


def train_task_ids(
    env_name: str, split: str, count: int, seed: int, categories: Sequence[str] = ()
) -> list[str]:
    """``count`` task ids of a split: ``train-<n>`` drawn from ``seed`` for Sokoban's unbounded
    train split, else a seeded draw from the fixed list (cycled when it is shorter), restricted
    to the tasks of ``categories`` (the env's ``task_categories``, such as ``depth-1``) when given.

    Example:
        >>> len(train_task_ids("sokoban", "train", 2, seed=0))
        2
    """
    cls = env_class(env_name)
    rng = random.Random(seed)
    try:
        ids = cls.task_ids(split)
    except ValueError:  # unbounded split: ids are <split>-<n>
        tasks_in_categories(env_name, split, None, categories)  # refuses categories
        return [f"{split}-{rng.randrange(2**31)}" for _ in range(count)]
    ids = tasks_in_categories(env_name, split, ids, categories)
    return [ids[rng.randrange(len(ids))] for _ in range(count)]


def tasks_in_categories(
    env_name: str, split: str, ids: Sequence[str] | None, categories: Sequence[str]
) -> list[str]:
    """The ids (``None``: a split without a fixed task list) whose category is one of
    ``categories`` (all of them when none is given), in order; ``ValueError`` naming
    ``train_categories`` when the split cannot be filtered or nothing is left.

    Example:
        >>> tasks_in_categories("sokoban", "test", ["test-0000", "test-0001"], [])
        ['test-0000', 'test-0001']
    """
    if not categories:
        return list(ids or [])
    if ids is None:
        raise ValueError(f"train_categories: {env_name}'s split '{split}' has no fixed task list")
    known = env_class(env_name).task_categories(split)
    if known is None:
        raise ValueError(f"train_categories: {env_name} cannot tell its tasks' categories")
    return tasks_of_categories(known, ids, categories, "train_categories", split)


def scripted_steps(
    env_name: str,
    env_kwargs: dict[str, Any],
    tasks: list[str],
    seed: int,
    choose: Callable[[int], Chooser],
    split: str = "train",
) -> Iterator[tuple[Episode, str]]:
    """Play one episode per task through the driver, ``choose(index)`` picking episode
    ``index``'s actions; yields (the live episode, the action about to be taken) before every
    step, so the episode shows what the agent sees at that step.

    Example:
        >>> expert = lambda index: lambda env, episode: env.expert_action()
        >>> [action for _, action in scripted_steps("sokoban", {}, ["test-0000"], 0, expert,
        ...                                         split="test")]
        ['left', 'left', 'up']
    """
    env = make(env_name, split=split, **env_kwargs)
    for index, task in enumerate(tasks):
        chooser = choose(index)
        lock = Lockstep.of_envs([env], [EpisodeSlot(task, episode_seed(seed, task))])
        episode = lock.episodes[0]
        while lock.live:
            action = chooser(env, episode)
            yield episode, action
            lock.step([action])


def expert_or_random(seed: int) -> Callable[[int], Chooser]:
    """Even episodes: the expert; odd ones: uniform over the admissible actions, one stream of
    draws from ``seed`` for the whole corpus."""
    rng = random.Random(seed)

    def choose(index: int) -> Chooser:
        if index % 2 == 0:
            return lambda env, episode: env.expert_action()
        return lambda env, episode: rng.choice(list(episode.info["admissible_actions"]) or [""])

    return choose


def tokenizer_texts(
    env_name: str,
    env_kwargs: dict[str, Any],
    prompt: PromptConfig,
    episodes: int,
    seed: int,
    split: str = "train",
) -> Iterator[str]:
    """The text a tiny model's tokenizer is trained on (``models.tiny.build_tiny``):
    :func:`corpus_texts` of ``episodes`` episodes drawn from ``seed``."""
    return corpus_texts(env_name, env_kwargs, prompt, episodes, seed_from(seed, "tok"), split)


def corpus_texts(
    env_name: str,
    env_kwargs: dict[str, Any],
    prompt: PromptConfig,
    episodes: int,
    seed: int,
    split: str = "train",
) -> Iterator[str]:
    """Prompts and answers from expert and random episodes (half each), in both action modes:
    the text the tokenizer is trained on.

    Example:
        >>> texts = list(corpus_texts("visual_sokoban", {}, PromptConfig(), 1, 0, split="test"))
        >>> any("array(" in text or "[[" in text for text in texts)  # never str() of the image
        False
    """
    tasks = train_task_ids(env_name, split, episodes, seed)
    for episode, action in scripted_steps(
        env_name, env_kwargs, tasks, seed, expert_or_random(seed), split
    ):
        actions = list(episode.info["admissible_actions"])
        for mode in ACTION_MODES:
            config = PromptConfig(
                history=prompt.history,
                history_observations=prompt.history_observations,
                mode=mode,  # type: ignore[arg-type]
                instruction=prompt.instruction,
            )
            text = build_prompt(env_name, episode.observation, episode.history, actions, config)
            yield text + "\n" + response_prefix(config.mode) + expert_response(action, mode)  # type: ignore[arg-type]
