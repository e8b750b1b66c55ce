"""Golden cases: small batches whose advantages were worked out by hand (see the comments).

The main batch W, one group, three trajectories (rows in this order)::

    row  traj t  obs state action reward   hidden
     0    a   0   A    A     x      0      (1, 0)
     1    a   1   B    B     x      1      (0, 1)
     2    b   0   A    A     y      0      (1, 0)
     3    b   1   C    C     x      0      (0, 1)
     4    c   0   A    A     y      0      (1, 0)
     5    c   1   B    D     y      0      (0, 1)
     6    c   2   E    E     x      0      (1, 1)

R(a) = 1, R(b) = R(c) = 0. With discount γ the step returns are G = (γ, 1, 0, 0, 0, 0, 0).
Observation B hides two states (B after a0, D after c0).

Episode advantage A^E on W (no penalty):
- episode_stats="rows": scores (1, 1, 0, 0, 0, 0, 0), mean 2/7; deviations 5/7 (x2), -2/7 (x5),
  sum of squares 50/49 + 20/49 = 10/7, unbiased var (10/7)/6 = 5/21.
  mean: a -> 5/7, others -> -2/7; mean_std: the same over (sqrt(5/21) + 1e-6).
- episode_stats="trajectories": S = (1, 0, 0), mean 1/3, var (4/9 + 1/9 + 1/9)/2 = 1/3.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np
import pytest

from agentbench_rl.estimators import StepBatch, compute
from agentbench_rl.estimators.bipace import cluster_rows

EPS = 1e-6
SQ = math.sqrt

W_ROWS = [
    # traj, t, obs, state, action, reward, hidden
    ("a", 0, "A", "A", "x", 0.0, [1.0, 0.0]),
    ("a", 1, "B", "B", "x", 1.0, [0.0, 1.0]),
    ("b", 0, "A", "A", "y", 0.0, [1.0, 0.0]),
    ("b", 1, "C", "C", "x", 0.0, [0.0, 1.0]),
    ("c", 0, "A", "A", "y", 0.0, [1.0, 0.0]),
    ("c", 1, "B", "D", "y", 0.0, [0.0, 1.0]),
    ("c", 2, "E", "E", "x", 0.0, [1.0, 1.0]),
]
A_ROWS = (0, 1)  # rows of trajectory a


def make_batch(
    rows: list[tuple[Any, ...]],
    invalid: tuple[int, ...] = (),
    group: Any = "g",
    **extra_columns: list[Any],
) -> StepBatch:
    records = []
    for index, (traj, t, obs, state, action, reward, hidden) in enumerate(rows):
        row = {
            "group": group,
            "traj": traj,
            "t": t,
            "reward": reward,
            "obs_key": obs,
            "state_key": state,
            "action_key": action,
            "valid": index not in invalid,
        }
        if hidden is not None:
            row["hidden"] = hidden
        for name, values in extra_columns.items():
            row[name] = values[index]
        records.append(row)
    return StepBatch.from_records(records)


def w_batch(invalid: tuple[int, ...] = ()) -> StepBatch:
    return make_batch(W_ROWS, invalid)


def episode_rows(norm: str) -> np.ndarray:
    """A^E of W with episode_stats="rows" (worked in the module docstring)."""
    scale = 1.0 if norm == "mean" else SQ(5 / 21) + EPS
    return np.array([5 / 7 if i in A_ROWS else -2 / 7 for i in range(7)]) / scale


def episode_trajectories(norm: str) -> np.ndarray:
    scale = 1.0 if norm == "mean" else SQ(1 / 3) + EPS
    return np.array([2 / 3 if i in A_ROWS else -1 / 3 for i in range(7)]) / scale


def check(name: str, batch: StepBatch, expected: Any, **params: Any) -> dict[str, Any]:
    result = compute(name, batch, **params)
    assert result.advantages.dtype == np.float64
    np.testing.assert_allclose(result.advantages, np.asarray(expected, float), rtol=0, atol=1e-9)
    return result.diagnostics


# ---------------------------------------------------------------------------------------- GRPO
def test_grpo_default() -> None:
    diagnostics = check("grpo", w_batch(), episode_rows("mean_std"))
    assert diagnostics == {
        "n_rows": 7,
        "n_groups": 1,
        "step_groups": 0,
        "singleton_rate": 0.0,
        "mean_group_size": 0.0,
    }


def test_grpo_norm_mean() -> None:
    check("grpo", w_batch(), episode_rows("mean"), norm="mean")


def test_grpo_episode_stats_trajectories() -> None:
    check("grpo", w_batch(), episode_trajectories("mean_std"), episode_stats="trajectories")


def test_grpo_invalid_penalty() -> None:
    # p = 0.5 on row 3 (b1): scores (1, 1, 0, -0.5, 0, 0, 0), mean 1.5/7 = 3/14.
    expected = [11 / 14, 11 / 14, -3 / 14, -0.5 - 3 / 14, -3 / 14, -3 / 14, -3 / 14]
    check("grpo", w_batch(invalid=(3,)), expected, norm="mean", invalid_penalty=0.5)
    # trajectories: x = score_i against S = {R} = (1, 0, 0), mean 1/3: row 3 -> -0.5 - 1/3
    expected = [2 / 3, 2 / 3, -1 / 3, -5 / 6, -1 / 3, -1 / 3, -1 / 3]
    check(
        "grpo",
        w_batch(invalid=(3,)),
        expected,
        norm="mean",
        episode_stats="trajectories",
        invalid_penalty=0.5,
    )


def test_trajectory_stats_subtract_the_penalty_after_normalisation() -> None:
    # Hand-worked. Two one-step trajectories, both R = 1, row y invalid, p = 0.1, mean_std:
    # the set {1, 1} has std 0, so R normalises to 0 for both and y gets -0.1 (normalising
    # its score 0.9 would give -0.1 / 1e-6).
    rows = [("x", 0, "A", "A", "u", 1.0, None), ("y", 0, "A", "A", "u", 1.0, None)]
    check(
        "grpo",
        make_batch(rows, invalid=(1,)),
        [0.0, -0.1],
        episode_stats="trajectories",
        invalid_penalty=0.1,
    )
    # W with p = 0.5 on row 3 (b1), mean_std: the penalty-free part is unchanged, then -0.5.
    expected = episode_trajectories("mean_std") - 0.5 * (np.arange(7) == 3)
    check(
        "grpo", w_batch(invalid=(3,)), expected, episode_stats="trajectories", invalid_penalty=0.5
    )
    # A group of one trajectory: normalised part 0, the invalid row keeps -p.
    solo = make_batch(
        [("s", 0, "A", "A", "x", 0.0, None), ("s", 1, "B", "B", "x", 1.0, None)], invalid=(0,)
    )
    check("grpo", solo, [-0.1, 0.0], episode_stats="trajectories", invalid_penalty=0.1)
    # GiGPO's episode term too (its step term: one anchor set of two equal G -> 0 for x;
    # G_y = 1 - 0.1 against {1, 0.9}: (0.9 - 0.95) / (std + 1e-6)).
    spread = statistics.stdev([1.0, 0.9]) + EPS
    check(
        "gigpo",
        make_batch(rows, invalid=(1,)),
        [0.05 / spread, -0.1 - 0.05 / spread],
        episode_stats="trajectories",
        invalid_penalty=0.1,
    )


def test_grpo_single_trajectory_group_is_zero_with_trajectory_stats() -> None:
    # Group "solo" has one trajectory of two rows with returns summing to 1:
    # rows: scores (1, 1) -> 0 each; trajectories: |S| = 1 -> 0.
    solo = make_batch([("s", 0, "A", "A", "x", 0.0, None), ("s", 1, "B", "B", "x", 1.0, None)])
    check("grpo", solo, [0.0, 0.0])
    check("grpo", solo, [0.0, 0.0], episode_stats="trajectories")


# ---------------------------------------------------------------------------------------- RLOO
def test_rloo_default() -> None:
    # a: 1 - mean(0, 0) = 1; b, c: 0 - mean(1, 0) = -0.5
    check("rloo", w_batch(), [1, 1, -0.5, -0.5, -0.5, -0.5, -0.5])


def test_rloo_invalid_penalty() -> None:
    # p = 0.5 on row 3: its score is -0.5, the baseline for b stays mean(R(a), R(c)) = 0.5
    check("rloo", w_batch(invalid=(3,)), [1, 1, -0.5, -1.0, -0.5, -0.5, -0.5], invalid_penalty=0.5)


def test_rloo_single_trajectory_group_is_zero() -> None:
    solo = make_batch([("s", 0, "A", "A", "x", 3.0, None)])
    check("rloo", solo, [0.0])


# --------------------------------------------------------------------------------------- GiGPO
# Anchor sets of W by obs: A = {0, 2, 4} with G (γ, 0, 0); B = {1, 5} with G (1, 0); C = {3};
# E = {6}. By state: A = {0, 2, 4}; B, C, D, E singletons.
# G = (g, 0, 0): mean g/3, deviations (2g/3, -g/3, -g/3), var (4/9 + 1/9 + 1/9)g²/2 = g²/3.
# G = (1, 0): mean 1/2, var 1/2.
def test_gigpo_default() -> None:
    g = 0.95
    step = np.zeros(7)
    step[0] = (2 * g / 3) / (g / SQ(3) + EPS)
    step[[2, 4]] = (-g / 3) / (g / SQ(3) + EPS)
    step[1] = 0.5 / (SQ(0.5) + EPS)
    step[5] = -0.5 / (SQ(0.5) + EPS)
    diagnostics = check("gigpo", w_batch(), episode_rows("mean_std") + step)
    assert diagnostics["step_groups"] == 4
    assert diagnostics["singleton_rate"] == pytest.approx(2 / 7)
    # set sizes per row: 3, 2, 3, 1, 3, 2, 1
    assert diagnostics["mean_group_size"] == pytest.approx(15 / 7)


def test_gigpo_norm_mean() -> None:
    g = 0.95
    step = [2 * g / 3, 0.5, -g / 3, 0, -g / 3, -0.5, 0]
    check("gigpo", w_batch(), episode_rows("mean") + step, norm="mean")


def test_gigpo_gamma_and_omega() -> None:
    # γ = 0.5: anchor A has G (0.5, 0, 0), mean 1/6 -> (1/3, -1/6, -1/6); ω = 2 doubles A^S
    step = np.array([1 / 3, 0.5, -1 / 6, 0, -1 / 6, -0.5, 0])
    check("gigpo", w_batch(), episode_rows("mean") + 2 * step, norm="mean", gamma=0.5, omega=2.0)


def test_gigpo_episode_stats_trajectories() -> None:
    step = np.array([1 / 3, 0.5, -1 / 6, 0, -1 / 6, -0.5, 0])
    check(
        "gigpo",
        w_batch(),
        episode_trajectories("mean") + step,
        norm="mean",
        gamma=0.5,
        episode_stats="trajectories",
    )


def test_gigpo_anchor_state() -> None:
    # By state only A = {0, 2, 4} has several rows; B, C, D, E are singletons (0).
    step = np.array([1 / 3, 0, -1 / 6, 0, -1 / 6, 0, 0])
    check("gigpo", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5, anchor="state")


def test_gigpo_invalid_penalty_is_the_rows_own_and_not_discounted_back() -> None:
    # p = 1 on row 1 (a1). Scores: row 1 -> 1 - 1 = 0, others as before: (1, 0, 0, 0, 0, 0, 0),
    # mean 1/7 -> A^E = (6/7, -1/7, -1/7, ...).
    # G: row 1 -> 1 - 1 = 0; row 0 keeps 0 + 0.5 * 1 = 0.5 (the raw return, not discounted
    # penalty). Anchor A: (0.5, 0, 0) -> (1/3, -1/6, -1/6); anchor B: (0, 0) -> 0.
    episode = np.array([6 / 7, -1 / 7, -1 / 7, -1 / 7, -1 / 7, -1 / 7, -1 / 7])
    step = np.array([1 / 3, 0, -1 / 6, 0, -1 / 6, 0, 0])
    check(
        "gigpo", w_batch(invalid=(1,)), episode + step, norm="mean", gamma=0.5, invalid_penalty=1.0
    )


# -------------------------------------------------------------------------------------- BiPACE
# Clusters of W (rows visited by t, then row): t=0 rows 0, 2, 4 share (1, 0) -> X = {0, 2, 4};
# t=1 row 1 has cosine 0 with X -> new Y; rows 3, 5 join Y; t=2 row 6, (1, 1)/√2, has cosine
# 1/√2 with both X and Y: 1 - 0.707 > 0.05 -> new singleton Z.
# With γ = 0.5: X: G (0.5 x, 0 y, 0 y), mean 1/6; Y: G (1 x, 0 x, 0 y), mean 1/3.
def test_bipace_clusters_of_w() -> None:
    batch = w_batch()
    assert batch.hidden is not None
    clusters, count = cluster_rows(batch, batch.hidden, 0.05)
    assert count == 3
    assert clusters.tolist() == [0, 1, 0, 1, 0, 1, 2]


def test_bipace_default() -> None:
    g = 0.95
    # X: G (g, 0, 0), D = g/√3 + 1e-6. Row 0 (x) has no action peer -> loo = (g - 0)/D;
    # rows 2, 4 (y, y): P = {2, 4}, (mean_P - mean_X)/D = (0 - g/3)/D.
    # Y: G (1, 0, 0), D = 1/√3 + 1e-6. Rows 1, 3 (x, x): (1/2 - 1/3)/D; row 5 (y): loo (0 - 1/2)/D.
    dx, dy = g / SQ(3) + EPS, 1 / SQ(3) + EPS
    step = [
        g / dx,
        (1 / 2 - 1 / 3) / dy,
        (-g / 3) / dx,
        (1 / 2 - 1 / 3) / dy,
        (-g / 3) / dx,
        -0.5 / dy,
        0.0,
    ]
    diagnostics = check("bipace", w_batch(), episode_rows("mean_std") + np.array(step))
    assert diagnostics["n_clusters"] == 3
    assert diagnostics["step_groups"] == 3
    assert diagnostics["pace_rate"] == pytest.approx(4 / 7)  # rows 1, 2, 3, 4
    assert diagnostics["fallback_rate"] == pytest.approx(2 / 7)  # rows 0, 5
    assert diagnostics["singleton_rate"] == pytest.approx(1 / 7)


def test_bipace_q_norm_mean() -> None:
    # X: row 0 loo 0.5 - mean(0, 0) = 0.5; rows 2, 4: 0 - 1/6. Y: rows 1, 3: 1/2 - 1/3 = 1/6;
    # row 5: loo 0 - mean(1, 0) = -1/2.
    step = np.array([0.5, 1 / 6, -1 / 6, 1 / 6, -1 / 6, -0.5, 0])
    check("bipace", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5)


def test_bipace_q_min_peers() -> None:
    # min_peers = 3: no action has 3 rows in a cluster -> every shared row uses loo.
    # X (0.5, 0, 0): 0.5 - 0 = 0.5, 0 - 0.25, 0 - 0.25. Y (1, 0, 0): 1, -0.5, -0.5.
    step = np.array([0.5, 1.0, -0.25, -0.5, -0.25, -0.5, 0])
    diagnostics = check(
        "bipace", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5, min_peers=3
    )
    assert diagnostics["pace_rate"] == 0.0
    assert diagnostics["fallback_rate"] == pytest.approx(6 / 7)
    # min_peers = 1: P always used; row 0: 0.5 - 1/6 = 1/3; row 5: 0 - 1/3.
    step = np.array([1 / 3, 1 / 6, -1 / 6, 1 / 6, -1 / 6, -1 / 3, 0])
    check("bipace", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5, min_peers=1)


def test_bipace_diff() -> None:
    # X: row 0 (x) vs Q = {2, 4}: 0.5 - 0 = 0.5; rows 2, 4 (y) vs Q = {0}: 0 - 0.5 = -0.5.
    # Y: row 1 (x) vs Q = {5}: 1 - 0 = 1; row 3 (x): 0 - 0 = 0; row 5 (y) vs {1, 3}: 0 - 0.5.
    step = np.array([0.5, 1.0, -0.5, 0.0, -0.5, -0.5, 0])
    diagnostics = check(
        "bipace", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5, pace="diff"
    )
    assert diagnostics["pace_rate"] == pytest.approx(6 / 7)
    assert diagnostics["fallback_rate"] == 0.0


def test_bipace_diff_falls_back_to_leave_one_out() -> None:
    # One cluster, one action, G (1, 0): Q is empty -> loo: 1 - 0 = 1 and 0 - 1 = -1.
    # A^E (mean): scores (1, 0) -> ±0.5.
    rows = [("p", 0, "A", "A", "x", 1.0, [1.0, 0.0]), ("q", 0, "A", "A", "x", 0.0, [1.0, 0.0])]
    diagnostics = check("bipace", make_batch(rows), [1.5, -1.5], norm="mean", pace="diff")
    assert diagnostics["fallback_rate"] == 1.0


def test_bipace_state() -> None:
    # X: norm(G, (0.5, 0, 0)) -> (1/3, -1/6, -1/6); Y: norm(G, (1, 0, 0)) -> (2/3, -1/3, -1/3)
    step = np.array([1 / 3, 2 / 3, -1 / 6, -1 / 3, -1 / 6, -1 / 3, 0])
    diagnostics = check(
        "bipace", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5, pace="state"
    )
    assert (diagnostics["pace_rate"], diagnostics["fallback_rate"]) == (0.0, 0.0)


def test_bipace_epsilon_and_ties_go_to_the_older_cluster() -> None:
    # ε = 0.3: row 6, (1, 1)/√2, has the same cosine 1/√2 (1 - 0.707 ≤ 0.3) with X = (1, 0)
    # and Y = (0, 1): the tie goes to the older cluster X = {0, 2, 4, 6}.
    batch = w_batch()
    assert batch.hidden is not None
    clusters, count = cluster_rows(batch, batch.hidden, 0.3)
    assert (count, clusters.tolist()) == (2, [0, 1, 0, 1, 0, 1, 0])
    # X: G (0.5 x, 0 y, 0 y, 0 x), mean 1/8. Rows 0, 6 (x): P = {0, 6}, 1/4 - 1/8 = 1/8;
    # rows 2, 4 (y): 0 - 1/8. Y as before: 1/6, 1/6, -1/2.
    step = np.array([1 / 8, 1 / 6, -1 / 8, 1 / 6, -1 / 8, -0.5, 1 / 8])
    check("bipace", batch, episode_rows("mean") + step, norm="mean", gamma=0.5, epsilon=0.3)


def test_bipace_omega_trajectory_stats_and_penalty() -> None:
    # p = 1 on row 4 (c0, action y): G4 = 0 - 1 = -1. X: G (0.5, 0, -1), mean -1/6.
    # Row 0 (x): loo 0.5 - mean(0, -1) = 1; rows 2, 4 (y): P = {2, 4}, mean -1/2 -> -1/2 + 1/6.
    # Y unchanged: 1/6, 1/6, -1/2. ω = 2.
    # A^E (trajectories, mean): S = (1, 0, 0), mean 1/3; row 4's score is 0 - 1 = -1 -> -4/3.
    episode = np.array([2 / 3, 2 / 3, -1 / 3, -1 / 3, -4 / 3, -1 / 3, -1 / 3])
    step = np.array([1.0, 1 / 6, -1 / 3, 1 / 6, -1 / 3, -0.5, 0])
    check(
        "bipace",
        w_batch(invalid=(4,)),
        episode + 2 * step,
        norm="mean",
        gamma=0.5,
        omega=2.0,
        episode_stats="trajectories",
        invalid_penalty=1.0,
    )


def test_bipace_clusters_follow_the_visiting_order() -> None:
    # ε = 0.1; directions at 0°, 20° and 40°: cos 20° = 0.940 (joins), cos 30° = 0.866 (not).
    # Visiting 0°, 20°, 40°: {0°, 20°} then the centroid sits at 10° and 40° is 30° away -> new.
    # Visiting 40°, 20°, 0°: {40°, 20°}, centroid at 30°, 0° is 30° away -> new.
    def direction(degrees: float) -> list[float]:
        return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]

    def rows(angles: list[float]) -> list[tuple[Any, ...]]:
        return [(f"r{i}", 0, "o", "o", "x", 0.0, direction(a)) for i, a in enumerate(angles)]

    forward = make_batch(rows([0, 20, 40]))
    backward = make_batch(rows([40, 20, 0]))
    assert forward.hidden is not None and backward.hidden is not None
    assert cluster_rows(forward, forward.hidden, 0.1)[0].tolist() == [0, 0, 1]
    assert cluster_rows(backward, backward.hidden, 0.1)[0].tolist() == [0, 0, 1]
    # Rows are visited by t first: row 1 (t = 1, 0°) comes after rows 2 and 3 (t = 0).
    # By (t, row): 90° -> c0; 20° -> c1; 40° joins c1 (centroid 30°); 0° is 30° away -> c2.
    # (In input order 0° would have come second and taken 20° with it.)
    mixed = make_batch(
        [
            ("p", 0, "o", "o", "x", 0.0, direction(90)),
            ("p", 1, "o", "o", "x", 0.0, direction(0)),
            ("q", 0, "o", "o", "x", 0.0, direction(20)),
            ("r", 0, "o", "o", "x", 0.0, direction(40)),
        ]
    )
    assert mixed.hidden is not None
    assert cluster_rows(mixed, mixed.hidden, 0.1)[0].tolist() == [0, 2, 1, 1]


# ---------------------------------------------------------------------------------------- ECPO
# Batch E: one anchor A, three single-step trajectories, G = r:
#   p: x, 1    q: x, 0    r: y, 0
# n_s = 3, μ_s = 1/3, σ_s = 1/√3. x: n 2, Ḡ 1/2; y: n 1, Ḡ 0.
# κ = 2: μ̃_x = (2·1/2 + 2/3)/4 = 5/12 -> A_act(x) = 5/12 - 4/12 = 1/12;
#        μ̃_y = (0 + 2/3)/3 = 2/9   -> A_act(y) = 2/9 - 3/9 = -1/9.
# B = (2/3)(1/2 - 1/3)² + (1/3)(1/3)² = 1/54 + 2/54 = 1/18;
# W = (1/3)((1 - 1/2)² + (0 - 1/2)² + 0) = 1/6;  ρ = tanh(3/τ)·(1/18)/(1/18 + 1/6 + 1e-6).
# A^E (mean) of scores (1, 0, 0): 2/3, -1/3, -1/3.
E_ROWS = [
    ("p", 0, "A", "A", "x", 1.0, None),
    ("q", 0, "A", "A", "x", 0.0, None),
    ("r", 0, "A", "A", "y", 0.0, None),
]


def e_gate(tau: float = 4.0) -> float:
    return math.tanh(3 / tau) * (1 / 18) / (1 / 18 + 1 / 6 + EPS)


def test_ecpo_norm_mean() -> None:
    rho = e_gate()
    expected = [2 / 3 + rho / 12, -1 / 3 + rho / 12, -1 / 3 - rho / 9]
    diagnostics = check("ecpo", make_batch(E_ROWS), expected, norm="mean")
    assert diagnostics["mean_gate"] == pytest.approx(rho)
    # the action seen once (y, |-1/9|) beats the action seen twice (x, 1/12): divergent
    assert diagnostics["divergent_anchor_rate"] == 1.0


def test_ecpo_default_on_e() -> None:
    rho, scale = e_gate(), 1 / SQ(3) + EPS
    expected = [
        (2 / 3) / scale + rho * (1 / 12) / scale,
        (-1 / 3) / scale + rho * (1 / 12) / scale,
        (-1 / 3) / scale - rho * (1 / 9) / scale,
    ]
    check("ecpo", make_batch(E_ROWS), expected)


def test_ecpo_kappa_tau_omega() -> None:
    # κ = 0: μ̃ = Ḡ -> A_act(x) = 1/2 - 1/3 = 1/6, A_act(y) = -1/3; τ = 1 -> tanh(3); ω = 2
    rho = e_gate(tau=1.0)
    expected = [2 / 3 + 2 * rho / 6, -1 / 3 + 2 * rho / 6, -1 / 3 - 2 * rho / 3]
    check("ecpo", make_batch(E_ROWS), expected, norm="mean", kappa=0.0, tau=1.0, omega=2.0)


def test_ecpo_episode_stats_and_penalty() -> None:
    # p = 1 on row r (y): G = (1 x, 0 x, -1 y), μ_s = 0; x: Ḡ 1/2, y: Ḡ -1.
    # μ̃_x = (1 + 0)/4 -> A_act 1/4; μ̃_y = (-1 + 0)/3 -> -1/3.
    # B = (2/3)(1/4) + (1/3)(1) = 1/2; W = (1/3)(1/4 + 1/4 + 0) = 1/6;
    # ρ = tanh(3/4)·(1/2)/(1/2 + 1/6 + 1e-6).
    # A^E (trajectories, mean): S = (1, 0, 0), mean 1/3; r's score is 0 - 1 -> -4/3.
    rho = math.tanh(0.75) * 0.5 / (0.5 + 1 / 6 + EPS)
    expected = [2 / 3 + rho / 4, -1 / 3 + rho / 4, -4 / 3 - rho / 3]
    diagnostics = check(
        "ecpo",
        make_batch(E_ROWS, invalid=(2,)),
        expected,
        norm="mean",
        episode_stats="trajectories",
        invalid_penalty=1.0,
    )
    assert diagnostics["divergent_anchor_rate"] == 1.0


def test_ecpo_default_on_w() -> None:
    # Anchor A = rows (0 x g, 2 y 0, 4 y 0): μ = g/3, σ = g/√3; x: n 1, Ḡ g; y: n 2, Ḡ 0.
    # μ̃_x = (g + 2g/3)/3 = 5g/9 -> 2g/9; μ̃_y = (0 + 2g/3)/4 = g/6 -> -g/6.
    # B = (1/3)(2g/3)² + (2/3)(g/3)² = 2g²/9; W = 0; ρ_A = tanh(3/4)·B/(B + 1e-6).
    # Anchor B = rows (1 x 1, 5 y 0): μ 1/2, σ √(1/2); μ̃_x = (1 + 1)/3 = 2/3 -> 1/6, μ̃_y = 1/3
    # -> -1/6; B = 1/4, W = 0; ρ_B = tanh(2/4)·(1/4)/(1/4 + 1e-6). C, E: one row -> ρ = 0.
    g = 0.95
    rho_a = math.tanh(0.75) * (2 * g * g / 9) / (2 * g * g / 9 + EPS)
    rho_b = math.tanh(0.5) * 0.25 / (0.25 + EPS)
    sa, sb = g / SQ(3) + EPS, SQ(0.5) + EPS
    step = [
        rho_a * (2 * g / 9) / sa,
        rho_b * (1 / 6) / sb,
        rho_a * (-g / 6) / sa,
        0,
        rho_a * (-g / 6) / sa,
        rho_b * (-1 / 6) / sb,
        0,
    ]
    diagnostics = check("ecpo", w_batch(), episode_rows("mean_std") + np.array(step))
    assert diagnostics["mean_gate"] == pytest.approx((3 * rho_a + 2 * rho_b) / 7)
    # anchor A: once-action x (2g/9) beats twice-action y (g/6); B has no repeated action
    assert diagnostics["divergent_anchor_rate"] == 1.0
    assert diagnostics["step_groups"] == 4


def test_ecpo_anchor_state() -> None:
    # By state only A = {0, 2, 4} has several rows (γ = 0.5, g = 0.5): A_act x = 2g/9 = 1/9,
    # y = -g/6 = -1/12; ρ_A = tanh(0.75)·(2g²/9)/(2g²/9 + 1e-6).
    g = 0.5
    rho_a = math.tanh(0.75) * (2 * g * g / 9) / (2 * g * g / 9 + EPS)
    step = np.array([rho_a / 9, 0, -rho_a / 12, 0, -rho_a / 12, 0, 0])
    check("ecpo", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5, anchor="state")


# -------------------------------------------------------------------------------------- ProGPO
# On W (γ = 0.5): prefix sets t0: (A) = {0, 2, 4}; t1: (A,x,B) {1}, (A,y,C) {3}, (A,y,B) {5};
# t2: {6}. Peers: rows 0, 2, 4 with G (0.5, 0, 0) -> mean-normalised (1/3, -1/6, -1/6).
# Levels (depth 2): level 0 A = {0, 2, 4} (mean 1/6), B = {1, 5} (mean 1/2), C, E single;
# levels 1 and 2 at t0 are the clipped key (A) = {0, 2, 4}; every other level-1/2 key single.
# Φ: rows 0, 2, 4 -> 1/6 (three equal levels); rows 1, 5 -> 1/2 (level 0 only); 3, 6 -> G = 0.
# C = r + 0.5·Φ(next) - Φ: row0 0.25 - 1/6 = 1/12; row1 1 - 1/2 = 1/2; row2 0 - 1/6 = -1/6;
# row3 0; row4 0.25 - 1/6 = 1/12; row5 0 - 1/2 = -1/2; row6 0.
# C sums to 0; squares 1/144 + 36/144 + 4/144 + 1/144 + 36/144 = 78/144, var 13/144.
def test_progpo_on_w() -> None:
    scale = SQ(13) / 12 + EPS
    step = np.array([1 / 3, 0.5 / scale, -1 / 6, 0, -1 / 6, -0.5 / scale, 0])
    diagnostics = check("progpo", w_batch(), episode_rows("mean") + step, norm="mean", gamma=0.5)
    assert diagnostics["peer_rate"] == pytest.approx(3 / 7)
    assert diagnostics["transition_rate"] == pytest.approx(4 / 7)
    assert diagnostics["step_groups"] == 5
    assert diagnostics["singleton_rate"] == pytest.approx(4 / 7)


def test_progpo_norm_mean_std() -> None:
    # Peers (0.5, 0, 0): var 1/12 -> (x - 1/6)/(√(1/12) + 1e-6); the transition rows divide
    # by the std of C whatever norm is.
    peers = SQ(1 / 12) + EPS
    scale = SQ(13) / 12 + EPS
    step = np.array(
        [(1 / 3) / peers, 0.5 / scale, (-1 / 6) / peers, 0, (-1 / 6) / peers, -0.5 / scale, 0]
    )
    check("progpo", w_batch(), episode_rows("mean_std") + step, gamma=0.5)


# Batch P: three trajectories whose prefixes never match (different first observations):
#   p: S1 -> M -> F (rewards 0, 0, 1)    q: S2 -> M -> F (0, 0, 0)    w: S3 -> N -> F (0, 0, 0)
# every action "a". γ = 0.5: G(p) = (0.25, 0.5, 1), G(q) = G(w) = 0. Every row uses C.
# Level 0: M = {p1, q1} (mean 1/4, var 1/8), F = {p2, q2, w2} (mean 1/3, var 1/3), rest single.
# Level 1: (M,a,F) = {p2, q2} (mean 1/2, var 1/2); (N,a,F) = {w2}; rest single. Level 2: single.
# A^E (mean): scores (1,1,1,0,0,0,0,0,0), mean 1/3 -> p: 2/3, q, w: -1/3.
P_ROWS = [
    ("p", 0, "S1", "S1", "a", 0.0, None),
    ("p", 1, "M", "M", "a", 0.0, None),
    ("p", 2, "F", "F", "a", 1.0, None),
    ("q", 0, "S2", "S2", "a", 0.0, None),
    ("q", 1, "M", "M", "a", 0.0, None),
    ("q", 2, "F", "F", "a", 0.0, None),
    ("w", 0, "S3", "S3", "a", 0.0, None),
    ("w", 1, "N", "N", "a", 0.0, None),
    ("w", 2, "F", "F", "a", 0.0, None),
]
P_EPISODE = np.array([2 / 3] * 3 + [-1 / 3] * 6)


def transition_advantages(credit: list[float]) -> np.ndarray:
    return np.array(credit) / (statistics.stdev(credit) + EPS)


def test_progpo_depth_zero() -> None:
    # Φ (level 0 only): p0 0.25, q0 0, w0 0 (single: G); p1 = q1 = 1/4; w1 0; p2 = q2 = w2 = 1/3.
    # C: p0 0.5·1/4 - 1/4 = -1/8; q0 0.5·1/4 - 0 = 1/8; w0 0; p1 0.5·1/3 - 1/4 = -1/12;
    #    q1 -1/12; w1 1/6; p2 1 - 1/3 = 2/3; q2 -1/3; w2 -1/3.
    credit = [-1 / 8, -1 / 12, 2 / 3, 1 / 8, -1 / 12, -1 / 3, 0, 1 / 6, -1 / 3]
    diagnostics = check(
        "progpo",
        make_batch(P_ROWS),
        P_EPISODE + transition_advantages(credit),
        norm="mean",
        gamma=0.5,
        depth=0,
    )
    assert diagnostics["transition_rate"] == 1.0


def test_progpo_default_depth_fuses_levels() -> None:
    # Level 1 adds (M,a,F) for p2, q2: Φ_F = (w0·1/3 + w1·1/2)/(w0 + w1) with
    # w0 = 3/(1/3 + 0.01), w1 = 2/(1/2 + 0.01); w2 keeps 1/3 (its level-1 key is single).
    w0, w1 = 3 / (1 / 3 + 0.01), 2 / (1 / 2 + 0.01)
    phi_f = (w0 / 3 + w1 / 2) / (w0 + w1)
    credit = [
        -1 / 8,
        0.5 * phi_f - 1 / 4,
        1 - phi_f,
        1 / 8,
        0.5 * phi_f - 1 / 4,
        -phi_f,
        0,
        1 / 6,
        -1 / 3,
    ]
    check(
        "progpo",
        make_batch(P_ROWS),
        P_EPISODE + transition_advantages(credit),
        norm="mean",
        gamma=0.5,
    )


def test_progpo_semantic_level() -> None:
    # semantic keys: t0 "start", t1 "mid", t2 "end". depth 0 + "sem":
    # start = {p0, q0, w0}: G (1/4, 0, 0), mean 1/12 -> Φ = 1/12 for all three (level 0 single).
    # mid = {p1, q1, w1}: G (1/2, 0, 0), mean 1/6, var 1/12; with level-0 M (mean 1/4, var 1/8):
    #   Φ_M = (wM·1/4 + wS·1/6)/(wM + wS), wM = 2/(1/8 + 0.01), wS = 3/(1/12 + 0.01); w1 -> 1/6.
    # end = F: Φ = 1/3 for all three.
    # C: p0 0.5·Φ_M - 1/12; q0 the same; w0 0.5·1/6 - 1/12 = 0; p1 0.5/3 - Φ_M; q1 the same;
    #    w1 1/6 - 1/6 = 0; p2 2/3; q2 -1/3; w2 -1/3.
    w_m, w_s = 2 / (1 / 8 + 0.01), 3 / (1 / 12 + 0.01)
    phi_m = (w_m / 4 + w_s / 6) / (w_m + w_s)
    credit = [
        0.5 * phi_m - 1 / 12,
        1 / 6 - phi_m,
        2 / 3,
        0.5 * phi_m - 1 / 12,
        1 / 6 - phi_m,
        -1 / 3,
        0,
        0,
        -1 / 3,
    ]
    semantic = ["start", "mid", "end"] * 3
    batch = make_batch(P_ROWS, semantic_key=semantic)
    check(
        "progpo", batch, P_EPISODE + transition_advantages(credit), norm="mean", gamma=0.5, depth=0
    )


def test_progpo_default_on_p() -> None:
    # γ = g = 0.95: G(p) = (g², g, 1), G(q) = G(w) = 0.
    # Φ: t0 rows single at every level -> G: (g², 0, 0); p1, q1: level 0 M = (g, 0) -> g/2;
    # w1 -> 0; p2, q2: Φ_F as in the depth test (it does not involve g); w2 -> 1/3.
    # C: p0 g·g/2 - g² = -g²/2; q0 g²/2; w0 0; p1, q1 g·Φ_F - g/2; w1 g/3;
    #    p2 1 - Φ_F; q2 -Φ_F; w2 -1/3.
    # A^E (mean_std): scores (1,1,1,0,...,0), mean 1/3, var (3·4/9 + 6·1/9)/8 = 1/4.
    g = 0.95
    w0, w1 = 3 / (1 / 3 + 0.01), 2 / (1 / 2 + 0.01)
    phi_f = (w0 / 3 + w1 / 2) / (w0 + w1)
    credit = [
        -g * g / 2,
        g * phi_f - g / 2,
        1 - phi_f,
        g * g / 2,
        g * phi_f - g / 2,
        -phi_f,
        0,
        g / 3,
        -1 / 3,
    ]
    episode = P_EPISODE / (0.5 + EPS)
    check("progpo", make_batch(P_ROWS), episode + transition_advantages(credit))


def test_progpo_penalty_omega_and_trajectory_stats() -> None:
    # W, p = 1 on row 2 (b0), γ = 0.5: G = (0.5, 1, -1, 0, 0, 0, 0).
    # Peers at t0 (0.5, -1, 0), mean -1/6 -> (2/3, -5/6, 1/6); the three t0 levels give
    # Φ = -1/6 there; Φ(a1) = Φ(c1) = 1/2; Φ(b1) = Φ(c2) = 0.
    # C (raw rewards): a0 0.25 + 1/6 = 5/12; b0 0 + 1/6; c0 5/12; a1 1/2; b1 0; c1 -1/2; c2 0.
    # A^E (trajectories, mean): S = (1, 0, 0), mean 1/3; b0's score 0 - 1 -> -4/3. ω = 2.
    credit = [5 / 12, 1 / 2, 1 / 6, 0, 5 / 12, -1 / 2, 0]
    scale = statistics.stdev(credit) + EPS
    episode = np.array([2 / 3, 2 / 3, -4 / 3, -1 / 3, -1 / 3, -1 / 3, -1 / 3])
    step = np.array([2 / 3, 0.5 / scale, -5 / 6, 0, 1 / 6, -0.5 / scale, 0])
    check(
        "progpo",
        w_batch(invalid=(2,)),
        episode + 2 * step,
        norm="mean",
        gamma=0.5,
        omega=2.0,
        episode_stats="trajectories",
        invalid_penalty=1.0,
    )


def test_progpo_single_row_group_gets_no_step_term() -> None:
    records = [
        *w_batch().to_records(),
        {
            "group": "solo",
            "traj": "s",
            "t": 0,
            "reward": 1.0,
            "obs_key": "Z",
            "state_key": "Z",
            "action_key": "x",
            "valid": True,
        },
    ]
    for row in records:
        row.pop("hidden", None)
    result = compute("progpo", StepBatch.from_records(records), norm="mean", gamma=0.5)
    assert result.advantages[7] == 0.0  # A^E of a one-row group is 0, and so is A^S
    assert result.diagnostics["transition_rate"] == pytest.approx(4 / 8)


# ---------------------------------------------------------------------------------- Gated-BEPO
# On W: transitions A->B (r 0), B->⊥ (1), A->C (0), C->⊥ (0), A->D (0), D->E (0), E->⊥ (0).
# b(A) = 0, b(B) = 1, others 0; M(A, ·) = 1/3 to each of B, C, D; D->E; the rest -> ⊥.
# V(E) = V(D) = V(C) = 0, V(B) = 1, V(A) = γ/3.
# δ: row0 γ·1 - γ/3 = 2γ/3; row2 -γ/3; row4 -γ/3; rows 1, 3, 5, 6: 0. A^B = δ here (every
# later δ is 0). Gate: only A branches (3 successors) -> rows 0, 2, 4.
# Gated A^B (2γ/3, -γ/3, -γ/3): mean 0, var (4 + 1 + 1)γ²/9/2 = γ²/3.
def test_gated_bepo_default() -> None:
    g = 0.95
    scale = g / SQ(3) + EPS
    step = np.array([(2 * g / 3) / scale, 0, (-g / 3) / scale, 0, (-g / 3) / scale, 0, 0])
    diagnostics = check("gated_bepo", w_batch(), episode_rows("mean_std") + step)
    assert diagnostics["gate_rate"] == pytest.approx(3 / 7)
    assert diagnostics["n_nodes"] == 5
    assert diagnostics["step_groups"] == 5
    # rows leaving each row's state: A 3, B 1, A 3, C 1, A 3, D 1, E 1
    assert diagnostics["singleton_rate"] == pytest.approx(4 / 7)
    assert diagnostics["mean_group_size"] == pytest.approx(13 / 7)


def test_gated_bepo_norm_mean_and_replace() -> None:
    g = 0.95
    step = np.array([2 * g / 3, 0, -g / 3, 0, -g / 3, 0, 0])
    check("gated_bepo", w_batch(), episode_rows("mean") + step, norm="mean")
    replaced = episode_rows("mean")
    replaced[[0, 2, 4]] = [2 * g / 3, -g / 3, -g / 3]
    check("gated_bepo", w_batch(), replaced, norm="mean", mixing="replace")


# Batch GB: p: S -(0)-> S -(0)-> T -(1)-> ⊥;  q: S -(0)-> U -(0)-> ⊥.
# Rows leaving S: p0 (to S), p1 (to T), q0 (to U): 3 successors, the self-loop counts -> gated.
# γ = 1: V(T) = 1, V(U) = 0, V(S) = (1/3)(V(S) + 1 + 0) -> V(S) = 1/2.
# δ: p0 0 + 1/2 - 1/2 = 0; p1 0 + 1 - 1/2 = 1/2; p2 1 - 1 = 0; q0 0 + 0 - 1/2 = -1/2; q1 0.
# A^B with γλ = λ: p0 0 + λ·1/2 = λ/2; p1 1/2; p2 0; q0 -1/2; q1 0.
# A^E (mean): scores (1, 1, 1, 0, 0), mean 3/5 -> p: 2/5, q: -3/5.
GB_ROWS = [
    ("p", 0, "S", "S", "x", 0.0, None),
    ("p", 1, "S", "S", "x", 0.0, None),
    ("p", 2, "T", "T", "x", 1.0, None),
    ("q", 0, "S", "S", "y", 0.0, None),
    ("q", 1, "U", "U", "x", 0.0, None),
]
GB_EPISODE = np.array([2 / 5, 2 / 5, 2 / 5, -3 / 5, -3 / 5])


def test_gated_bepo_self_loop_gamma_one_and_lambda() -> None:
    # λ = 0.5: gated A^B (1/4, 1/2, -1/2) on rows p0, p1, q0.
    step = np.array([1 / 4, 1 / 2, 0, -1 / 2, 0])
    diagnostics = check(
        "gated_bepo", make_batch(GB_ROWS), GB_EPISODE + step, norm="mean", gamma=1.0, lam=0.5
    )
    assert diagnostics["gate_rate"] == pytest.approx(3 / 5)
    assert diagnostics["n_nodes"] == 3
    assert diagnostics["singleton_rate"] == pytest.approx(2 / 5)
    assert diagnostics["mean_group_size"] == pytest.approx(11 / 5)


def test_gated_bepo_mean_std_omega_and_replace_on_gb() -> None:
    # gated (1/4, 1/2, -1/2): mean 1/12, deviations (1/6, 5/12, -7/12),
    # squares (4 + 25 + 49)/144 = 78/144, var 39/144 -> D = √39/12 + 1e-6. ω = 2.
    scale = SQ(39) / 12 + EPS
    step = np.array([1 / 4, 1 / 2, 0, -1 / 2, 0]) / scale
    # A^E (mean_std): scores (1, 1, 1, 0, 0), mean 3/5, var (3·4/25 + 2·9/25)/4 = 3/10
    episode = np.array([2 / 5, 2 / 5, 2 / 5, -3 / 5, -3 / 5]) / (SQ(3 / 10) + EPS)
    check("gated_bepo", make_batch(GB_ROWS), episode + 2 * step, gamma=1.0, lam=0.5, omega=2.0)
    replaced = GB_EPISODE.copy()
    replaced[[0, 1, 3]] = [1 / 4, 1 / 2, -1 / 2]
    check(
        "gated_bepo",
        make_batch(GB_ROWS),
        replaced,
        norm="mean",
        gamma=1.0,
        lam=0.5,
        mixing="replace",
    )


def test_gated_bepo_penalty_only_touches_the_episode_term() -> None:
    # p = 1 on row p1: scores (1, 0, 1, 0, 0), mean 2/5 -> (3/5, -2/5, 3/5, -2/5, -2/5);
    # the graph uses raw rewards, so A^B is unchanged.
    episode = np.array([3 / 5, -2 / 5, 3 / 5, -2 / 5, -2 / 5])
    step = np.array([1 / 4, 1 / 2, 0, -1 / 2, 0])
    check(
        "gated_bepo",
        make_batch(GB_ROWS, invalid=(1,)),
        episode + step,
        norm="mean",
        gamma=1.0,
        lam=0.5,
        invalid_penalty=1.0,
    )


def test_gated_bepo_episode_stats_trajectories() -> None:
    # S = (R(p), R(q)) = (1, 0), mean 1/2 -> p: 1/2, q: -1/2
    episode = np.array([0.5, 0.5, 0.5, -0.5, -0.5])
    step = np.array([1 / 4, 1 / 2, 0, -1 / 2, 0])
    check(
        "gated_bepo",
        make_batch(GB_ROWS),
        episode + step,
        norm="mean",
        gamma=1.0,
        lam=0.5,
        episode_stats="trajectories",
    )


# ---------------------------------------------------------------------------------------- HGPO
def test_hgpo_context_groups_by_hand() -> None:
    """x: A→B, y: A→B, z: C→B; rewards 0 then 1 for x and z, 0, 0 for y; γ = 1, so G = 1 on x
    and z, 0 on y. history_length 1 (levels k = 1, 2), norm "mean", α = 1: w_1 = 2, w_2 = 3.

    Level 1: {x0, y0} (A) mean 1/2; {z0} (C) alone; {x1, y1, z1} (B) mean 2/3.
    Level 2: {x1, y1} (A, B) mean 1/2; {z1} (C, B) alone.
    """
    rows = [
        ("x", 0, "A", "s", "a", 0.0, None),
        ("x", 1, "B", "s", "a", 1.0, None),
        ("y", 0, "A", "s", "a", 0.0, None),
        ("y", 1, "B", "s", "a", 0.0, None),
        ("z", 0, "C", "s", "a", 0.0, None),
        ("z", 1, "B", "s", "a", 1.0, None),
    ]
    one, two = 2 + EPS, 5 + EPS  # Σ w + 1e-6 for one item (k = 1) and for two (k = 1, 2)
    expected = [
        2 * 0.5 / one,
        (2 * (1 / 3) + 3 * 0.5) / two,
        2 * -0.5 / one,
        (2 * (-2 / 3) + 3 * -0.5) / two,
        0.0,  # z0: its only group is itself
        2 * (1 / 3) / one,  # z1: alone at level 2, so only its level-1 item
    ]
    diagnostics = check(
        "hgpo", make_batch(rows), expected, gamma=1.0, history_length=1, norm="mean"
    )
    assert diagnostics["grouped_rate_k1"] == 5 / 6 and diagnostics["grouped_rate_k2"] == 2 / 6
    assert diagnostics["singleton_rate"] == 1 / 6 and diagnostics["step_groups"] == 3


# ---------------------------------------------------------- the 2026 graph-Bellman estimators
# Their graph on W is over observations (row 5's is B): A->B (rows 0, 4), A->C (2), B->⊕ (1:
# R(a) = 1 > 0), B->E (5), C->⊖ (3), E->⊖ (6), absorbing nodes of value 0.
# The behaviour's values: V(E) = V(C) = 0, V(B) = mean(1 + 0, 0 + γ·0) = 1/2,
# V(A) = mean(γ/2, 0, γ/2) = γ/3.


# G2PO (γ = 0.95; no return is 10, so every terminal step reaches 0). Anchor values
# mean γ^{L−t}·R: A (rows 0, 2, 4): (γ²·1 + 0 + 0)/3 = γ²/3; B (rows 1, 5): (γ·1 + 0)/2 = γ/2;
# C, E: 0. Reached: row 0 -> B, row 4 -> B: γ/2; every other row 0.
# A^N (mean, within the anchor): A: (γ/2, 0, γ/2) - γ/3 = (γ/6, -γ/3, γ/6); B: (0, 0) -> 0.
# A^G: gained (γ/2 - γ²/3, -γ/2, -γ²/3, 0, γ/2 - γ²/3, -γ/2, 0), group mean -γ²/7.
def test_g2po_norm_mean() -> None:
    g = 0.95
    next_term = np.array([g / 6, 0, -g / 3, 0, g / 6, 0, 0])
    gained = np.array([g / 2 - g * g / 3, -g / 2, -g * g / 3, 0, g / 2 - g * g / 3, -g / 2, 0])
    check("g2po", w_batch(), episode_rows("mean") + next_term + gained + g * g / 7, norm="mean")


def test_g2po_success_is_a_return_of_ten_and_the_penalty_touches_the_next_term() -> None:
    # x wins with 10 in one step, y fails; both from anchor o, y's action invalid (p = 0.1).
    # V(o) = (0.95·10 + 0)/2 = 4.75. Next: 10 and 0 - 0.1 -> ±5.05 about their mean; gains
    # 5.25 and -4.75 -> ±5; episode scores 10 and -0.1 -> ±5.05.
    batch = make_batch(
        [("x", 0, "o", "o", "a", 10.0, None), ("y", 0, "o", "o", "a", 0.0, None)], invalid=(1,)
    )
    check("g2po", batch, [5.05 + 5 + 5.05, -(5.05 + 5 + 5.05)], norm="mean")


# GRAFT (γ = λ = 0.95, hops 0). δ: row 0 γ/2 - γ/3 = γ/6; row 1 1 - 1/2 = 1/2; row 2 -γ/3;
# row 3 0; row 4 γ/6; row 5 -1/2; row 6 0. Â = Σ (γλ)^l δ along the trajectory:
# (γ/6 + c/2, 1/2, -γ/3, 0, γ/6 - c/2, -1/2, 0), c = γλ. Per state: A's three sum to 0 and B's
# two too, so they are their own deviations; C and E are left once: 0.
def test_graft_norm_mean() -> None:
    g, c = 0.95, 0.95 * 0.95
    step = np.array([g / 6 + c / 2, 1 / 2, -g / 3, 0, g / 6 - c / 2, -1 / 2, 0])
    check("graft", w_batch(), episode_rows("mean") + step, norm="mean")
    one_hop = np.array([g / 6, 1 / 2, -g / 3, 0, g / 6, -1 / 2, 0])  # each row's own δ
    check("graft", w_batch(), episode_rows("mean") + 2 * one_hop, norm="mean", hops=1, omega=2.0)


# CRBC (β = 0.98). Targets y = r + β·V(s'): (β/2, 1, 0, 0, β/2, 0, 0) with V(B) = 1/2,
# V(A) = β/3. Anchor A leaves by x (row 0) and y (rows 2, 4): Q(A, x) = β/2, Q(A, y) = β/4,
# Q - V = β/6, -β/12, -β/12; anchor B by x (row 1) and y (row 5): Q - V = ±1/2. C and E are
# left by one action: no step credit. With mean_std, A's targets (β/2, 0, β/2) have std
# β/√12 and B's (1, 0) √(1/2).
def test_crbc_by_hand() -> None:
    b = 0.98
    q_minus_v = np.array([b / 6, 1 / 2, -b / 12, 0, -b / 12, -1 / 2, 0])
    check("crbc", w_batch(), episode_rows("mean") + 5 * q_minus_v, norm="mean")
    std = np.array([b / SQ(12), SQ(1 / 2), b / SQ(12), 1, b / SQ(12), SQ(1 / 2), 1]) + EPS
    diagnostics = check("crbc", w_batch(), episode_rows("mean_std") + 5 * q_minus_v / std)
    assert diagnostics["gate_rate"] == pytest.approx(5 / 7)


# GraphHCA (γ = 0.95, floor f = 0.01, ω = 1). P(E) = P(C) = γ·0 = 0, P(B) = γ·mean(1, 0) = γ/2,
# P(A) = γ·mean(γ/2, 0, γ/2) = γ²/3. Φ = log max(P, f): Φ(C) = Φ(E) = Φ(⊖) = log f, Φ(⊕) = 0.
# δ: row 0 log(3/(2γ)), row 1 log(2/γ), row 2 log(3f/γ²), row 3 0, row 4 = row 0,
# row 5 log(2f/γ), row 6 0. Per source, A: (u, v, u) -> ((u−v)/3, −2(u−v)/3, (u−v)/3) with
# u − v = log(γ/(2f)); B: ±(−log f)/2.
def test_graphhca_by_hand() -> None:
    g, f = 0.95, 0.01
    spread = math.log(g / (2 * f))
    step = np.array(
        [spread / 3, -math.log(f) / 2, -2 * spread / 3, 0, spread / 3, math.log(f) / 2, 0]
    )
    check("graphhca", w_batch(), episode_rows("mean") + step, norm="mean")
    check("graphhca", w_batch(), episode_rows("mean"), norm="mean", step_weight=0.0)  # GRPO
    # the max backup (ω = ∞): P(B) = γ·max(1, 0) = γ, P(A) = γ·max(γ, 0) = γ² (γ^distance):
    # A's increments (log(1/γ), log(f/γ²), log(1/γ)), B's (log(1/γ), log(f/γ)) -> ±(-log f)/2
    spread = math.log(g / f)
    step = np.array(
        [spread / 3, -math.log(f) / 2, -2 * spread / 3, 0, spread / 3, math.log(f) / 2, 0]
    )
    check("graphhca", w_batch(), episode_rows("mean") + step, norm="mean", power="inf")
