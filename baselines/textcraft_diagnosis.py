"""Cheap numbers on why a TextCraft training config does or does not learn (issue #18).

Without a model (seconds): for the train split's goals of the config's ``train_categories``, the
expert's episode length by depth, the share of the expert's steps whose prompt no longer shows
the goal line (the recipes and the goal are only in the reset observation, so a short
``history`` loses them), the admissible-action count, and the success of a policy uniform over
the admissible actions on the validation goals (the bar a trained policy must clear).

With ``--policy`` (minutes): the config's start (behaviour cloning, cached in ``bc.cache_dir``)
plays one training iteration (N tasks x G trajectories, as the trainer draws them) and reports
success by depth, the share of groups whose trajectories all succeeded or all failed (their
advantages are 0 under GRPO), prompt length in tokens and the CPU seconds spent.

    python baselines/textcraft_diagnosis.py baselines/textcraft-tiny-cpu.yaml
    python baselines/textcraft_diagnosis.py baselines/textcraft-tiny-cpu.yaml history=2
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

import numpy as np
import torch

from agentbench_rl.envs.textcraft.env import TextCraftEnv
from agentbench_rl.prompting import HistoryStep, build_prompt
from agentbench_rl.train import ppo
from agentbench_rl.train.config import TrainConfig, load_config


def _goals(split: str, categories: list[str]) -> list[str]:
    known = TextCraftEnv.task_categories(split)
    return [t for t in TextCraftEnv.task_ids(split) if not categories or known[t] in categories]


def expert_numbers(config: TrainConfig) -> dict[str, float]:
    """Expert episode length by depth, the share of its steps whose prompt lacks the goal line,
    and the admissible actions per step, on the train goals of ``train_categories``."""
    env = TextCraftEnv(split=config.train_split, max_steps=config.max_steps)
    lengths: dict[str, list[int]] = collections.defaultdict(list)
    hidden = steps = 0
    actions = []
    for task in _goals(config.train_split, config.train_categories):
        observation, _ = env.reset(options={"task_id": task})
        goal = observation.splitlines()[-1]
        history: list[HistoryStep] = []
        while True:
            admissible = env.admissible_actions()
            actions.append(len(admissible))
            prompt = build_prompt(
                "textcraft", observation, history, admissible, config.prompt_config()
            )
            hidden += goal not in prompt
            steps += 1
            action = env.expert_action()
            history.append(HistoryStep(observation, action))
            observation, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        lengths[env.category()].append(len(history))
    numbers = {f"expert_steps/{k}": float(np.mean(v)) for k, v in sorted(lengths.items())}
    numbers["expert_rows_without_goal"] = hidden / steps
    numbers["admissible_mean"] = float(np.mean(actions))
    return numbers


def uniform_success(config: TrainConfig, draws: int = 8, seed: int = 0) -> dict[str, float]:
    """Success of a policy uniform over the admissible actions on the validation goals."""
    env = TextCraftEnv(split=config.val_split, max_steps=config.max_steps)
    rng = np.random.default_rng(seed)
    won: dict[str, list[bool]] = collections.defaultdict(list)
    for task in _goals(config.val_split, config.val_categories):
        for _ in range(draws):
            env.reset(options={"task_id": task})
            while True:
                admissible = env.admissible_actions()
                _, _, terminated, truncated, _ = env.step(admissible[rng.integers(len(admissible))])
                if terminated or truncated:
                    break
            won[env.category()].append(env.won())
    numbers = {f"uniform_success/{k}": float(np.mean(v)) for k, v in sorted(won.items())}
    numbers["uniform_success/all"] = float(np.mean([w for v in won.values() for w in v]))
    return numbers


def policy_numbers(config: TrainConfig, iteration: int = 1) -> dict[str, float]:
    """The config's start playing one training iteration: success by depth, uniform groups,
    prompt tokens and CPU seconds (of the warm start when not cached, and of the rollout)."""
    torch.set_num_threads(max(1, config.torch_threads))
    began = time.process_time()
    policy, stats = ppo.initial_policy(config, "cpu", None)
    warm = time.process_time() - began
    pool = ppo.make_pool(config)
    try:
        began = time.process_time()
        rollout = ppo.iteration_rollout(pool, policy, config, iteration, False)
        rolled = time.process_time() - began
    finally:
        pool.close()
    depth = TextCraftEnv.task_categories(config.train_split)
    won: dict[str, list[bool]] = collections.defaultdict(list)
    for episode in rollout.episodes:
        won[depth[episode["task_id"]]].append(bool(episode["success"]))
    numbers = {**stats, "start_cpu_s": warm, "rollout_cpu_s": rolled}
    numbers.update({f"success/{k}": float(np.mean(v)) for k, v in sorted(won.items())})
    numbers.update(ppo.rollout_metrics(rollout))
    numbers["prompt_tokens_mean"] = float(np.mean([len(p) for p in rollout.prompt_ids]))
    return numbers


def main() -> None:
    """Print the numbers of a config (a sweep file's ``base`` or a train config)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("overrides", nargs="*", help="key=value, as train --config takes")
    parser.add_argument("--policy", action="store_true", help="also play the config's start")
    args = parser.parse_args()
    config = load_config(args.config, args.overrides)
    config.check()
    numbers = {**expert_numbers(config), **uniform_success(config)}
    if args.policy:
        numbers.update(policy_numbers(config))
    for key, value in numbers.items():
        print(f"{key:32s} {value:.3f}")


if __name__ == "__main__":
    main()
