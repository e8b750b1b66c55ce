"""HGPO: hierarchy-of-groups policy optimisation, step returns compared within context groups.

Source: He, Feng et al. 2026, "Hierarchy-of-Groups Policy Optimization for Long-Horizon Agentic
Tasks" (arXiv:2602.22817, ICLR 2026), and its public code (verl-agent's ``recipe/hgpo``,
``core_hgpo.py``: ``hgpo_advantage_estimate``).

Equations (``docs/estimators.md``), for row i at step t of its trajectory, K = history_length + 1::

    G_i      = r_i + γ·G_{i+1} − p·[not valid_i]             (step return, as GiGPO)
    key_k(i) = (o_{t−k+1}, ..., o_t)                         k = 1 .. min(K, t + 1)
    H_k(i)   = rows of i's group with key_k equal to i's     (its level-k group)
    a_k(i)   = (G_i − mean H_k(i)) / (pstd H_k(i) + 1e-6)    norm="mean_std", if |H_k(i)| ≥ 2
             = G_i − mean H_k(i)                             norm="mean"
    a_0(i)   = A^E_i                                         only with base_group (as GRPO)
    I(i)     = {k : a_k(i) exists and a_k(i) ≠ 0}
    w_k      = (k + 1)^α
    A_i      = Σ_{k ∈ I(i)} w_k·a_k(i) / (Σ_{k ∈ I(i)} w_k + 1e-6),   0 when I(i) is empty

Choices the paper leaves open, settled by the authors' code and kept here: a level-k group holds
every row of the task group whose last k observations agree, from any trajectory and any step
(several rows of one trajectory included); a row with t < k − 1 has no level-k key (the window
is not clipped); keys of different lengths never match; the std is the population std (ddof 0,
unlike every other estimator here); an item whose advantage is exactly 0 drops out of the
weights; the weights are divided by their sum plus the same 1e-6; there is no separate episode
term: without ``base_group`` a row in no group of two gets 0.

A finding about the code's ``a ≠ 0`` rule, kept as it is: in a group whose returns are all
equal, the float mean can differ from them by ~1e-17, so ``a`` is not exactly 0 (±1e-11 after
dividing by the std's 0 + 1e-6) and the item takes its full share of the weights, diluting the
row's other items; whether it does depends on the summation order. We sum in row order as the
code does (``np.bincount`` and torch's mean agree on every batch of the parity test).

Differs from verl-agent on purpose: with ``base_group``, a task group of a single row gets the
spec's episode advantage 0 (``lone_row="zero"``), where verl-agent gives it its score (mean 0,
std 1 for a set of one): ``lone_row="score"`` restores that. Step order within a trajectory is
``t`` here, the row order there (verl-agent's batches are in time order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    STD_EPS,
    Norm,
    anchor_sets,
    base_diagnostics,
    combine_codes,
    episode_advantage,
    episode_scores,
    step_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

LoneRow = Literal["zero", "score"]


def context_levels(
    batch: StepBatch, anchors: tuple[np.ndarray, int], history_length: int
) -> list[tuple[np.ndarray, int]]:
    """Codes of the level-k groups of two or more rows, k = 1 .. history_length + 1; code -1
    for a row in no such group (a lone key, or t < k − 1). ``anchors`` are the level-1 keys,
    the rows' anchor sets (:func:`anchor_sets` keyed by observation).

    Level k extends level k − 1 backwards by the observation k − 1 steps back, so
    ``key_k = (o_{t−k+1}, key_{k−1})``; each level is one vectorised re-factorisation of the rows
    that can still share a key: two rows with equal level-k keys have equal level-(k − 1) keys,
    so a row alone at level k − 1 is alone at every deeper level.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": t, "reward": 0.0, "obs_key": obs,
        ...      "state_key": obs, "action_key": "a", "valid": True}
        ...     for traj, path in (("x", "ACA"), ("y", "BCA")) for t, obs in enumerate(path)])
        >>> levels = context_levels(batch, anchor_sets(batch, "obs"), 2)
        >>> [(codes.tolist(), n) for codes, n in levels]
        [([0, 1, 0, -1, 1, 0], 3), ([-1, -1, 1, -1, -1, 1], 3), ([-1, -1, -1, -1, -1, -1], 2)]
    """
    obs_codes, _ = batch.codes("obs_key")
    level, n_level = anchors  # key_1 = (o_t), within the task group
    previous = batch.prev_row
    ancestor = previous  # the row at t − (k − 1), or -1 where t < k − 1
    levels = []
    for k in range(1, history_length + 2):
        if k > 1:
            shorter = level
            rows = np.flatnonzero((shorter >= 0) & (ancestor >= 0))
            level = np.full(len(batch), -1, dtype=np.int64)
            level[rows], n_level = combine_codes(shorter[rows], obs_codes[ancestor[rows]])
            ancestor = np.where(ancestor >= 0, previous[np.maximum(ancestor, 0)], -1)
        count = np.bincount(np.maximum(level, 0), weights=level >= 0, minlength=n_level)
        level = np.where((level >= 0) & (count[np.maximum(level, 0)] >= 2), level, -1)
        levels.append((level, n_level))
    return levels


def level_advantage(
    step_return: np.ndarray, codes: np.ndarray, n_sets: int, norm: Norm
) -> tuple[np.ndarray, np.ndarray]:
    """``a_k`` of the rows in a level-k group (population std), and those rows; ``codes`` as
    :func:`context_levels` gives them (-1: no group; every group has two or more rows).

    Example:
        >>> advantage, rows = level_advantage(
        ...     np.array([1.0, 3.0, 5.0]), np.array([0, 0, -1]), 1, "mean")
        >>> advantage.tolist(), rows.tolist()
        ([-1.0, 1.0], [0, 1])
    """
    members = np.flatnonzero(codes >= 0)
    code, value = codes[members], step_return[members]
    count = np.bincount(code, minlength=n_sets)
    mean = np.bincount(code, weights=value, minlength=n_sets) / np.maximum(count, 1)
    centred = value - mean[code]
    if norm == "mean_std":
        pstd = np.sqrt(
            np.bincount(code, weights=centred * centred, minlength=n_sets) / np.maximum(count, 1)
        )
        centred = centred / (pstd[code] + STD_EPS)
    return centred, members


def hgpo_step_sets(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Level-1 groups: rows of one task group with the same current observation (the coarsest
    level of the hierarchy, GiGPO's anchor sets).

    The ``step_sets`` declaration of HGPO.
    """
    return anchor_sets(batch, "obs")


@register("hgpo", step_sets=hgpo_step_sets)
def hgpo(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    history_length: int = 2,
    alpha: float = 1.0,
    base_group: bool = False,
    norm: Norm = "mean_std",
    lone_row: LoneRow = "zero",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Weighted mean of the row's normalised step return over its context groups of two or more.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> [round(float(a), 6) for a in compute("hgpo", batch, norm="mean").advantages]
        [1.0, -1.0]
    """
    step_return = step_returns(batch, gamma, invalid_penalty)  # G_i
    n = len(batch)
    weighted_sum = np.zeros(n)  # Σ_{k ∈ I(i)} w_k·a_k(i)
    weight_sum = np.zeros(n)  # Σ_{k ∈ I(i)} w_k

    if base_group:  # a_0(i) = A^E_i, weight (0 + 1)^α = 1
        base = episode_advantage(batch, norm, "rows", invalid_penalty)
        if lone_row == "score":
            lone = np.bincount(batch.group_codes, minlength=batch.n_groups)[batch.group_codes] == 1
            lone_score = episode_scores(batch, invalid_penalty)
            if norm == "mean_std":
                lone_score = lone_score / (1.0 + STD_EPS)
            base = np.where(lone, lone_score, base)
        weighted_sum += base
        weight_sum += base != 0

    anchors = anchor_sets(batch, "obs")
    levels = context_levels(batch, anchors, history_length)
    grouped_rates = {}
    for k, (codes, n_sets) in enumerate(levels, start=1):
        advantage, rows = level_advantage(step_return, codes, n_sets, norm)
        item = advantage != 0  # k ∈ I(i)
        weight = float(k + 1) ** alpha  # w_k = (k + 1)^α
        weighted_sum[rows] += weight * advantage
        weight_sum[rows[item]] += weight
        grouped_rates[f"grouped_rate_k{k}"] = len(rows) / n

    has_items = weight_sum > 0
    advantages = np.where(has_items, weighted_sum / (weight_sum + STD_EPS), 0.0)
    diagnostics = base_diagnostics(batch, *anchors)  # step-level sets: the level-1 groups
    diagnostics.update(grouped_rates)
    return EstimatorResult(advantages, diagnostics)
