"""GiGPO, HGPO, GraphGPO and G2PO against their authors' code: their functions on the same rows.

The peer files are never vendored: ``agentbench_rl.bench.peers`` compiles them from the
verl-agent checkout that ``AGENTBENCH_VERL_AGENT`` names, in float64 so the two can agree to
1e-8; the tests skip without one, saying which files they need. Checked at
``agentbench_rl.bench.peers.CHECKED_AT``: xlan156/verl-agent 8ca3a46 (``gigpo/core_gigpo.py``,
``recipe/hgpo/core_hgpo.py``), zzj1111/alfworldauto 37aec78 (``recipe/GraphGPO/``, upstream's
PR #256) and Nala-YN/G2PO b8ffaf5 (``g2po/core_g2po.py``). One folder holding the four::

    git clone https://github.com/xlan156/verl-agent /tmp/verl-agent
    git clone https://github.com/zzj1111/alfworldauto /tmp/alfworldauto
    git clone https://github.com/Nala-YN/G2PO /tmp/G2PO
    cp -r /tmp/alfworldauto/recipe/GraphGPO /tmp/verl-agent/recipe/
    cp -r /tmp/G2PO/g2po /tmp/verl-agent/
    AGENTBENCH_VERL_AGENT=/tmp/verl-agent python -m pytest tests/estimators/test_peer_estimators.py
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from agentbench_rl.bench.peers import (
    CHECKED_AT,
    G2PO_FILE,
    GIGPO_FILE,
    GRAPHGPO_FILE,
    HGPO_FILE,
    ROOT_VARIABLE,
    load_function,
    load_module,
    peer_root,
    run_g2po,
    run_gigpo,
    run_graphgpo,
    run_hgpo,
)
from agentbench_rl.estimators import StepBatch, compute

torch = pytest.importorskip("torch")


def _root(relative: str) -> Any:
    root = peer_root()
    if root is None or not (root / relative).is_file():
        pytest.skip(
            f"set {ROOT_VARIABLE} to a verl-agent checkout holding {relative} (checked at "
            f"{CHECKED_AT[relative]}; this module's docstring says how)"
        )
    return root


def _peer(relative: str, name: str) -> Callable[..., Any]:
    return load_function(_root(relative), relative, name)


@pytest.fixture(scope="module")
def graphgpo_peer() -> Any:
    return load_module(_root(GRAPHGPO_FILE), GRAPHGPO_FILE)


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
    # sums a float cannot hold exactly: a mean misses them by an ulp, which HGPO's a != 0 rule
    # can turn into a weight (verl-agent's rounding is what lone_row="score" reproduces)
    "fractional": [0.0, 0.1, 0.3, 0.7, 1.0],
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
        # lone_row="score" is verl-agent's form: its lone rows and its rounding
        ours = compute("hgpo", batch, **params, lone_row="score").advantages
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


def test_a_context_group_of_equal_returns_drops_out_here_and_by_rounding_there(
    peer: Callable[..., Any],
) -> None:
    """Three trajectories end on the same two observations (A, B) with reward 0.95, a fourth
    reaches B from C with reward 0: the level-2 group (A, B) holds three equal returns, whose
    float mean (2.8499999999999996 / 3) misses 0.95, so verl-agent's a ≠ 0 keeps it in the
    weights (w = 3 beside level 1's w = 2) where ours gives it exactly 0; lone_row="score"
    follows the code (bench estimators met this on 3 rows of its 100k batch)."""
    paths = {"x": ("X", "A", "B"), "y": ("Y", "A", "B"), "z": ("Z", "A", "B"), "w": ("W", "C", "B")}
    rows = [
        {"group": "g", "traj": traj, "t": t, "obs_key": obs, "state_key": obs,
         "action_key": "a", "valid": True,
         "reward": (0.0 if traj == "w" else 0.95) if t == 2 else 0.0}
        for traj, path in paths.items() for t, obs in enumerate(path)
    ]  # fmt: skip
    batch = StepBatch.from_records(rows)
    theirs = run_hgpo(peer, batch, {"gamma": 1.0})
    ours = compute("hgpo", batch, gamma=1.0).advantages
    last = np.flatnonzero((batch.t == 2) & (batch.traj != "w"))
    level_1 = (0.95 - 0.7125) / (np.std([0.95, 0.95, 0.95, 0.0]) + 1e-6)  # B's four returns
    np.testing.assert_allclose(ours[last], 2 * level_1 / (2 + 1e-6), rtol=1e-9)
    np.testing.assert_allclose(theirs[last], 2 * level_1 / (5 + 1e-6), rtol=1e-6)
    code_form = compute("hgpo", batch, gamma=1.0, lone_row="score").advantages
    np.testing.assert_allclose(code_form, theirs, rtol=0, atol=1e-8)


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
        # lone_row="score" is the code's form: every row equal, groups of one row included
        code_form = compute("gigpo", batch, norm=norm, lone_row="score").advantages
        np.testing.assert_allclose(code_form, theirs, rtol=0, atol=1e-8)


def test_hgpo_on_lone_trajectory_groups_equals_verl_agent(peer: Callable[..., Any]) -> None:
    """Task groups of one trajectory, fractional returns, base_group: every row of a group has
    one score, whose float mean verl-agent misses by an ulp or not; lone_row="score" follows it
    (an earlier version differed on 3 of 24 such batches, by up to 1.7)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        records = _records(
            rng, groups=4, trajs=1, max_len=30, observations="AB", rewards=REWARDS["fractional"]
        )
        batch = StepBatch.from_records([records[i] for i in rng.permutation(len(records))])
        params = {"base_group": True, "gamma": float(rng.choice([0.5, 0.95, 1.0]))}
        ours = compute("hgpo", batch, **params, lone_row="score").advantages
        np.testing.assert_allclose(ours, run_hgpo(peer, batch, params), rtol=0, atol=1e-8)


def _graph_records(
    rng: np.random.Generator, *, groups: int, trajs: int, max_len: int, states: int, next_key: bool
) -> list[dict[str, Any]]:
    """Walks on a small state space: revisits and cycles, trajectories that reach the goal
    state (reward 10 on the last step) or stop short, a next observation on every row."""
    records = []
    for g in range(groups):
        for k in range(int(rng.integers(1, trajs + 1))):
            length = int(rng.integers(1, max_len + 1))
            won = bool(rng.random() < 0.5)
            path = [f"s{int(rng.integers(states))}" for _ in range(length + 1)]
            for t in range(length):
                record = {
                    "group": f"g{g}",
                    "traj": f"g{g}-{k}",
                    "t": t,
                    "reward": 10.0 if won and t == length - 1 else 0.0,
                    "obs_key": path[t],
                    "state_key": path[t],
                    "action_key": "a",
                    "valid": bool(rng.random() < 0.85),
                }
                if next_key:
                    record["next_obs_key"] = path[t + 1]
                records.append(record)
    return records


GRAPH_CASES = {
    "random": {"groups": 4, "trajs": 6, "max_len": 8, "states": 5},
    "cycles": {"groups": 3, "trajs": 5, "max_len": 14, "states": 2},
    "single_step": {"groups": 4, "trajs": 6, "max_len": 1, "states": 3},
    "single_trajectory": {"groups": 5, "trajs": 1, "max_len": 6, "states": 3},
    "no_revisits": {"groups": 2, "trajs": 4, "max_len": 5, "states": 1000},
}
GRAPH_PARAMS = [
    {},
    {"norm": "mean"},
    {"normalize_distance": True},
    {"normalize_distance": True, "norm": "mean", "gamma": 0.5},
    {"episode_weight": 0.0},
    {"step_weight": 0.0, "invalid_penalty": 0.1},
    {"step_weight": 2.0, "episode_weight": 0.5, "gamma": 0.95},
]


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
@pytest.mark.parametrize("next_key", [True, False], ids=["next_obs_key", "next_row"])
@pytest.mark.parametrize(
    "params", GRAPH_PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "defaults"
)
def test_graphgpo_equals_verl_agent(
    graphgpo_peer: Any, case: str, next_key: bool, params: dict[str, Any]
) -> None:
    """Interleaved rows, revisited observations, cycles, groups with no success, single-step
    and single-trajectory groups, both distance modes, both norms, weights 0: the advantages of
    ``ComplexGraph`` + ``compute_graph_path_returns`` + ``compute_graphgpo_outcome_advantage``
    to 1e-8 (lone_row="score": verl-agent's form for a task group of one row)."""
    rng = np.random.default_rng(zlib.crc32(f"graphgpo/{case}/{next_key}/{params}".encode()))
    for _ in range(4):
        records = _graph_records(rng, **GRAPH_CASES[case], next_key=next_key)
        batch = StepBatch.from_records([records[i] for i in rng.permutation(len(records))])
        ours = compute("graphgpo", batch, **params, lone_row="score").advantages
        theirs = run_graphgpo(graphgpo_peer, batch, params)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8)


def test_graphgpo_lone_row_is_its_one_deliberate_difference(graphgpo_peer: Any) -> None:
    rows = [
        {"group": "solo", "traj": "s", "t": 0, "reward": 10.0, "obs_key": "A"},
        {"group": "pair", "traj": "p0", "t": 0, "reward": 10.0, "obs_key": "A"},
        {"group": "pair", "traj": "p1", "t": 0, "reward": 0.0, "obs_key": "A"},
    ]
    batch = StepBatch.from_records(
        [{**row, "state_key": "s", "action_key": "a", "valid": True} for row in rows]
    )
    theirs = run_graphgpo(graphgpo_peer, batch, {})
    ours = compute("graphgpo", batch).advantages
    assert ours[0] == 0.0 and theirs[0] == pytest.approx(10.0 / (1 + 1e-6), abs=1e-9)
    np.testing.assert_allclose(ours[1:], theirs[1:], atol=1e-8)


@pytest.fixture(scope="module")
def g2po_peer() -> Any:
    return load_module(_root(G2PO_FILE), G2PO_FILE)


#: G2PO's success is a return of exactly 10 (its SUCCESS_REWARD): rewards that sum to it or not.
G2PO_REWARDS = [0.0, 0.0, 0.0, 10.0, 5.0, 1.0]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(
    "params",
    # the code's discount is a constant 0.95 (our gamma's default)
    [{}, {"norm": "mean"}, {"step_weight": 2.0}, {"norm": "mean", "step_weight": 0.0}],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "defaults",
)
def test_g2po_equals_its_authors_code(g2po_peer: Any, case: str, params: dict[str, Any]) -> None:
    # The code's invalid-action penalty is its own 0.1 (ours: the default); under mean_std a
    # task group of one row gets NaN from its gain term (the std of one value), where ours gives
    # 0, and its score from the episode term (ours: 0; lone_row="score" restores the code's).
    rng = np.random.default_rng(zlib.crc32(f"g2po/{case}/{params}".encode()))
    for _ in range(5):
        records = _records(rng, **CASES[case], rewards=G2PO_REWARDS)
        batch = StepBatch.from_records([records[i] for i in rng.permutation(len(records))])
        keep = np.bincount(batch.group_codes)[batch.group_codes] > 1
        if params.get("norm") == "mean":
            keep[:] = True
        ours = compute("g2po", batch, **params, lone_row="score").advantages
        theirs = run_g2po(g2po_peer, batch, params)
        assert np.isnan(theirs[~keep]).all()
        np.testing.assert_allclose(ours[keep], theirs[keep], rtol=0, atol=1e-8)
