"""GiGPO and HGPO against their authors' code: verl-agent's functions on the same rows.

The peer files are never vendored: ``agentbench_rl.bench.peers`` compiles them from the
verl-agent checkout that ``AGENTBENCH_VERL_AGENT`` names (a clone of xlan156/verl-agent, which
holds upstream's ``gigpo/core_gigpo.py`` and HGPO's ``recipe/hgpo/core_hgpo.py``), in float64
so the two can agree to 1e-8; the tests skip without one.

Run it::

    AGENTBENCH_VERL_AGENT=/path/to/verl-agent python -m pytest tests/test_peer_estimators.py
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from agentbench_rl.bench.peers import (
    GIGPO_FILE,
    HGPO_FILE,
    ROOT_VARIABLE,
    load_function,
    peer_root,
    run_gigpo,
    run_hgpo,
)
from agentbench_rl.estimators import StepBatch, compute

torch = pytest.importorskip("torch")


def _peer(relative: str, name: str) -> Callable[..., Any]:
    root = peer_root()
    if root is None or not (root / relative).is_file():
        pytest.skip(f"set {ROOT_VARIABLE} to a verl-agent checkout holding {relative}")
    return load_function(root, relative, name)


@pytest.fixture(scope="module")
def peer() -> Callable[..., Any]:
    return _peer(HGPO_FILE, "hgpo_advantage_estimate")


@pytest.fixture(scope="module")
def gigpo_peer() -> Callable[..., Any]:
    return _peer(GIGPO_FILE, "compute_gigpo_outcome_advantage")


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
        np.testing.assert_allclose(ours, run_hgpo(peer, batch, params), rtol=0, atol=1e-8)


def test_lone_row_is_the_one_deliberate_difference(peer: Callable[..., Any]) -> None:
    rows = [
        {"group": "solo", "traj": "s", "t": 0, "reward": 2.0, "obs_key": "A"},
        {"group": "pair", "traj": "p0", "t": 0, "reward": 1.0, "obs_key": "A"},
        {"group": "pair", "traj": "p1", "t": 0, "reward": 0.0, "obs_key": "B"},
    ]
    batch = StepBatch.from_records(
        [{**row, "state_key": "s", "action_key": "a", "valid": True} for row in rows]
    )
    theirs = run_hgpo(peer, batch, {"base_group": True})
    ours = compute("hgpo", batch, base_group=True).advantages
    # score / (1 + 1e-6) as the level-0 item, then divided by its weight 1 plus 1e-6
    assert ours[0] == 0.0 and theirs[0] == pytest.approx(2.0 / (1 + 1e-6) ** 2, abs=1e-12)
    lone = compute("hgpo", batch, base_group=True, lone_row="score").advantages
    np.testing.assert_allclose(lone, theirs, atol=1e-8)
    np.testing.assert_allclose(ours[1:], theirs[1:], atol=1e-8)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("norm", ["mean_std", "mean"])
def test_gigpo_equals_verl_agent(gigpo_peer: Callable[..., Any], case: str, norm: str) -> None:
    # verl-agent gives a set of one its own value as mean and std 1 (advantage 0 at step level,
    # the score itself at episode level): the spec's 0 differs only for a group of one row.
    rng = np.random.default_rng(zlib.crc32(f"gigpo/{case}/{norm}".encode()))
    for _ in range(5):
        records = _records(rng, **CASES[case], rewards=REWARDS["mixed"])
        batch = StepBatch.from_records([records[i] for i in rng.permutation(len(records))])
        keep = np.bincount(batch.group_codes)[batch.group_codes] > 1
        ours = compute("gigpo", batch, norm=norm).advantages
        theirs = run_gigpo(gigpo_peer, batch, {"norm": norm})
        np.testing.assert_allclose(ours[keep], theirs[keep], rtol=0, atol=1e-8)
