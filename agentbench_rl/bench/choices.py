"""``choose`` mode's scoring on the CPU, three ways on the same rows: in groups of equal
prompt length (what :func:`~agentbench_rl.models.policy.score_choices` does there), as one
left-padded batch (what it does on an accelerator) and one row at a time, on prompts of the
env's test tasks.

Row ``k`` plays ``k mod 8`` random admissible actions before its prompt is taken, so the
prompts carry histories of different lengths, as a batch of a run's prompts does. Each side runs
``repeats`` times, alternating, and reports its median after one warm-up; the table also gives
the largest difference between the groups' scores and the padded batch's (the same sums in
another order).
"""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.bench.timing import alternate

if TYPE_CHECKING:
    from agentbench_rl.prompting import Prompt


def _prompts(policy: Any, env_name: str, rows: int) -> tuple[list[Prompt], list[list[str]]]:
    from agentbench_rl.envs import env_class, make
    from agentbench_rl.prompting import HistoryStep, action_choices, build_prompt

    env = make(env_name, split="test")
    ids = env_class(env_name).task_ids("test")
    walk = random.Random(0)
    prompts, admissible = [], []
    for k in range(rows):
        observation, info = env.reset(options={"task_id": ids[k % len(ids)]})
        history: list[HistoryStep] = []
        for _ in range(k % 8):
            action = walk.choice(action_choices(info, "choose"))
            history.append(HistoryStep(observation, action))
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                observation, info = env.reset(options={"task_id": ids[k % len(ids)]})
                history.clear()
        choices = action_choices(info, "choose")
        prompts.append(build_prompt(env_name, observation, history, choices, policy.prompt))
        admissible.append(choices)
    return prompts, admissible


def run(
    console: Console,
    model: Path | None = None,
    env: str = "textcraft",
    rows: int = 64,
    repeats: int = 3,
) -> dict[str, float]:
    """Time the three ways of scoring one batch and print the table; returns the figures."""
    import torch

    from agentbench_rl.bench.engines import bench_policy
    from agentbench_rl.models.policy import score_choices, score_padded_batch

    policy = bench_policy(model, "choose")
    prompts, admissible = _prompts(policy, env, rows)
    prompt_ids = [policy.encode_prompt(text) for text in prompts]
    choices = [[policy.encode_choice(a) for a in actions] for actions in admissible]

    def one_by_one() -> Any:
        return [
            score_padded_batch(policy.model, [ids], [options], policy.pad_id, 1.0, False)
            for ids, options in zip(prompt_ids, choices, strict=True)
        ]

    sides = {
        "equal-length groups": lambda: score_choices(
            policy.model, prompt_ids, choices, policy.pad_id
        ),
        "one padded batch": lambda: score_padded_batch(
            policy.model, prompt_ids, choices, policy.pad_id, 1.0, False
        ),
        "one row at a time": one_by_one,
    }
    with torch.no_grad():
        runs = alternate(sides, repeats)
    figures = {name: statistics.median(s for s, _ in timed) for name, timed in runs.items()}
    answers = {name: timed[-1][1] for name, timed in runs.items()}
    figures["speedup_over_batch"] = figures["one padded batch"] / figures["equal-length groups"]
    figures["speedup_over_rows"] = figures["one row at a time"] / figures["equal-length groups"]
    figures["max_score_difference"] = float(
        (answers["equal-length groups"].scores - answers["one padded batch"].scores).abs().max()
    )
    lengths = [len(ids) for ids in prompt_ids]
    table = Table(
        title=f"choose mode, {rows} {env} prompts ({min(lengths)} to {max(lengths)} tokens)"
    )
    table.add_column("scoring")
    table.add_column("seconds", justify="right")
    for name in sides:
        table.add_row(name, f"{figures[name]:.2f}")
    table.add_row("groups' speedup over the batch", f"{figures['speedup_over_batch']:.2f}x")
    table.add_row("groups' speedup over single rows", f"{figures['speedup_over_rows']:.2f}x")
    console.print(table)
    console.print(
        f"{sum(map(len, choices))} (row, action) pairs; median of {repeats} alternating runs "
        f"each, after one warm-up; largest score difference "
        f"{figures['max_score_difference']:.1e}; torch threads {torch.get_num_threads()}",
        highlight=False,
    )
    return figures
