"""BiPACE: hidden-state clusters as step-level sets (BiGPO) with action-conditioned baselines
inside each cluster (PACE).

Source: Wang et al. 2026, "BiPACE: Bisimulation-Guided Policy Optimization with Action
Counterfactual Estimation for LLM Agents" (arXiv:2606.25556).

Equations (``docs/estimators.md``)::

    state side, per group, rows visited in ascending (t, input row index):
        u_i = h_i / ‖h_i‖
        centroid(C) = Σ_{j∈C} u_j / ‖Σ_{j∈C} u_j‖
        row i joins argmax_C u_i·centroid(C) (older cluster on exact ties) if 1 − cos ≤ ε,
        else starts a new cluster
    action side, for row i in cluster C with |C| ≥ 2 (A^S = 0 for a singleton):
        D     = std(G over C) + 1e-6   (norm="mean_std"),  1  (norm="mean")
        loo_i = (G_i − mean(G over C∖{i})) / D
        pace="q":     P = {j ∈ C : u_j = u_i}; A^S = (mean_P G − mean_C G)/D if |P| ≥ min_peers
                      else loo_i
        pace="diff":  Q = {j ∈ C : u_j ≠ u_i};  A^S = (G_i − mean_Q G)/D if Q ≠ ∅ else loo_i
        pace="state": A^S = norm(G_i, G over C)
    A_i = A^E_i + ω·A^S_i

Choices the paper leaves open, fixed by the spec: the greedy single pass and its visiting order
(so clusters depend on the row order within a (group, t)); the centroid as the normalised sum
of member unit vectors, updated after every join; ties broken towards the older cluster; the
leave-one-out fallback when a row has too few action peers. The hidden vector itself (which
layer, which token) is the trainer's choice, not a parameter here.

Implementation note: the clustering is sequential over rows by nature; each row costs one
matrix-vector product of its unit vector against the group's current centroids (float64, the
centroid matrix grows in place), so the Python work per row is constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    STD_EPS,
    EpisodeStats,
    Norm,
    base_diagnostics,
    combine_codes,
    episode_advantage,
    normalise,
    set_stats,
    step_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

Pace = Literal["q", "diff", "state"]


def check_hidden(batch: StepBatch) -> np.ndarray:
    """The ``hidden`` column, after the checks BiPACE needs; raises ``ValueError`` naming the
    column and the first bad row (missing, not finite, or a zero vector)."""
    hidden = batch.hidden
    if hidden is None:
        raise ValueError("bipace: column 'hidden', row 0: missing (BiPACE needs hidden states)")
    if hidden.shape[1] == 0:
        raise ValueError("bipace: column 'hidden', row 0: vectors of length 0")
    finite_rows = np.isfinite(hidden).all(axis=1)
    if not finite_rows.all():
        row = int(np.flatnonzero(~finite_rows)[0])
        # from_records fills the rows that had no hidden vector with NaN
        problem = "missing" if np.isnan(hidden[row]).all() else "not finite"
        raise ValueError(f"bipace: column 'hidden', row {row}: {problem}")
    zero = np.flatnonzero(~hidden.any(axis=1))
    if zero.size:
        raise ValueError(f"bipace: column 'hidden', row {zero[0]}: zero vector (no direction)")
    return hidden


def cluster_rows(batch: StepBatch, hidden: np.ndarray, epsilon: float) -> tuple[np.ndarray, int]:
    """Greedy cosine clustering of each group's rows; returns cluster codes (global) and count.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": 0.0, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True, "hidden": h}
        ...     for traj, h in ((0, [1.0, 0.0]), (1, [0.0, 1.0]), (2, [2.0, 0.1]))])
        >>> cluster_rows(batch, batch.hidden, 0.05)[0].tolist()
        [0, 1, 0]
    """
    # Visit rows in ascending (group, t, input row index); lexsort is stable, so ties in
    # (group, t) keep the input row order.
    visit = np.lexsort((batch.t, batch.group_codes))
    group_sorted = batch.group_codes[visit]
    bounds = np.flatnonzero(np.diff(group_sorted)) + 1
    cluster = np.empty(len(batch), dtype=np.int64)
    n_clusters = 0
    for rows in np.split(visit, bounds):
        block = hidden[rows].astype(np.float64)
        units = block / np.linalg.norm(block, axis=1, keepdims=True)  # u_i = h_i / ‖h_i‖
        sums = np.empty_like(units)  # Σ of member unit vectors, one row per cluster
        centroids = np.empty_like(units)  # sums[c] / ‖sums[c]‖
        labels = np.empty(len(rows), dtype=np.int64)
        k = 0
        for j in range(len(rows)):
            unit = units[j]
            if k:
                cosines = centroids[:k] @ unit
                best = int(np.argmax(cosines))  # first maximum: the older cluster on ties
                if 1.0 - cosines[best] <= epsilon:
                    total = sums[best]
                    total += unit
                    np.divide(total, np.sqrt(total @ total), out=centroids[best])
                    labels[j] = best
                    continue
            sums[k] = unit
            np.divide(unit, np.sqrt(unit @ unit), out=centroids[k])
            labels[j] = k
            k += 1
        cluster[rows] = labels + n_clusters
        n_clusters += k
    return cluster, n_clusters


def hidden_clusters(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Clusters of hidden states within cosine distance ``epsilon`` (BiPACE's step sets)."""
    if batch.hidden is None:
        raise ValueError("hidden_clusters needs the batch's 'hidden' column")
    return cluster_rows(batch, batch.hidden, params["epsilon"])


@register("bipace", needs=("hidden",), step_sets=hidden_clusters)
def bipace(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    epsilon: float = 0.05,
    pace: Pace = "q",
    min_peers: int = 2,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Episode advantage plus ω times the PACE advantage within hidden-state clusters.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": action, "valid": True, "hidden": [1.0, 0.0]}
        ...     for traj, reward, action in ((0, 3.0, "a"), (1, 1.0, "b"))])
        >>> compute("bipace", batch, norm="mean", pace="diff").advantages.tolist()  # 1+2, −1−2
        [3.0, -3.0]
    """
    hidden = check_hidden(batch)
    step_return = step_returns(batch, gamma, invalid_penalty)  # G_i
    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)  # A^E_i

    # State side: clusters C of similar hidden states.
    cluster, n_clusters = cluster_rows(batch, hidden, epsilon)
    c_stats = set_stats(step_return, cluster, n_clusters)
    size_c = c_stats.count[cluster]
    shared = size_c >= 2  # rows with at least one other row in their cluster

    # D = std(G over C) + 1e-6 with norm="mean_std", else 1
    scale = c_stats.std[cluster] + STD_EPS if norm == "mean_std" else np.ones(len(batch))
    # loo_i = (G_i − mean(G over C without i)) / D
    others_mean = (c_stats.total[cluster] - step_return) / np.maximum(size_c - 1, 1)
    loo = (step_return - others_mean) / scale

    if pace == "state":
        # A^S_i = norm(G_i, G over C)
        step_adv = normalise(step_return, cluster, c_stats, norm)
        used_peers = np.zeros(len(batch), dtype=bool)
        used_fallback = used_peers
    else:
        action_codes, _ = batch.codes("action_key")
        peer_codes, n_peer_sets = combine_codes(cluster, action_codes)
        p_stats = set_stats(step_return, peer_codes, n_peer_sets)
        size_p = p_stats.count[peer_codes]
        if pace == "q":
            # P = same action in C: A^S = (mean(G over P) − mean(G over C)) / D if |P| ≥ min_peers
            used_peers = shared & (size_p >= min_peers)
            peer_adv = (p_stats.mean[peer_codes] - c_stats.mean[cluster]) / scale
        else:
            # Q = another action in C: A^S = (G_i − mean(G over Q)) / D if Q is not empty
            size_q = size_c - size_p
            used_peers = shared & (size_q > 0)
            q_mean = (c_stats.total[cluster] - p_stats.total[peer_codes]) / np.maximum(size_q, 1)
            peer_adv = (step_return - q_mean) / scale
        used_fallback = shared & ~used_peers
        step_adv = np.where(used_peers, peer_adv, np.where(used_fallback, loo, 0.0))

    advantages = episode_adv + omega * step_adv
    diagnostics = base_diagnostics(batch, cluster, n_clusters)
    diagnostics.update(
        n_clusters=n_clusters,
        pace_rate=float(np.mean(used_peers)),
        fallback_rate=float(np.mean(used_fallback)),
    )
    return EstimatorResult(advantages, diagnostics)
