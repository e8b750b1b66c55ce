"""ProGPO: exact-prefix peers for the step term, fused state potentials where a row has none.

Source: the ProGPO paper's abstract, as read in ``docs/estimators.md`` ("our reading of the
abstract"); the formulas below are that reading, not a transcription of the paper's method.

Equations (``docs/estimators.md``)::

    prefix key of row i at step t:  (o_0, u_0, o_1, u_1, ..., o_t) of its trajectory
    P(i) = rows of i's group with the same prefix key
    level-k key (k = 0..depth):     (o_{t−k}, u_{t−k}, ..., u_{t−1}, o_t), clipped at t = 0;
                                    plus a level keyed by semantic_key when every row has one
    per level l, over the group's rows sharing the key: count m_l, mean_l of G, unbiased v_l
    Φ(i) = Σ_l w_l·mean_l / Σ_l w_l over levels with m_l ≥ 2,  w_l = m_l / (v_l + 0.01);
           Φ(i) = G_i when no level has m_l ≥ 2
    C_i  = r_i + γ·Φ(next row) − Φ(i)               (Φ = 0 after the last row; raw reward)
    A^S_i = norm(G_i, {G_j : j ∈ P(i)})              if |P(i)| ≥ 2
          = C_i / (std(C over the group's rows) + 1e-6)  otherwise (never centred)
          = 0                                        for a group of a single row
    A_i  = A^E_i + ω·A^S_i

Choices the abstract leaves open, fixed by the spec: the fusion weights (inverse variance times
count), the 0.01 variance floor, clipped keys compared only within their level (so the levels
at t < depth repeat each other and are counted as they are), and the transition fallback scaled
but not centred whatever ``norm`` is. A group of one row has no std of C to divide by; its step
term is 0 and it counts in neither ``peer_rate`` nor ``transition_rate``.

Keys are integer codes built by re-factorising tuples of codes (never by joining strings), so
two built keys are equal exactly when their tuples of parts are equal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

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

VARIANCE_FLOOR = 0.01  # the 0.01 in w_l = m_l / (v_l + 0.01)


def prefix_sets(
    batch: StepBatch, obs_codes: np.ndarray, action_codes: np.ndarray
) -> tuple[np.ndarray, int]:
    """Codes of the prefix sets: rows of one group with equal ``(o_0, u_0, ..., o_t)``.

    Built forwards in t, one vectorised step per time index: the prefix at t is the tuple
    (prefix at t−1, u_{t−1}, o_t). Prefixes of different lengths never match, so each t gets
    its own block of codes.
    """
    order, starts = batch.step_order
    previous = batch.prev_row
    prefix = np.empty(len(batch), dtype=np.int64)
    offset = 0
    for k in range(len(starts) - 1):
        rows = order[starts[k] : starts[k + 1]]
        if k == 0:
            local, count = combine_codes(batch.group_codes[rows], obs_codes[rows])
        else:
            parent = previous[rows]
            local, count = combine_codes(prefix[parent], action_codes[parent], obs_codes[rows])
        prefix[rows] = local + offset
        offset += count
    return prefix, offset


def potential_levels(
    batch: StepBatch, obs_codes: np.ndarray, action_codes: np.ndarray, depth: int
) -> list[tuple[np.ndarray, int]]:
    """Codes of the levels 0..depth (and ``"sem"`` when every row has a semantic key).

    Level k extends level k−1 backwards by ``(o_{t−k}, u_{t−k})``; a row with t < k has no such
    step, its key stays the whole prefix and gets the extension 0, which no real step has.
    """
    level, n_level = combine_codes(batch.group_codes, obs_codes)  # level 0: (o_t)
    levels = [(level, n_level)]
    previous = batch.prev_row
    ancestor = previous  # the row at t − k, or -1 where t < k
    for _ in range(depth):
        has = ancestor >= 0
        if not has.any():
            # Every key is clipped from here on: each deeper level is this one again.
            levels.append((level, n_level))
            continue
        extension = np.zeros(len(batch), dtype=np.int64)
        step_codes, _ = combine_codes(obs_codes[ancestor[has]], action_codes[ancestor[has]])
        extension[has] = step_codes + 1
        level, n_level = combine_codes(level, extension)
        levels.append((level, n_level))
        ancestor = np.where(has, previous[ancestor], -1)
    semantic = batch.semantic_key
    if semantic is not None and not pd.isna(semantic).any():
        semantic_codes, _ = batch.codes("semantic_key")
        levels.append(combine_codes(batch.group_codes, semantic_codes))
    return levels


def fused_potential(step_return: np.ndarray, levels: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """Φ(i): the inverse-variance-weighted mean of G over the row's levels with m ≥ 2."""
    weighted_sum = np.zeros(len(step_return))
    weight_sum = np.zeros(len(step_return))
    for codes, n_sets in levels:
        stats = set_stats(step_return, codes, n_sets)
        count = stats.count[codes]
        # w_l = m_l / (v_l + 0.01), only for levels with m_l ≥ 2
        weight = np.where(count >= 2, count / (stats.var[codes] + VARIANCE_FLOOR), 0.0)
        weighted_sum += weight * stats.mean[codes]
        weight_sum += weight
    return np.where(
        weight_sum > 0, weighted_sum / np.where(weight_sum > 0, weight_sum, 1.0), step_return
    )


@register("progpo", uses=("semantic_key",))
def progpo(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    depth: int = 2,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Episode advantage plus ω times the prefix-peer or transition-credit step advantage.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> compute("progpo", batch, norm="mean").advantages.tolist()  # both share prefix (o)
        [2.0, -2.0]
    """
    step_return = step_returns(batch, gamma, invalid_penalty)  # G_i
    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)  # A^E_i
    obs_codes, _ = batch.codes("obs_key")
    action_codes, _ = batch.codes("action_key")

    # Exact-prefix peers P(i): A^S_i = norm(G_i, G over P(i)) when |P(i)| ≥ 2.
    prefix_codes, n_prefixes = prefix_sets(batch, obs_codes, action_codes)
    p_stats = set_stats(step_return, prefix_codes, n_prefixes)
    has_peers = p_stats.count[prefix_codes] >= 2
    peer_adv = normalise(step_return, prefix_codes, p_stats, norm)

    # Transition credit C_i = r_i + γ·Φ(next) − Φ(i), scaled by the group's std of C.
    potential = fused_potential(
        step_return, potential_levels(batch, obs_codes, action_codes, depth)
    )
    following = batch.next_row
    next_potential = np.where(following >= 0, potential[following], 0.0)
    credit = batch.reward + gamma * next_potential - potential
    c_stats = set_stats(credit, batch.group_codes, batch.n_groups)
    transition_adv = credit / (c_stats.std[batch.group_codes] + STD_EPS)
    uses_transition = ~has_peers & (c_stats.count[batch.group_codes] >= 2)

    step_adv = np.where(has_peers, peer_adv, np.where(uses_transition, transition_adv, 0.0))
    advantages = episode_adv + omega * step_adv
    diagnostics = base_diagnostics(batch, prefix_codes, n_prefixes)
    diagnostics.update(
        peer_rate=float(np.mean(has_peers)),
        transition_rate=float(np.mean(uses_transition)),
    )
    return EstimatorResult(advantages, diagnostics)
