"""Scripted episodes: the expert's (and a seeded random player's) episodes on training tasks,
played through the episode driver, for behaviour cloning and the tiny tokenizer's corpus.

Both read the same history and prompt text the policy reads in training (the driver's history,
observation text rather than ``str()`` of an image observation), so a tokenizer and a warm start
are built from exactly the text the policy will see.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.prompting import (
    ACTION_MODES,
    PromptConfig,
    action_choices,
    build_prompt,
    expert_response,
    response_prefix,
)
from agentbench_rl.rollout.episode import Episode, EpisodeSlot, Lockstep, episode_seed

#: Chooses a step's action from the env (its expert) and the episode (what the agent sees).
Chooser = Callable[[TextAgentEnv[Any], Episode], str]


def scripted_steps(
    env: EnvSpec, tasks: list[str], seed: int, choose: Callable[[int], Chooser]
) -> Iterator[tuple[Episode, str]]:
    """Play one episode per task of ``env`` through the driver, ``choose(index)`` picking
    episode ``index``'s actions; yields (the live episode, the action about to be taken) before
    every step, so the episode shows what the agent sees at that step.

    Example:
        >>> expert = lambda index: lambda env, episode: env.expert_action()
        >>> test = EnvSpec(name="sokoban", split="test")
        >>> [action for _, action in scripted_steps(test, ["test-0000"], 0, expert)]
        ['left', 'left', 'up']
    """
    made = env.make()
    for index, task in enumerate(tasks):
        chooser = choose(index)
        lock = Lockstep.of_envs([made], [EpisodeSlot(task, episode_seed(seed, task))])
        episode = lock.episodes[0]
        while lock.live:
            action = chooser(made, episode)
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


def tokenizer_texts(env: EnvSpec, prompt: PromptConfig, episodes: int, seed: int) -> Iterator[str]:
    """The text a tiny model's tokenizer is trained on (``models.tiny.build_tiny``):
    :func:`corpus_texts` of ``episodes`` episodes drawn from ``seed``."""
    return corpus_texts(env, prompt, episodes, seed_from(seed, "tok"))


def corpus_texts(env: EnvSpec, prompt: PromptConfig, episodes: int, seed: int) -> Iterator[str]:
    """Prompts and answers from expert and random episodes (half each) on tasks of every
    category of ``env``'s split, in both action modes: the text the tokenizer is trained on.
    (Every category: a tokenizer reads the env's whole language, and one built before runs
    could name categories stays the one their identity names.)

    Example:
        >>> test = EnvSpec(name="visual_sokoban", split="test")
        >>> texts = list(corpus_texts(test, PromptConfig(), 1, 0))
        >>> any("array(" in text or "[[" in text for text in texts)  # never str() of the image
        False
    """
    every_category = env.model_copy(update={"categories": ()})
    tasks = every_category.draw_tasks(episodes, seed)
    for episode, action in scripted_steps(every_category, tasks, seed, expert_or_random(seed)):
        for mode in ACTION_MODES:
            config = PromptConfig(
                history=prompt.history,
                history_observations=prompt.history_observations,
                mode=mode,  # type: ignore[arg-type]
                instruction=prompt.instruction,
            )
            actions = action_choices(episode.info, config.mode)
            text = build_prompt(env.name, episode.observation, episode.history, actions, config)
            yield text + "\n" + response_prefix(config.mode) + expert_response(action, mode)  # type: ignore[arg-type]
