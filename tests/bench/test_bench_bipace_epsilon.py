"""BiPACE's ε sweep: purity, singleton and split rates by hand, and the command on a tiny run."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from agentbench_rl.bench.bipace_epsilon import sweep_epsilon
from agentbench_rl.core.batch import StepBatch


def _batch() -> StepBatch:
    # one group, one step: rows 0 and 1 show grid A with hidden states at cosine cos(0.1)
    # (1 - cos = 0.004996), row 2 shows grid B at 90 degrees from both
    angle = 0.1
    hidden = [[1.0, 0.0, 0.0], [math.cos(angle), math.sin(angle), 0.0], [0.0, 0.0, 1.0]]
    return StepBatch.from_records(
        [
            {
                "group": 0,
                "traj": k,
                "t": 0,
                "reward": 0.0,
                "obs_key": s,
                "state_key": s,
                "action_key": "a",
                "valid": True,
                "hidden": h,
            }
            for k, (s, h) in enumerate(zip("AAB", hidden, strict=True))
        ]
    )


def test_epsilon_sweep_by_hand() -> None:
    results = sweep_epsilon([_batch()], [0.004, 0.006, 1.0 - 1e-9])
    # ε below 1 - cos: three singletons, all pure; grid A's two rows are split
    assert results[0.004]["singleton_rate"] == 1.0 and results[0.004]["purity"] == 1.0
    assert results[0.004]["split_rate"] == 1.0
    # ε above it: A's rows join ({A, A}, {B}), nothing split, one singleton of three rows
    assert results[0.006]["purity"] == 1.0 and results[0.006]["purity_multi"] == 1.0
    assert results[0.006]["singleton_rate"] == pytest.approx(1 / 3)
    assert results[0.006]["split_rate"] == 0.0
    # even ε near 1 leaves B alone: it is orthogonal to A's centroid (1 - cos = 1 > ε)
    assert results[1.0 - 1e-9]["rows_per_cluster"] == pytest.approx(1.5)
    assert results[0.004]["gigpo_singleton_rate"] == pytest.approx(1 / 3)  # B alone in GiGPO
    assert np.isnan(results[0.004]["purity_multi"])  # no cluster of two rows


@pytest.mark.slow  # builds a tiny model and rolls out
def test_bench_command_prints_the_table() -> None:
    pytest.importorskip("torch")
    from test_train_cli import TINY

    command = ["bench", "bipace-epsilon", "--batches", "1", "--epsilon", "0.01", "--epsilon", "0.1"]
    out = subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", *command, *TINY],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "purity" in out.stdout and "0.01" in out.stdout and "GiGPO" in out.stdout


def test_the_runs_reward_choice_is_honoured() -> None:
    """Issue 62: ``bench bipace-epsilon`` (and ``bench train``, through the same
    ``training_rewards``) paid success rewards whatever ``reward`` said. Sokoban's env pays
    -0.1 a step: a run of ``reward: env`` sees it, one of ``reward: success`` does not."""
    pytest.importorskip("torch")
    from agentbench_rl.bench.bipace_epsilon import rollout_batches
    from agentbench_rl.train.config import TrainConfig
    from agentbench_rl.train.sweep import load_sweep

    base = dict(load_sweep("baselines/drrn-sokoban-campaign.yaml").base, estimator="grpo")
    base.update(n_tasks=2, group_size=2, max_steps=4)
    configs = {reward: TrainConfig(**{**base, "reward": reward}) for reward in ("success", "env")}
    rewards = {reward: set(rollout_batches(c, 1)[0].reward) for reward, c in configs.items()}
    assert -0.1 in rewards["env"]
    assert rewards["success"] <= {0.0, configs["success"].success_reward}
