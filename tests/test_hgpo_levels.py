"""HGPO's context groups (#26 point 3): the one-sort path and the per-level factorisation it
falls back to (keys too long for one integer) form the same groups, on batches with repeated
observations inside trajectories, one-step trajectories and lone rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agentbench_rl.bench.estimators import synthetic_rollout
from agentbench_rl.estimators import StepBatch
from agentbench_rl.estimators.common import anchor_sets
from agentbench_rl.estimators.hgpo import _refactorised_levels, context_levels


def canonical(codes: np.ndarray) -> np.ndarray:
    """Group labels by first appearance (-1 kept): equal exactly when the partitions are."""
    labels = pd.factorize(codes)[0]
    return np.where(codes >= 0, labels, -1)


def small_batch(seed: int) -> StepBatch:
    rng = np.random.default_rng(seed)
    records = []
    for group in range(3):
        for traj in range(int(rng.integers(1, 5))):
            for t in range(int(rng.integers(1, 7))):
                records.append(
                    {
                        "group": group,
                        "traj": f"{group}/{traj}",
                        "t": t,
                        "reward": 0.0,
                        "obs_key": f"o{rng.integers(0, 3)}",  # few observations: many repeats
                        "state_key": "s",
                        "action_key": "a",
                        "valid": True,
                    }
                )
    order = rng.permutation(len(records))  # interleaved rows
    return StepBatch.from_records([records[i] for i in order])


@pytest.mark.parametrize("history_length", [0, 1, 2, 4])
@pytest.mark.parametrize("seed", range(6))
def test_the_sort_and_the_factorisation_form_the_same_groups(
    seed: int, history_length: int
) -> None:
    for batch in (small_batch(seed), synthetic_rollout(3000, seed).batch()):
        anchors = anchor_sets(batch, "obs")
        fast = context_levels(batch, anchors, history_length)
        slow = _refactorised_levels(batch, batch.codes("obs_key")[0], anchors, history_length)
        assert len(fast) == len(slow) == history_length + 1
        for (a, n_a), (b, n_b) in zip(fast, slow, strict=True):
            assert n_a == n_b == len(set(a[a >= 0].tolist()))
            np.testing.assert_array_equal(canonical(a), canonical(b))
            assert all(np.bincount(a[a >= 0]) >= 2)  # groups of two or more only
