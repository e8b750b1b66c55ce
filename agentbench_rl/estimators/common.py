"""Quantities every estimator shares (``docs/estimators.md``, "Shared quantities").

All of them are vectorised over rows: per-set statistics are ``np.bincount`` reductions over
integer set codes, and the backward recursions along trajectories run one numpy step per time
index ``t`` (every trajectory at once), never one Python step per row.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import scipy.sparse
import scipy.sparse.linalg

from agentbench_rl.core.batch import StepBatch

Norm = Literal["mean_std", "mean"]
EpisodeStats = Literal["rows", "trajectories"]
Anchor = Literal["obs", "state"]
#: The episode term of a task group of one row: 0 (the spec) or its score (verl-agent's code).
LoneRow = Literal["zero", "score"]

STD_EPS = 1e-6  # added to every standard deviation the spec divides by
#: What :func:`normalize_advantages` can do to an estimator's advantages (``advantage_norm``).
AdvantageNorm = Literal["none", "batch_std"]
ADVANTAGE_NORMS: tuple[str, ...] = typing.get_args(AdvantageNorm)


def combine_codes(*columns: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes of the tuples ``(columns[0][i], columns[1][i], ...)`` of non-negative ints.

    Two rows get the same code exactly when their tuples are equal. Pairs are folded one column
    at a time and re-factorised, so the intermediate integers stay below ``n**2`` and never
    overflow.

    Example:
        >>> combine_codes(np.array([0, 0, 1]), np.array([2, 2, 2]))[0].tolist()
        [0, 0, 1]
    """
    codes = np.asarray(columns[0], dtype=np.int64)
    count = int(codes.max()) + 1 if codes.size else 0
    for column in columns[1:]:
        column = np.asarray(column, dtype=np.int64)
        width = int(column.max()) + 1 if column.size else 1
        folded, uniques = pd.factorize(codes * width + column, sort=False)
        codes, count = folded.astype(np.int64, copy=False), len(uniques)
    return codes, count


@dataclass(frozen=True)
class SetStats:
    """Per-set count, mean, unbiased variance and std of one value column, and whether all of
    a set's values are equal.

    ``var`` and ``std`` are 0 for a set with fewer than two members (the spec's convention).
    """

    count: np.ndarray
    total: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    std: np.ndarray
    equal: np.ndarray


def set_stats(values: np.ndarray, codes: np.ndarray, n_sets: int) -> SetStats:
    """Statistics of ``values`` over the sets given by ``codes`` (two passes: mean, then
    squared deviations, which is exact enough for any std we divide by).

    Example:
        >>> stats = set_stats(np.array([1.0, 3.0, 5.0]), np.array([0, 0, 1]), 2)
        >>> stats.mean.tolist(), stats.var.tolist()
        ([2.0, 5.0], [2.0, 0.0])
    """
    count = np.bincount(codes, minlength=n_sets)
    total = np.bincount(codes, weights=values, minlength=n_sets)
    mean = total / np.maximum(count, 1)
    deviation = values - mean[codes]
    squares = np.bincount(codes, weights=deviation * deviation, minlength=n_sets)
    var = np.where(count >= 2, squares / np.maximum(count - 1, 1), 0.0)
    low, high = np.full(n_sets, np.inf), np.full(n_sets, -np.inf)
    np.minimum.at(low, codes, values)
    np.maximum.at(high, codes, values)
    return SetStats(count, total, mean, var, np.sqrt(var), equal=low == high)


def normalise(x: np.ndarray, codes: np.ndarray, stats: SetStats, norm: Norm) -> np.ndarray:
    """``norm(x_i, S_i)`` for each row, ``S_i`` the set ``codes[i]`` described by ``stats``.

    ``"mean_std"``: ``(x − mean(S)) / (std(S) + 1e-6)``; ``"mean"``: ``x − mean(S)``; 0 when
    ``|S| = 1``, and exactly 0 when every value of ``S`` is equal (a float mean of equal values
    can miss them by an ulp, which the 1e-6 would blow up to ~1e-11: HGPO counts an item only
    when it is not 0, so that noise would decide its weights, and with the summation order).

    Example:
        >>> codes = np.array([0, 0, 1])
        >>> values = np.array([1.0, 3.0, 7.0])
        >>> normalise(values, codes, set_stats(values, codes, 2), "mean").tolist()
        [-1.0, 1.0, 0.0]
    """
    centred = x - stats.mean[codes]
    if norm == "mean_std":
        centred = centred / (stats.std[codes] + STD_EPS)
    return np.where((stats.count[codes] == 1) | stats.equal[codes], 0.0, centred)


def discounted_sum_to_go(batch: StepBatch, values: np.ndarray, discount: float) -> np.ndarray:
    """``X_t = values_t + discount · X_{t+1}`` along each trajectory, ``X`` = 0 after its last row.

    One vectorised step per time index, from the largest ``t`` down: each step reads the next
    rows' finished values.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": 0, "t": t, "reward": 0.0, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True} for t in range(3)])
        >>> discounted_sum_to_go(batch, np.array([1.0, 0.0, 4.0]), 0.5).tolist()
        [2.0, 2.0, 4.0]
    """
    n = len(batch)
    order, starts = batch.step_order
    following = np.where(batch.next_row >= 0, batch.next_row, n)  # slot n holds the 0 after the end
    result = np.zeros(n + 1)
    for k in range(len(starts) - 2, -1, -1):
        rows = order[starts[k] : starts[k + 1]]
        result[rows] = values[rows] + discount * result[following[rows]]
    return result[:n]


def state_values(
    node: np.ndarray, successor: np.ndarray, reward: np.ndarray, n_nodes: int, gamma: float
) -> tuple[np.ndarray, np.ndarray]:
    """The behaviour's values on an empirical graph, each row a transition ``node → successor``
    with its ``reward`` (successor ``n_nodes`` is the terminal ⊥): ``V(s) = b(s) + γ Σ_{s'}
    M(s, s') V(s')``, ``b`` the mean reward and ``M`` the share of the rows leaving s, solved
    exactly (one sparse system for every group's graph). Returns V over the nodes (with
    V(⊥) = 0 appended at index ``n_nodes``) and, per node, the number of distinct successors.

    Example:
        >>> # s0 -> s1 -> ⊥ with rewards 0 then 1, γ = 0.5:  V(s1) = 1, V(s0) = 0.5
        >>> values, _ = state_values(np.array([0, 1]), np.array([1, 2]), np.array([0.0, 1.0]),
        ...                          2, 0.5)
        >>> values.tolist()
        [0.5, 1.0, 0.0]
    """
    leaving = np.bincount(node, minlength=n_nodes).astype(np.float64)
    # b(s): mean raw reward of the rows leaving s
    mean_reward = np.bincount(node, weights=reward, minlength=n_nodes) / leaving
    # M(s, s') = (rows s -> s') / (rows leaving s), over the distinct (s, s') pairs
    pair_codes, n_pairs = combine_codes(node, successor)
    pair_count = np.bincount(pair_codes, minlength=n_pairs)
    pair_from = np.empty(n_pairs, dtype=np.int64)
    pair_to = np.empty(n_pairs, dtype=np.int64)
    pair_from[pair_codes] = node
    pair_to[pair_codes] = successor
    inner = pair_to < n_nodes  # V(⊥) = 0, so edges into ⊥ drop out of the system
    # (I − γM)·V = b
    weights = gamma * pair_count[inner] / leaving[pair_from[inner]]
    values = solve_graph(pair_from[inner], pair_to[inner], weights, mean_reward)
    distinct_successors = np.bincount(pair_from, minlength=n_nodes)
    return np.append(values, 0.0), distinct_successors


#: Connected parts of a graph up to this many nodes are solved as one batch of dense systems
#: (LAPACK's LU, every part at once); larger ones by one sparse solve. At 100k rows of groups
#: of 8 trajectories the dense batch takes a tenth of SuperLU's time for the same systems.
DENSE_NODES = 48


def solve_graph(
    source: np.ndarray, target: np.ndarray, weight: np.ndarray, rhs: np.ndarray
) -> np.ndarray:
    """``x`` with ``x_s − Σ_{edges s→t} w·x_t = rhs_s`` over ``len(rhs)`` nodes, exactly:
    ``(I − W)x = rhs``, W the weighted edges (at most one per pair). The system falls apart
    into the graph's weakly connected parts (one group's graph holds one or more); parts of at
    most :data:`DENSE_NODES` nodes are solved as one batch of dense systems, the rest as one
    sparse system numbered part by part, so that elimination in its natural order fills in
    only within a part (no column reordering is needed).

    Example:
        >>> # x0 − 0.5·x1 = 1, x1 = 2 and, apart, x2 = 3
        >>> solve_graph(np.array([0]), np.array([1]), np.array([0.5]), np.array([1.0, 2, 3]))
        array([2., 2., 3.])
    """
    from scipy.sparse.csgraph import connected_components

    n = len(rhs)
    edges = scipy.sparse.csr_matrix((weight, (source, target)), shape=(n, n))
    n_parts, part = connected_components(edges, directed=True, connection="weak")
    size = np.bincount(part, minlength=n_parts)
    by_part = np.argsort(part, kind="stable")  # nodes part by part
    position = np.empty(n, dtype=np.int64)
    position[by_part] = np.arange(n)
    local = position - (np.cumsum(size) - size)[part]  # a node's place within its part
    solution = np.empty(n)

    dense = size[part] <= DENSE_NODES  # per node
    if dense.any():
        parts = np.flatnonzero(size <= DENSE_NODES)
        slot = np.full(n_parts, -1, dtype=np.int64)
        slot[parts] = np.arange(len(parts))
        width = int(size[parts].max())
        system = np.zeros((len(parts), width, width))
        system[:, np.arange(width), np.arange(width)] = 1.0  # padding rows solve to 0
        inside = dense[source]
        np.add.at(
            system,
            (slot[part[source[inside]]], local[source[inside]], local[target[inside]]),
            -weight[inside],
        )
        values = np.zeros((len(parts), width))
        values[slot[part[dense]], local[dense]] = rhs[dense]
        solved = np.linalg.solve(system, values[..., None])[..., 0]
        solution[dense] = solved[slot[part[dense]], local[dense]]
    if not dense.all():
        nodes = by_part[~dense[by_part]]  # the large parts' nodes, part by part
        renumber = np.full(n, -1, dtype=np.int64)
        renumber[nodes] = np.arange(len(nodes))
        inside = ~dense[source]
        rows, columns = renumber[source[inside]], renumber[target[inside]]
        count = len(nodes)
        matrix = scipy.sparse.identity(count, format="csr") - scipy.sparse.csr_matrix(
            (weight[inside], (rows, columns)), shape=(count, count)
        )
        solution[nodes] = np.atleast_1d(
            scipy.sparse.linalg.spsolve(matrix.tocsc(), rhs[nodes], permc_spec="NATURAL")
        )
    return solution


def invalid_penalties(batch: StepBatch, invalid_penalty: float) -> np.ndarray:
    """``p·[not valid_i]`` per row."""
    return invalid_penalty * (~batch.valid)


def step_returns(batch: StepBatch, gamma: float, invalid_penalty: float) -> np.ndarray:
    """The step return ``G_i``: discounted return-to-go of the raw rewards, minus the row's own
    invalid-action penalty (not discounted back to earlier rows)."""
    return discounted_sum_to_go(batch, batch.reward, gamma) - invalid_penalties(
        batch, invalid_penalty
    )


def trajectory_returns(batch: StepBatch) -> np.ndarray:
    """``R(τ)`` per trajectory code (raw rewards, no penalty)."""
    return np.bincount(batch.traj_codes, weights=batch.reward, minlength=batch.n_trajs)


def row_successes(batch: StepBatch) -> np.ndarray:
    """Whether each row's trajectory succeeded: the batch's ``success`` column, else a positive
    return."""
    if batch.success is not None:
        return np.asarray(batch.success, dtype=bool)
    return trajectory_returns(batch)[batch.traj_codes] > 0


def observation_graph(batch: StepBatch) -> tuple[np.ndarray, np.ndarray, int]:
    """Every group's empirical graph over observations: each row's node (group, ``obs_key``),
    its successor (the next row's node; after a trajectory's last row the absorbing node of
    success ``n`` or of failure ``n + 1``), and the node count ``n``.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": t, "reward": reward if t == 1 else 0.0,
        ...      "obs_key": obs, "state_key": obs, "action_key": "a", "valid": True}
        ...     for traj, path, reward in (("x", "AB", 1.0), ("y", "AC", 0.0))
        ...     for t, obs in enumerate(path)])
        >>> node, successor, count = observation_graph(batch)
        >>> node.tolist(), successor.tolist(), count   # B ends in success (3), C in failure (4)
        ([0, 1, 0, 2], [1, 3, 2, 4], 3)
    """
    obs_codes, _ = batch.codes("obs_key")
    node, n_nodes = combine_codes(batch.group_codes, obs_codes)
    following = batch.next_row
    terminal = np.where(row_successes(batch), n_nodes, n_nodes + 1)
    successor = np.where(following >= 0, node[np.maximum(following, 0)], terminal)
    return node, successor, n_nodes


def trajectory_groups(batch: StepBatch) -> np.ndarray:
    """The group code of each trajectory code."""
    groups = np.empty(batch.n_trajs, dtype=np.int64)
    groups[batch.traj_codes] = batch.group_codes
    return groups


def episode_scores(batch: StepBatch, invalid_penalty: float) -> np.ndarray:
    """``score_i = R(τ_i) − p·[not valid_i]`` per row."""
    return trajectory_returns(batch)[batch.traj_codes] - invalid_penalties(batch, invalid_penalty)


def episode_advantage(
    batch: StepBatch, norm: Norm, episode_stats: EpisodeStats, invalid_penalty: float
) -> np.ndarray:
    """``A^E_i``: the row's episode score normalised within its group.

    ``"rows"``: ``norm(score_i, {score_j : j in the group})``, every row of the group counted.
    ``"trajectories"``: ``norm(R(τ_i), {R(τ) : τ in the group}) − p·[not valid_i]``, one value
    per trajectory in the set. The penalty is subtracted after normalisation because no member
    of the set carries it: normalising ``score_i`` against penalty-free returns would divide the
    penalty by the group's std, ``−p / 1e-6`` when every trajectory has the same return. With a
    single trajectory in the group the normalised part is 0 (the advantage is ``−p·[not valid]``).

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": 1.0, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": valid}
        ...     for traj, valid in (("x", True), ("y", False))])
        >>> episode_advantage(batch, "mean_std", "trajectories", 0.5).tolist()
        [0.0, -0.5]
    """
    if episode_stats == "rows":
        score = episode_scores(batch, invalid_penalty)
        stats = set_stats(score, batch.group_codes, batch.n_groups)
        return normalise(score, batch.group_codes, stats, norm)
    returns = trajectory_returns(batch)
    stats = set_stats(returns, trajectory_groups(batch), batch.n_groups)
    normalised = normalise(returns[batch.traj_codes], batch.group_codes, stats, norm)
    return normalised - invalid_penalties(batch, invalid_penalty)


def lone_rows_scored(
    batch: StepBatch, episode_adv: np.ndarray, norm: Norm, invalid_penalty: float
) -> np.ndarray:
    """``episode_adv`` with every task group of a single row given its score instead of 0, as
    verl-agent's episode term does (mean 0 and std 1 for a set of one: ``score / (1 + 1e-6)``
    under ``mean_std``, the score under ``mean``): the estimators' ``lone_row="score"``.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": group, "traj": group, "t": 0, "reward": 2.0, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True} for group in (0, 1)])
        >>> lone_rows_scored(batch, np.zeros(2), "mean", 0.0).tolist()
        [2.0, 2.0]
    """
    lone = np.bincount(batch.group_codes, minlength=batch.n_groups)[batch.group_codes] == 1
    score = episode_scores(batch, invalid_penalty)
    if norm == "mean_std":
        score = score / (1.0 + STD_EPS)
    return np.where(lone, score, episode_adv)


def anchor_sets(batch: StepBatch, anchor: Anchor) -> tuple[np.ndarray, int]:
    """Codes of the anchor sets: rows of one group with one anchor key (``obs_key`` or
    ``state_key``)."""
    key_codes, _ = batch.codes("obs_key" if anchor == "obs" else "state_key")
    return combine_codes(batch.group_codes, key_codes)


def anchor_step_sets(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Anchor sets keyed by the ``anchor`` parameter (observation or true state; the
    observation for an estimator without the parameter, as G2PO's and GRAFT's code anchor).

    The ``step_sets`` declaration of the estimators whose step-level sets are anchor sets.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": 0.0, "obs_key": "o",
        ...      "state_key": state, "action_key": "a", "valid": True}
        ...     for traj, state in (("x", "s"), ("y", "u"))])
        >>> [anchor_step_sets(batch, {"anchor": anchor})[1] for anchor in ("obs", "state")]
        [1, 2]
    """
    return anchor_sets(batch, params.get("anchor", "obs"))


def base_diagnostics(
    batch: StepBatch, set_codes: np.ndarray | None = None, n_sets: int = 0
) -> dict[str, Any]:
    """The diagnostics every estimator reports, from the codes of its step-level sets.

    Without step-level sets (GRPO, RLOO) ``step_groups``, ``singleton_rate`` and
    ``mean_group_size`` are all 0.
    """
    diagnostics: dict[str, Any] = {
        "n_rows": len(batch),
        "n_groups": batch.n_groups,
        "step_groups": n_sets,
        "singleton_rate": 0.0,
        "mean_group_size": 0.0,
    }
    if set_codes is not None:
        size = np.bincount(set_codes, minlength=n_sets)[set_codes]
        diagnostics["singleton_rate"] = float(np.mean(size == 1))
        diagnostics["mean_group_size"] = float(np.mean(size))
    return diagnostics


def normalize_advantages(advantages: np.ndarray, mode: str) -> np.ndarray:
    """The advantages PPO trains on: as the estimator gave them (``none``) or divided by their
    standard deviation over the batch (``batch_std``; a batch of equal values is left alone).
    The trainer's ``advantage_norm``, applied after any estimator by both training engines.

    Example:
        >>> normalize_advantages(np.array([3.0, -1.0, 1.0, 1.0]), "batch_std").tolist()
        [2.1213203435596424, -0.7071067811865475, 0.7071067811865475, 0.7071067811865475]
    """
    if mode == "none":
        return advantages
    if mode not in ADVANTAGE_NORMS:
        raise ValueError(f"advantage_norm '{mode}' (choose from {', '.join(ADVANTAGE_NORMS)})")
    std = float(advantages.std())
    return advantages / std if std > 1e-8 else advantages


#: Below this magnitude an advantage counts as zero in :func:`dose` (an estimator's exact zeros
#: may come out as rounding residue, such as a mean of equal returns subtracted from each).
ZERO_ADVANTAGE = 1e-9


def dose(advantages: np.ndarray) -> float:
    """The share of rows with a non-zero advantage: how many steps a credit rule trains (the
    "dose" of arXiv 2608.19760, which found that training differences between credit rules
    were mostly this).

    Example:
        >>> dose(np.array([0.0, 1e-12, -0.5, 2.0]))
        0.5
    """
    if advantages.size == 0:
        return 0.0
    return float(np.mean(np.abs(advantages) > ZERO_ADVANTAGE))


def effective_share(advantages: np.ndarray) -> float:
    """The effective sample size of the rows under weights ``|A|``, as a share of the rows:
    ``(Σ|A_i|)² / (n·Σ A_i²)`` (Kish's), 1 when every row carries the same weight and 1/n when
    one row carries all of it; 0 for advantages that are all zero. Beside :func:`dose`, it says
    how many rows a credit rule's gradient effectively rests on.

    Example:
        >>> effective_share(np.array([1.0, -1.0, 0.0, 0.0])), effective_share(np.array([3.0, 0.0]))
        (0.5, 0.5)
    """
    squares = float(np.sum(advantages * advantages))
    if advantages.size == 0 or squares == 0.0:
        return 0.0
    return float(np.sum(np.abs(advantages)) ** 2 / (advantages.size * squares))


def match_dose(advantages: np.ndarray, share: float, seed: int) -> np.ndarray:
    """The advantages of a dose-matched comparison: of the rows with a non-zero advantage, a
    uniform draw (from ``seed``) of ``round(share * rows)`` keeps its value and the others
    become 0 (every non-zero row is kept where there are fewer). So every credit rule trains
    the same number of rows, drawn without regard to their values; normalising afterwards
    (``advantage_norm: batch_std``) gives them the same norm too.

    Example:
        >>> kept = match_dose(np.array([1.0, -1.0, 2.0, 0.0]), 0.5, seed=0)
        >>> int(np.count_nonzero(kept)), set(kept[kept != 0]) <= {1.0, -1.0, 2.0}
        (2, True)
    """
    nonzero = np.flatnonzero(np.abs(advantages) > ZERO_ADVANTAGE)
    wanted = round(share * advantages.size)
    if len(nonzero) <= wanted:
        return advantages
    kept = np.random.default_rng(seed).choice(nonzero, size=wanted, replace=False)
    matched = np.zeros_like(advantages)
    matched[kept] = advantages[kept]
    return matched
