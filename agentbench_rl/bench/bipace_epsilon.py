"""How BiPACE's ε groups the rows of real rollouts: cluster purity and singletons per ε.

BiPACE clusters a group's rows by the cosine of the policy's hidden states (``1 − cos ≤ ε``
joins a cluster). Whether a cluster means "the same state" depends on ε and on the model, so
before any claim about BiPACE on a model, ε is chosen on that model's own rollouts:

- **purity**: the share of clusters whose rows all show one grid (one ``state_key``); the share
  among clusters of two or more rows is given too, since a singleton is pure by definition;
- **singleton rate**: the share of rows alone in their cluster (their step advantage is 0);
- **split rate**: the share of (group, state) sets of two or more rows spread over more than one
  cluster (a state BiPACE fails to recognise as one);
- for reference, GiGPO's singleton rate: rows alone in their exact (group, state) set.

Too small an ε splits one state by prompt details (the action history in the prompt changes
the hidden state) and leaves most rows singletons; too large an ε merges different grids.

The rollouts are those the training run would make at iterations 1 .. ``batches`` (same task
draws, env seeds and sampler), from the config's start (behaviour cloning included).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from agentbench_rl.core.batch import StepBatch, factorize
from agentbench_rl.estimators import resolve
from agentbench_rl.estimators.bipace import check_hidden, cluster_rows
from agentbench_rl.estimators.common import combine_codes
from agentbench_rl.train.config import TrainConfig, load_config

EPSILONS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def cluster_counts(batch: StepBatch, clusters: np.ndarray) -> dict[str, int]:
    """The counts behind purity, singleton and split rates for one clustering of ``batch``.

    ``clusters`` gives each row's cluster code (codes are global: clusters never span groups).

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": k, "t": 0, "reward": 0.0, "obs_key": s, "state_key": s,
        ...      "action_key": "a", "valid": True} for k, s in enumerate("AAAB")])
        >>> counts = cluster_counts(batch, np.array([0, 0, 1, 1]))
        >>> [counts[k] for k in ("clusters", "pure_clusters", "singleton_rows")]
        [2, 1, 0]
        >>> [counts[k] for k in ("state_sets", "split_state_sets", "exact_singleton_rows")]
        [1, 1, 1]
    """
    states, _ = factorize(batch.state_key)
    clusters = np.asarray(clusters, dtype=np.int64)
    _, cluster_index, sizes = np.unique(clusters, return_inverse=True, return_counts=True)
    # a cluster is pure when it holds one distinct state
    pairs = np.unique(np.stack([cluster_index, states]), axis=1)
    states_per_cluster = np.bincount(pairs[0], minlength=len(sizes))
    pure = states_per_cluster == 1
    multi = sizes >= 2
    # (group, state) sets and how many clusters each spreads over
    state_sets, n_sets = combine_codes(batch.group_codes, states)
    set_sizes = np.bincount(state_sets, minlength=n_sets)
    spread = np.unique(np.stack([state_sets, cluster_index]), axis=1)
    clusters_per_set = np.bincount(spread[0], minlength=n_sets)
    return {
        "rows": len(batch),
        "clusters": len(sizes),
        "pure_clusters": int(pure.sum()),
        "multi_clusters": int(multi.sum()),
        "pure_multi_clusters": int((pure & multi).sum()),
        "singleton_rows": int((sizes == 1).sum()),
        "state_sets": int((set_sizes >= 2).sum()),
        "split_state_sets": int(((set_sizes >= 2) & (clusters_per_set > 1)).sum()),
        "exact_singleton_rows": int((set_sizes == 1).sum()),
    }


def rates(counts: dict[str, int]) -> dict[str, float]:
    """Purity, singleton, split and GiGPO-singleton rates from (summed) :func:`cluster_counts`.

    Example:
        >>> rates({"rows": 4, "clusters": 2, "pure_clusters": 1, "multi_clusters": 2,
        ...        "pure_multi_clusters": 1, "singleton_rows": 0, "state_sets": 1,
        ...        "split_state_sets": 1, "exact_singleton_rows": 1})["purity"]
        0.5
    """

    def share(part: str, whole: str) -> float:
        return counts[part] / counts[whole] if counts[whole] else float("nan")

    return {
        "purity": share("pure_clusters", "clusters"),
        "purity_multi": share("pure_multi_clusters", "multi_clusters"),
        "singleton_rate": share("singleton_rows", "rows"),
        "split_rate": share("split_state_sets", "state_sets"),
        "gigpo_singleton_rate": share("exact_singleton_rows", "rows"),
        "rows_per_cluster": share("rows", "clusters"),
    }


def rollout_batches(config: TrainConfig, batches: int) -> list[StepBatch]:
    """The step batches (hidden states included) of iterations 1 .. ``batches`` of a run of
    ``config`` that never updates its start policy."""

    from agentbench_rl.rollout.batched import training_rewards
    from agentbench_rl.train.ppo import initial_policy, iteration_rollout, make_pool

    config.use_torch_threads()
    policy, _ = initial_policy(config, "cpu", None)
    pool = make_pool(config)
    out = []
    try:
        for iteration in range(1, batches + 1):
            rollout = iteration_rollout(pool, policy, config, iteration, capture_hidden=True)
            rewards = training_rewards(rollout, config.reward, config.success_reward)
            out.append(rollout.step_batch(rewards, True))
    finally:
        pool.close()
    return out


def sweep_epsilon(
    batches: Sequence[StepBatch], epsilons: Sequence[float] = EPSILONS
) -> dict[float, dict[str, float]]:
    """ε -> the rates of BiPACE's clustering, pooled over ``batches``."""
    results: dict[float, dict[str, float]] = {}
    for epsilon in epsilons:
        total: dict[str, int] = {}
        for batch in batches:
            codes, _ = cluster_rows(batch, check_hidden(batch), epsilon)
            for key, value in cluster_counts(batch, codes).items():
                total[key] = total.get(key, 0) + value
        results[float(epsilon)] = rates(total)
    return results


def run(
    config_path: Path | None,
    overrides: Sequence[str] = (),
    batches: int = 3,
    epsilons: Sequence[float] = EPSILONS,
    console: Console | None = None,
) -> dict[float, dict[str, float]]:
    """Roll out, sweep ε and print the table (ε and the batch count checked before any work)."""
    if batches < 1:
        raise ValueError(f"--batches must be >= 1, got {batches}")
    for epsilon in epsilons:  # by BiPACE's own parameter rule
        resolve("bipace").check_params({"epsilon": epsilon})
    config = load_config(config_path, [*overrides, "estimator=bipace"])
    config.check()
    step_batches = rollout_batches(config, batches)
    results = sweep_epsilon(step_batches, epsilons)
    if console is not None:
        rows = sum(len(b) for b in step_batches)
        table = Table(title=f"BiPACE ε on {config.env}, {config.model} model: {rows} rows")
        for column in ("ε", "purity", "purity ≥2", "singletons", "split", "rows/cluster"):
            table.add_column(column, justify="right")
        for epsilon, figures in results.items():
            table.add_row(
                f"{epsilon:g}",
                f"{figures['purity']:.3f}",
                f"{figures['purity_multi']:.3f}",
                f"{figures['singleton_rate']:.3f}",
                f"{figures['split_rate']:.3f}",
                f"{figures['rows_per_cluster']:.2f}",
            )
        console.print(table)
        reference = next(iter(results.values()))["gigpo_singleton_rate"]
        console.print(f"GiGPO's exact (group, state) sets leave {reference:.3f} of rows singletons")
    return results
