"""What an estimator costs per training iteration on top of the config's own (by default
BiPACE on top of GiGPO).

An estimator's extra work can be (1) hidden states in the rollout's forward passes
(``output_hidden_states``, read at the last prompt token, no second pass: BiPACE declares it
needs them) and (2) its own computation. Both are timed A/B on the same inputs, alternating, so
that load from other processes hits both sides alike (on a shared machine, timing two whole
training runs one after the other measures the neighbours more than the estimators):

- the rollout of one iteration (N x G trajectories, same seed, so the same trajectories) as
  each side's estimator needs it (with hidden states when it declares ``hidden``);
- ``compute(base, batch)`` and ``compute(candidate, batch)`` on that rollout's rows;
- one iteration of the base (rollout, estimator, reference log-probs, PPO update).

The extra cost is the median differences over the base iteration, in percent. Which estimators
are compared is configuration: the base is the config's ``estimator``, the candidate
``--candidate`` (default :data:`DEFAULT_CANDIDATE`).

``--versus MODEL`` measures instead what one iteration of the config costs with its own
model against ``MODEL`` on the same config (and the rows per second of each: the ``drrn``
against the ``tiny`` LM in the same loop) (e.g. ``tiny-vl`` against the text ``tiny`` on visual
Sokoban: the text policy reads the grid only), again alternating A-B, B-A, and how many bytes of
pixel values the iteration's rows hold per row (rows showing one frame share its tensor).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.progress import progress_display
from agentbench_rl.train.config import TrainConfig, load_config

#: Configuration, not logic: the estimator whose extra cost ``bench train`` measures unless
#: ``--candidate`` names another (the question the BiPACE paper's cost claim raises).
DEFAULT_CANDIDATE = "bipace"


def _median_time(function: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def steps(repeats: int) -> int:
    """How many times :func:`measure` calls ``advance``: model, warm-up, A/B rollouts, final
    rollout, estimator pairs, update.

    Example:
        >>> steps(6)
        76
    """
    return 1 + 1 + 2 * repeats + 1 + 10 * repeats + 1


def prepared(
    config: TrainConfig, tick: Callable[[str], None] | None = None, policy: Any = None
) -> tuple[Any, Any, Callable[[bool], Any]]:
    """The policy (``policy`` when given, else its model as built at the start of training on
    the CPU, behaviour cloning included when enabled), the env pool (to close afterwards) and a
    function playing one iteration's rollout (N x G trajectories, always the same seed; with
    hidden states when asked). ``tick(what)`` is called once the model is built."""
    import torch

    from agentbench_rl.core.hashing import seed_from
    from agentbench_rl.rollout.batched import rollout_groups
    from agentbench_rl.train.ppo import initial_policy, make_pool

    config.use_torch_threads()
    if policy is None:
        policy, _ = initial_policy(config, "cpu", None)
    if tick is not None:
        tick("model built (tokenizer, behaviour cloning)")
    pool = make_pool(config)
    tasks = config.train_env().draw_tasks(config.n_tasks, config.seed, what="train_categories")

    def rollout(hidden: bool) -> Any:
        generator = torch.Generator().manual_seed(seed_from(config.seed, "bench") % 2**63)
        return rollout_groups(
            pool,
            policy,
            config.env,
            config.prompt_config(),
            tasks,
            config.group_size,
            config.seed,
            generator,
            capture_hidden=hidden,
        )

    return policy, pool, rollout


def measure(
    config: TrainConfig,
    repeats: int = 6,
    advance: Callable[[str], None] | None = None,
    candidate: str = DEFAULT_CANDIDATE,
    policy: Any = None,
) -> dict[str, float]:
    """Median seconds of each part (see the module docstring) for ``config`` (its model as
    built at the start of training, behaviour cloning included when enabled, or ``policy``
    when given: ``bench gpu``'s published shapes) with its own estimator as the base and
    ``candidate`` on top. ``advance(what)`` is called after each of the :func:`steps` steps (a
    progress bar)."""
    tick = advance or (lambda what: None)
    import torch

    from agentbench_rl.estimators import compute
    from agentbench_rl.rollout.batched import training_rewards
    from agentbench_rl.train.ppo import ppo_update, reference_logprobs

    sides = {"base": config, "candidate": config.model_copy(update={"estimator": candidate})}
    params = {side: side_config.estimator_spec().params for side, side_config in sides.items()}
    hidden = {side: side_config.needs_hidden() for side, side_config in sides.items()}
    policy, pool, rollout = prepared(config, tick, policy)
    try:
        rollout(False)  # warm-up
        tick("warm-up rollout")
        rollout_s: dict[str, list[float]] = {"base": [], "candidate": []}
        for repeat in range(repeats):  # A-B, B-A, ...: both sides see the same load and order
            for side in ("base", "candidate") if repeat % 2 == 0 else ("candidate", "base"):
                seconds = _median_time(lambda: rollout(hidden[side]), 1)  # noqa: B023
                rollout_s[side].append(seconds)
                tick(f"rollouts for {config.estimator} and {candidate}")
        batch = rollout(any(hidden.values()))
        tick("rollout for the estimators")
    finally:
        pool.close()
    rewards = training_rewards(batch, config.reward, config.success_reward)
    step_batch = batch.step_batch(rewards, with_hidden=any(hidden.values()))
    estimator_s: dict[str, list[float]] = {"base": [], "candidate": []}
    for _ in range(10 * repeats):
        for side, side_config in sides.items():
            name = side_config.estimator
            estimator_s[side].append(
                _median_time(lambda: compute(name, step_batch, **params[side]), 1)  # noqa: B023
            )
        tick(f"{config.estimator} and {candidate} on the rollout")
    advantages = compute(config.estimator, step_batch, **params["base"]).advantages
    reference = policy.model  # the update's cost does not depend on which weights it reads
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=config.learning_rate)

    def update() -> None:
        refs = reference_logprobs(reference, batch, policy, config.temperature)
        ppo_update(policy, optimizer, batch, advantages, refs, config, torch.Generator())

    update_s = _median_time(update, 1)
    tick("PPO update")
    results = {"rows": float(len(batch)), "update_s": update_s}
    for side in sides:
        results[f"rollout_{side}_s"] = statistics.median(rollout_s[side])
        results[f"estimator_{side}_s"] = statistics.median(estimator_s[side])
    results["base_iteration_s"] = results["rollout_base_s"] + results["estimator_base_s"] + update_s
    extra = (results["rollout_candidate_s"] - results["rollout_base_s"]) + (
        results["estimator_candidate_s"] - results["estimator_base_s"]
    )
    results["candidate_extra_s"] = extra
    results["candidate_extra_percent"] = 100.0 * extra / results["base_iteration_s"]
    return results


def iteration_timer(config: TrainConfig) -> tuple[Callable[[], tuple[float, int, int]], Any]:
    """A function running one iteration of ``config`` (rollout, its estimator, reference
    log-probs, PPO update; its model as built at the start of training) and returning its
    seconds, rows and the bytes of pixel values its rows hold, and the env pool to close
    afterwards."""
    import torch

    from agentbench_rl.estimators import compute
    from agentbench_rl.models.vision import pixel_bytes
    from agentbench_rl.rollout.batched import training_rewards
    from agentbench_rl.train.ppo import ppo_update, reference_logprobs

    policy, pool, rollout = prepared(config)
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=config.learning_rate)
    params = config.estimator_spec().params

    def iteration() -> tuple[float, int, int]:
        began = time.perf_counter()
        batch = rollout(config.needs_hidden())
        rewards = training_rewards(batch, config.reward, config.success_reward)
        step_batch = batch.step_batch(rewards, with_hidden=config.needs_hidden())
        advantages = compute(config.estimator, step_batch, **params).advantages
        refs = reference_logprobs(policy.model, batch, policy, config.temperature)
        ppo_update(policy, optimizer, batch, advantages, refs, config, torch.Generator())
        return time.perf_counter() - began, len(batch), pixel_bytes(batch.prompt_ids)

    return iteration, pool


def compare_models(config: TrainConfig, other: str, repeats: int = 3) -> dict[str, float]:
    """Median seconds (and rows, and pixel values held per row) of one iteration of ``config``
    with its model and with ``other``, timed alternately; ``ratio`` is the first over the
    second."""
    timers = {
        "model": iteration_timer(config),
        "other": iteration_timer(config.model_copy(update={"model": other})),
    }
    seconds: dict[str, list[float]] = {"model": [], "other": []}
    rows: dict[str, int] = {}
    pixels: dict[str, int] = {}
    try:
        for repeat in range(repeats):
            for side in ("model", "other") if repeat % 2 == 0 else ("other", "model"):
                spent, rows[side], pixels[side] = timers[side][0]()
                seconds[side].append(spent)
    finally:
        for _, pool in timers.values():
            pool.close()
    results = {
        "model_s": statistics.median(seconds["model"]),
        "other_s": statistics.median(seconds["other"]),
        "model_rows": float(rows["model"]),
        "other_rows": float(rows["other"]),
        "model_pixel_kb_per_row": pixels["model"] / 1000 / rows["model"],
        "other_pixel_kb_per_row": pixels["other"] / 1000 / rows["other"],
    }
    results["ratio"] = results["model_s"] / results["other_s"]
    results["rows_per_s_ratio"] = (results["model_rows"] / results["model_s"]) / (
        results["other_rows"] / results["other_s"]
    )
    return results


def run(
    config_path: Path | None,
    overrides: Sequence[str] = (),
    repeats: int = 6,
    console: Console | None = None,
    versus: str | None = None,
    candidate: str | None = None,
) -> dict[str, float]:
    """Measure and print ``candidate``'s extra cost over the config's estimator (with a progress
    bar; ``candidate`` defaults to :data:`DEFAULT_CANDIDATE`), or (``versus``) the cost of its
    model against another model on the same config."""
    config = load_config(config_path, overrides)
    candidate = candidate or DEFAULT_CANDIDATE
    if versus is not None:
        compared = compare_models(config, versus, repeats)
        if console is not None:
            table = Table(
                title=f"One {config.estimator} iteration on {config.env}, median of {repeats}"
            )
            table.add_column("model")
            table.add_column("rows", justify="right")
            table.add_column("seconds", justify="right")
            table.add_column("ms per row", justify="right")
            table.add_column("rows per second", justify="right")
            table.add_column("pixel KB per row", justify="right")
            for name, side in ((config.model, "model"), (versus, "other")):
                rows, spent = compared[f"{side}_rows"], compared[f"{side}_s"]
                table.add_row(
                    name,
                    f"{rows:.0f}",
                    f"{spent:.2f}",
                    f"{1000 * spent / rows:.2f}",
                    f"{rows / spent:.0f}",
                    f"{compared[f'{side}_pixel_kb_per_row']:.1f}",
                )
            console.print(table)
            console.print(
                f"{config.model} / {versus}: {compared['ratio']:.2f}x the time per iteration, "
                f"{compared['rows_per_s_ratio']:.1f}x the rows per second "
                f"(torch threads: {config.torch_threads})"
            )
        return compared
    with progress_display(console) as progress:
        bar = progress.add_task(
            "building the model (tokenizer, behaviour cloning)", total=steps(repeats), every=1
        )

        def advance(what: str) -> None:
            progress.update(bar, advance=1, description=what)

        results = measure(config, repeats, advance, candidate)
    if console is not None:
        base = config.estimator
        table = Table(title=f"{candidate} vs {base}, one iteration of {results['rows']:.0f} rows")
        table.add_column("part")
        table.add_column(f"{base} s", justify="right")
        table.add_column(f"{candidate} s", justify="right")
        for part, digits in (("rollout", 3), ("estimator", 4)):
            table.add_row(
                part,
                f"{results[f'{part}_base_s']:.{digits}f}",
                f"{results[f'{part}_candidate_s']:.{digits}f}",
            )
        table.add_row("update", f"{results['update_s']:.3f}", f"{results['update_s']:.3f}")
        table.add_row(
            "iteration",
            f"{results['base_iteration_s']:.3f}",
            f"{results['base_iteration_s'] + results['candidate_extra_s']:.3f}",
        )
        console.print(table)
        console.print(
            f"{candidate} extra cost: {results['candidate_extra_percent']:+.2f}% per iteration"
        )
    return results
