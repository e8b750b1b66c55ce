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

A finding about the code's ``a ≠ 0`` rule: in a group whose returns are all equal (or where a
return sits on its group's mean), the float mean can differ from them by ~1e-17, so ``a`` is not
exactly 0 (±1e-11 after dividing by the std's 0 + 1e-6) and the item takes its full share of the
weights, diluting the row's other items, or not, by rounding: whether it does depends on the
summation order. Ours gives exactly 0 to a set of equal values, at every level (below).

Differs from verl-agent on purpose: a level-k group whose returns are all equal gives each of
its rows exactly 0, so it drops out of their weights (verl-agent's rounding can keep it: on the
100k-row batch of ``bench estimators`` one level-2 group of three equal returns dilutes its rows'
level-1 item from 0.82 to 0.33); with ``base_group``, a task group of a single row gets the
spec's episode advantage 0 (``lone_row="zero"``), where verl-agent gives it its score (mean 0,
std 1 for a set of one); and a task group whose rows' scores are all equal (one trajectory and
no invalid action) gets exactly 0, where verl-agent's float mean of the equal scores can miss
them by an ulp, so its ``a_0`` is ~1e-11 instead of 0 and, by the ``a ≠ 0`` rule, the level-0
item joins the weights or not by rounding (on lone-trajectory groups of non-representable
returns, about a quarter of the groups either way). ``lone_row="score"`` restores all three: every
item is then computed as verl-agent computes it, with torch's float64 mean and std over each
group's rows in the code's order (the episode term's in batch order, step-major:
:func:`verl_agent_episode_term`; a level's by trajectory id, then step), so it carries the same
ulps (needs torch). Step order within a trajectory is ``t`` here,
the row order there (verl-agent's batches are in time order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    STD_EPS,
    LoneRow,
    Norm,
    anchor_sets,
    base_diagnostics,
    combine_codes,
    episode_advantage,
    episode_scores,
    step_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register


@dataclass(frozen=True)
class ContextLevel:
    """The level-k groups of two or more rows: ``members`` (row indices), their dense group
    ``codes`` (``n_sets`` groups) and each group's ``count``."""

    members: np.ndarray
    codes: np.ndarray
    n_sets: int
    count: np.ndarray

    def row_codes(self, n_rows: int) -> np.ndarray:
        """The group code of every row, -1 for a row in no group of two; one more -1 at the
        end, so that indexing with a row of -1 (no predecessor) reads -1 too."""
        codes = np.full(n_rows + 1, -1, dtype=np.int64)
        codes[self.members] = self.codes
        return codes


def _grouped(codes: np.ndarray, rows: np.ndarray, n_sets: int) -> ContextLevel:
    """The rows of ``rows`` whose code is shared by another row, re-coded densely."""
    count = np.bincount(codes, minlength=n_sets)
    shared = count[codes] >= 2
    kept = np.flatnonzero(count >= 2)
    dense = np.cumsum(count >= 2) - 1  # old code -> new code, for the kept ones
    return ContextLevel(rows[shared], dense[codes[shared]], len(kept), count[kept])


def context_levels(
    batch: StepBatch, anchors: tuple[np.ndarray, int], history_length: int
) -> list[ContextLevel]:
    """The level-k groups of two or more rows, k = 1 .. history_length + 1. ``anchors`` are
    the level-1 keys, the rows' anchor sets (:func:`anchor_sets` keyed by observation).

    A level-k key is the pair of level-(k − 1) keys of the row and of its predecessor:
    ``key_k(i) = (o_{t−k+1}, ..., o_t)`` is determined by, and determines,
    ``(key_{k−1}(i), key_{k−1}(prev i))``. So each level is one re-factorisation of pairs of
    the level below's codes, over the rows that can still share a key: a row whose level-(k − 1)
    key, or whose predecessor's, is held by no other row holds a level-k key no other row holds
    (rows have distinct predecessors), and a row with t < k − 1 has a predecessor with no
    level-(k − 1) key.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": t, "reward": 0.0, "obs_key": obs,
        ...      "state_key": obs, "action_key": "a", "valid": True}
        ...     for traj, path in (("x", "ACA"), ("y", "BCA")) for t, obs in enumerate(path)])
        >>> levels = context_levels(batch, anchor_sets(batch, "obs"), 2)
        >>> [level.row_codes(len(batch))[:-1].tolist() for level in levels]
        [[0, 1, 0, -1, 1, 0], [-1, -1, 0, -1, -1, 0], [-1, -1, -1, -1, -1, -1]]
    """
    codes, n_sets = anchors  # key_1 = (o_t), within the task group
    level = _grouped(codes, np.arange(len(batch)), n_sets)
    levels = [level]
    previous = batch.prev_row
    for _ in range(history_length):
        predecessor_codes = level.row_codes(len(batch))[previous[level.members]]
        pairs = predecessor_codes >= 0  # both keys held by another row
        rows = level.members[pairs]
        pair_codes, n_pairs = combine_codes(level.codes[pairs], predecessor_codes[pairs])
        level = _grouped(pair_codes, rows, n_pairs)
        levels.append(level)
    return levels


def level_advantage(
    step_return: np.ndarray,
    level: ContextLevel,
    norm: Norm,
    code_order: np.ndarray | None = None,
) -> np.ndarray:
    """``a_k`` of the level's member rows (population std), in ``level.members`` order: exactly
    0 in a group whose returns are all equal; or, given ``code_order`` (each row's rank in the
    order verl-agent sums a group: by trajectory id, then step), with verl-agent's own rounding
    (torch's float64 mean and std, group by group), which its ``a ≠ 0`` rule turns into
    weights where a return sits at its group's mean (``lone_row="score"``).

    Example:
        >>> level = ContextLevel(np.array([0, 1]), np.array([0, 0]), 1, np.array([2]))
        >>> level_advantage(np.array([1.0, 3.0, 5.0]), level, "mean").tolist()
        [-1.0, 1.0]
    """
    code, value = level.codes, step_return[level.members]
    if code_order is not None:
        return _torch_level_advantage(value, code, code_order[level.members], level.n_sets, norm)
    mean = np.bincount(code, weights=value, minlength=level.n_sets) / level.count
    centred = value - mean[code]
    if norm == "mean_std":
        pstd = np.sqrt(
            np.bincount(code, weights=centred * centred, minlength=level.n_sets) / level.count
        )
        centred = centred / (pstd[code] + STD_EPS)
    low, high = np.full(level.n_sets, np.inf), np.full(level.n_sets, -np.inf)
    np.minimum.at(low, code, value)
    np.maximum.at(high, code, value)
    return np.where((low == high)[code], 0.0, centred)


def _torch_level_advantage(
    value: np.ndarray, code: np.ndarray, rank: np.ndarray, n_sets: int, norm: Norm
) -> Any:
    """:func:`level_advantage` with verl-agent's arithmetic, each group summed in its order."""
    import torch

    advantage = np.empty(len(value))
    for group in range(n_sets):
        rows = np.flatnonzero(code == group)
        rows = rows[np.argsort(rank[rows], kind="stable")]
        r = torch.tensor(value[rows], dtype=torch.float64)
        centred = r - r.mean()
        if norm == "mean_std":
            centred = centred / (r.std(unbiased=False) + STD_EPS)
        advantage[rows] = centred.numpy()
    return advantage


def verl_agent_episode_term(batch: StepBatch, scores: np.ndarray, norm: Norm) -> np.ndarray:
    """The episode advantage as verl-agent's ``trajectory_advantages`` computes it: per task
    group, every row's score (its rows in step-major order, as verl-agent's batches hold them)
    through torch's float64 mean and unbiased std; a group of one row gets mean 0 and std 1.
    Its rounding is verl-agent's, ulp for ulp, which HGPO's ``a ≠ 0`` rule can turn into a
    different weight (module docstring): what ``lone_row="score"`` is for."""
    import torch

    order = np.lexsort((batch.traj_codes, batch.t))
    advantage = np.empty(len(batch))
    for group in range(batch.n_groups):
        rows = order[batch.group_codes[order] == group]
        values = torch.tensor(scores[rows], dtype=torch.float64)
        if len(rows) == 1:
            mean, std = (torch.tensor(value, dtype=torch.float64) for value in (0.0, 1.0))
        else:
            mean, std = values.mean(), values.std()
        centred = values - mean
        if norm == "mean_std":
            centred = centred / (std + STD_EPS)
        advantage[rows] = centred.numpy()
    return advantage


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
        if lone_row == "score":  # verl-agent's arithmetic, rounding included
            base = verl_agent_episode_term(batch, episode_scores(batch, invalid_penalty), norm)
        else:
            base = episode_advantage(batch, norm, "rows", invalid_penalty)
        weighted_sum += base
        weight_sum += base != 0

    anchors = anchor_sets(batch, "obs")
    code_order = None
    if lone_row == "score":  # verl-agent's summation order: trajectory ids sorted, then steps
        traj_rank = np.unique(batch.traj, return_inverse=True)[1].reshape(-1)
        code_order = np.lexsort((batch.t, traj_rank)).argsort()
    grouped_rates = {}
    for k, level in enumerate(context_levels(batch, anchors, history_length), start=1):
        advantage = level_advantage(step_return, level, norm, code_order)
        weight = float(k + 1) ** alpha  # w_k = (k + 1)^α
        weighted_sum[level.members] += weight * advantage
        weight_sum[level.members] += weight * (advantage != 0)  # k ∈ I(i) when a_k(i) ≠ 0
        grouped_rates[f"grouped_rate_k{k}"] = len(level.members) / n

    has_items = weight_sum > 0
    advantages = np.where(has_items, weighted_sum / (weight_sum + STD_EPS), 0.0)
    diagnostics = base_diagnostics(batch, *anchors)  # step-level sets: the level-1 groups
    diagnostics.update(grouped_rates)
    return EstimatorResult(advantages, diagnostics)
