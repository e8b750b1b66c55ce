"""The verl engine's advantage step without verl: rows in any order, padding rows anywhere,
the same advantages as ``compute`` on the rows (``integrations/verl/advantages.py``)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from agentbench_rl.agents.simple import RandomAgent
from agentbench_rl.estimators import REGISTRY, StepBatch, compute
from agentbench_rl.integrations.verl.advantages import row_advantages, step_batch_from_rows
from agentbench_rl.rollout.group import GroupEnv, rollout_group

SUPPORTED = [name for name in REGISTRY if name != "bipace"]  # BiPACE needs hidden states


def verl_rows(seed: int) -> list[dict[str, Any]]:
    """Two Sokoban groups of four random members as verl rows (uid, session, record)."""
    rows = []
    for uid, task in (("uid-a", "val-0000"), ("uid-b", "val-0003")):
        env = GroupEnv("sokoban", group_size=4, split="val", max_steps=5)
        rollout = rollout_group(env, RandomAgent(), task, seed=seed)
        steps = {traj: outcome["steps"] for traj, outcome in rollout.outcomes.items()}
        for record in rollout.records:
            session = int(record["traj"].rsplit("_", 1)[1])
            step = {key: record[key] for key in ("t", "reward", "obs_key", "state_key")}
            step |= {"action_key": record["action_key"], "valid": bool(record["valid"])}
            step |= {"success": record["success"], "steps": steps[record["traj"]]}
            rows.append({"uid": uid, "session": session, "record": step, "padding": False})
    return rows


@pytest.mark.parametrize("name", SUPPORTED)
def test_shuffled_and_padded_rows_get_the_advantages_of_compute(name: str) -> None:
    rows = verl_rows(seed=3)
    # hand-made reference: env rewards (reward="env"), rows in rollout order
    reference = StepBatch.from_records(
        [{"group": r["uid"], "traj": f"{r['uid']}/{r['session']}", **r["record"]} for r in rows]
    )
    params = {"invalid_penalty": 0.1} if "invalid_penalty" in REGISTRY[name].defaults else {}
    expected = compute(name, reference, **params).advantages
    for index, row in enumerate(rows):
        row["expected"] = expected[index]
    pad = {**rows[0], "uid": "pad-1", "padding": True, "expected": 0.0}  # verl copies row 0
    mixed = rows + [dict(pad, session=k) for k in range(3)]
    random.Random(1).shuffle(mixed)
    advantages, result = row_advantages(
        [r["uid"] for r in mixed],
        [r["session"] for r in mixed],
        [r["record"] for r in mixed],
        [r["padding"] for r in mixed],
        name,
        params,
        reward="env",
    )
    np.testing.assert_allclose(advantages, [r["expected"] for r in mixed], rtol=1e-9, atol=1e-12)
    assert result.diagnostics["n_rows"] == len(rows)


def test_success_reward_on_the_last_step_of_won_trajectories() -> None:
    won = {"t": 1, "reward": 0.3, "obs_key": "o", "state_key": "s", "action_key": "a"}
    won |= {"valid": True, "success": True, "steps": 2}
    batch, kept = step_batch_from_rows(
        ["u", "u", "u"], [0, 0, 1], [dict(won, t=0), won, dict(won, t=0, steps=1, success=False)],
        [False, False, False], reward="success", success_reward=10.0,
    )  # fmt: skip
    assert batch.reward.tolist() == [0.0, 10.0, 0.0] and kept.tolist() == [0, 1, 2]


def test_rows_without_a_step_record_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="no 'agentbench_step' step record"):
        step_batch_from_rows(["u"], [0], [None], [False])
    with pytest.raises(ValueError, match="every row of the batch is padding"):
        step_batch_from_rows(["p"], [0], [None], [True])
