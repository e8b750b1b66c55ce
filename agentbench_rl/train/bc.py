"""Behaviour cloning: warm the policy up on the expert's trajectories before RL.

The rows are built with the same prompt builder and the same history as the RL rollouts, and the
target is the answer the policy would give for the expert's action in its action mode
(``up</action>`` after the ``<action>`` prefix in ``choose`` mode; ``<think></think><action>up
</action>`` and end-of-text in ``generate`` mode). The loss (``bc.loss``) is the token-mean
negative log-likelihood of those answer tokens, or in ``choose`` mode optionally (``choice``)
the row-mean negative log-probability of the expert's action under the policy itself: the
softmax of the admissible actions' scores, as acting and PPO read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.models.policy import Policy, choice_logprobs, pack, response_logprobs
from agentbench_rl.prompting import PromptConfig, action_choices, build_prompt, expert_response
from agentbench_rl.rollout.episode import Episode
from agentbench_rl.rollout.scripted import scripted_steps
from agentbench_rl.train.config import BCConfig


@dataclass(frozen=True)
class ExpertRow:
    """One expert step: the prompt text, the expert's canonical action and the actions the
    prompt offered (``choose`` mode's choice set; the expert's action is among them)."""

    prompt: str
    action: str
    choices: tuple[str, ...] = ()


def expert_rows(env: EnvSpec, prompt: PromptConfig, episodes: int, seed: int) -> list[ExpertRow]:
    """The steps of ``episodes`` expert episodes on tasks of ``env`` (its split, of its
    categories when given) drawn from ``seed``, played through the episode driver (so the
    prompts show the history training shows)."""
    tasks = env.draw_tasks(episodes, seed, what="train_categories")
    rows = []
    for episode, action in scripted_steps(env, tasks, seed, lambda index: _expert):
        choices = tuple(action_choices(episode.info, prompt.mode))
        text = build_prompt(env.name, episode.observation, episode.history, choices, prompt)
        rows.append(ExpertRow(text, action, choices))
    return rows


def _expert(env: TextAgentEnv[Any], episode: Episode) -> str:
    return env.expert_action()


def target_ids(policy: Policy, action: str) -> list[int]:
    """The answer tokens behaviour cloning trains for ``action``."""
    text = expert_response(action, policy.prompt.mode)
    ids: list[int] = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    if policy.prompt.mode == "generate":
        ids.append(int(policy.tokenizer.eos_token_id))
    return ids


def behaviour_cloning(
    policy: Policy,
    rows: list[ExpertRow],
    config: BCConfig,
    seed: int,
    forward_batch_size: int,
    on_step: Callable[[int, int], None] | None = None,
) -> dict[str, float]:
    """Train ``policy.model`` on ``rows`` with Adam; returns the last epoch's mean loss.

    ``on_step(done, total)`` is called after every optimiser step (the progress bar).
    """
    model = policy.model
    device = policy.device
    prompts = [policy.encode_prompt(row.prompt) for row in rows]
    by_choice = config.loss == "choice"
    if by_choice:
        choices = [[policy.encode_choice(a) for a in row.choices] for row in rows]
        chosen = [_chosen(row) for row in rows]
    else:
        targets = [target_ids(policy, row.action) for row in rows]
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    generator = torch.Generator().manual_seed(seed_from(seed, "bc") % 2**63)
    steps_per_epoch = (len(rows) + config.batch_size - 1) // config.batch_size
    total = steps_per_epoch * config.epochs
    model.train()
    epoch_loss = 0.0
    for epoch in range(config.epochs):
        order = torch.randperm(len(rows), generator=generator).tolist()
        losses = []
        for step in range(steps_per_epoch):
            batch = order[step * config.batch_size : (step + 1) * config.batch_size]
            # the loss is a mean over the batch's rows (choice) or answer tokens (tokens)
            count = len(batch) if by_choice else sum(len(targets[i]) for i in batch)
            optimizer.zero_grad()
            batch_loss = 0.0
            for start in range(0, len(batch), forward_batch_size):
                chunk = batch[start : start + forward_batch_size]
                chunk_prompts = [prompts[i] for i in chunk]
                if by_choice:
                    logprobs, _ = choice_logprobs(
                        model,
                        chunk_prompts,
                        [choices[i] for i in chunk],
                        [chosen[i] for i in chunk],
                        policy.pad_id,
                    )
                    loss = -logprobs.sum() / count
                else:
                    packed = pack(chunk_prompts, [targets[i] for i in chunk], policy.pad_id, device)
                    logprobs, _ = response_logprobs(model, packed)
                    loss = -(logprobs * packed.response_mask).sum() / count
                loss.backward()
                batch_loss += float(loss.detach())
            optimizer.step()
            losses.append(batch_loss)
            if on_step is not None:
                on_step(epoch * steps_per_epoch + step + 1, total)
        epoch_loss = sum(losses) / max(1, len(losses))
    model.eval()
    return {"bc/loss": epoch_loss, "bc/rows": float(len(rows))}


def _chosen(row: ExpertRow) -> int:
    """The expert's action's place among the row's choices."""
    try:
        return row.choices.index(row.action)
    except ValueError:
        raise ValueError(
            f"bc.loss 'choice': the expert's action {row.action!r} is not among the "
            f"{len(row.choices)} admissible actions of its step"
        ) from None
