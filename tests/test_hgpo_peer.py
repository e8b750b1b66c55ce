"""HGPO against its authors' code: verl-agent's ``hgpo_advantage_estimate`` on the same rows.

The peer file is never vendored: the test reads ``recipe/hgpo/core_hgpo.py`` from a checkout of
verl-agent named by ``AGENTBENCH_VERL_AGENT`` (a clone of xlan156/verl-agent, or of upstream once
the recipe lands there) and skips without one. The peer computes in float32; we run it in float64
(its ``torch.float32`` casts rewritten to ``torch.float64`` in memory) so the two can agree to
1e-8. Its ``from verl import DataProto`` (a type annotation only) is given a stand-in module.

Run it::

    AGENTBENCH_VERL_AGENT=/path/to/verl-agent python -m pytest tests/test_hgpo_peer.py
"""

from __future__ import annotations

import os
import sys
import types
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentbench_rl.estimators import StepBatch, compute
from agentbench_rl.estimators.common import episode_scores, step_returns

torch = pytest.importorskip("torch")

PEER_FILE = "recipe/hgpo/core_hgpo.py"


def _peer_function() -> Callable[..., Any]:
    root = os.environ.get("AGENTBENCH_VERL_AGENT")
    if not root or not (Path(root) / PEER_FILE).is_file():
        pytest.skip(f"set AGENTBENCH_VERL_AGENT to a verl-agent checkout holding {PEER_FILE}")
    source = (Path(root) / PEER_FILE).read_text().replace("torch.float32", "torch.float64")
    stand_in = types.ModuleType("verl")
    stand_in.DataProto = object  # type: ignore[attr-defined]
    saved = sys.modules.get("verl")
    sys.modules["verl"] = stand_in
    try:
        namespace: dict[str, Any] = {"__name__": "verl_agent_core_hgpo"}
        exec(compile(source, PEER_FILE, "exec"), namespace)
    finally:
        if saved is None:
            del sys.modules["verl"]
        else:
            sys.modules["verl"] = saved
    return namespace["hgpo_advantage_estimate"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def peer() -> Callable[..., Any]:
    return _peer_function()


def _records(
    rng: np.random.Generator,
    *,
    groups: int,
    trajs: int,
    max_len: int,
    observations: str,
    rewards: list[float],
) -> list[dict[str, Any]]:
    records = []
    for g in range(groups):
        for k in range(int(rng.integers(1, trajs + 1))):
            for t in range(int(rng.integers(1, max_len + 1))):
                records.append(
                    {
                        "group": f"g{g}",
                        "traj": f"g{g}-{k}",
                        "t": t,
                        "reward": float(rng.choice(rewards)),
                        "obs_key": str(rng.choice(list(observations))),
                        "state_key": "s",
                        "action_key": "a",
                        "valid": bool(rng.random() < 0.8),
                    }
                )
    return records


def _peer_advantages(
    peer: Callable[..., Any], batch: StepBatch, params: dict[str, Any]
) -> np.ndarray:
    """The peer's advantages in our row order. Its rows go in step-major order (every
    trajectory's step t before any step t + 1, as verl-agent's rollout loop stacks them), so
    trajectories interleave and each one is in time order, which its code assumes."""
    order = np.lexsort((batch.traj_codes, batch.t))
    gamma, p = params.get("gamma", 0.95), params.get("invalid_penalty", 0.0)
    step_return = step_returns(batch, gamma, p)[order]
    score = episode_scores(batch, p)[order]
    width = 3  # response tokens per row; the score sits on the last one, as verl-agent does
    token_rewards = np.zeros((len(batch), width))
    token_rewards[:, -1] = score
    modes = {"mean_std": "mean_std_norm", "mean": "mean_norm"}
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # its torch.tensor(list) of scores, too
    try:
        result = peer(
            torch.tensor(token_rewards, dtype=torch.float64),
            torch.tensor(step_return, dtype=torch.float64),
            torch.ones((len(batch), width), dtype=torch.float64),
            np.asarray(batch.obs_key[order], dtype=object),
            np.asarray(batch.group[order], dtype=object),
            np.asarray(batch.traj[order], dtype=object),
            params.get("history_length", 2),
            epsilon=1e-6,
            mode=modes[params.get("norm", "mean_std")],
            length_weight_alpha=params.get("alpha", 1.0),
            base_group=params.get("base_group", False),
        )
    finally:
        torch.set_default_dtype(default_dtype)
    advantages = np.empty(len(batch))
    advantages[order] = result[:, 0].numpy()
    return advantages


CASES = {
    "random": {"groups": 4, "trajs": 6, "max_len": 8, "observations": "ABCD"},
    "groups_of_one_traj": {"groups": 5, "trajs": 1, "max_len": 6, "observations": "AB"},
    "one_step_trajectories": {"groups": 4, "trajs": 8, "max_len": 1, "observations": "ABC"},
    "long_trajectories": {"groups": 2, "trajs": 4, "max_len": 40, "observations": "ABC"},
    "repeated_observations": {"groups": 3, "trajs": 5, "max_len": 12, "observations": "A"},
}
REWARDS = {
    "mixed": [0.0, 0.0, 1.0, -1.0, 0.5, 2.0],
    "all_equal": [1.0],
    "all_zero": [0.0],
}
PARAMS = [
    {},
    {"norm": "mean"},
    {"history_length": 0},
    {"history_length": 4, "alpha": 0.0},
    {"alpha": 2.5, "gamma": 0.5},
    {"base_group": True},
    {"base_group": True, "norm": "mean", "invalid_penalty": 0.1},
]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rewards", sorted(REWARDS))
@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_hgpo_equals_verl_agent(
    peer: Callable[..., Any], case: str, rewards: str, params: dict[str, Any]
) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{case}/{rewards}/{params}".encode()))
    for _ in range(5):
        records = _records(rng, **CASES[case], rewards=REWARDS[rewards])
        shuffled = [records[i] for i in rng.permutation(len(records))]
        batch = StepBatch.from_records(shuffled)
        lone_rows = np.bincount(batch.group_codes)[batch.group_codes] == 1
        # Our default gives a task group of one row 0; the exact form is lone_row="score".
        ours_params = {**params, "lone_row": "score"} if lone_rows.any() else params
        ours = compute("hgpo", batch, **ours_params).advantages
        np.testing.assert_allclose(ours, _peer_advantages(peer, batch, params), rtol=0, atol=1e-8)


def test_lone_row_is_the_one_deliberate_difference(peer: Callable[..., Any]) -> None:
    rows = [
        {"group": "solo", "traj": "s", "t": 0, "reward": 2.0, "obs_key": "A"},
        {"group": "pair", "traj": "p0", "t": 0, "reward": 1.0, "obs_key": "A"},
        {"group": "pair", "traj": "p1", "t": 0, "reward": 0.0, "obs_key": "B"},
    ]
    batch = StepBatch.from_records(
        [{**row, "state_key": "s", "action_key": "a", "valid": True} for row in rows]
    )
    theirs = _peer_advantages(peer, batch, {"base_group": True})
    ours = compute("hgpo", batch, base_group=True).advantages
    # score / (1 + 1e-6) as the level-0 item, then divided by its weight 1 plus 1e-6
    assert ours[0] == 0.0 and theirs[0] == pytest.approx(2.0 / (1 + 1e-6) ** 2, abs=1e-12)
    lone = compute("hgpo", batch, base_group=True, lone_row="score").advantages
    np.testing.assert_allclose(lone, theirs, atol=1e-8)
    np.testing.assert_allclose(ours[1:], theirs[1:], atol=1e-8)
