"""Gated-BEPO: Bellman credit on the group's empirical state graph, used where states branch.

Source: the Gated-BEPO paper's abstract, as read in ``docs/estimators.md`` ("our reading of the
abstract"); the formulas below are that reading, not a transcription of the paper's method.

Equations (``docs/estimators.md``), per group, nodes = state keys plus a terminal ⊥ (V = 0);
each row is a transition (s_i, r_i, s'_i), s'_i the next row's state or ⊥ after the last row::

    V(s)  = b(s) + γ·Σ_{s'} M(s, s')·V(s')      b: mean raw reward leaving s,
                                                M: share of the rows leaving s that reach s'
    δ_i   = r_i + γ·V(s'_i) − V(s_i)
    A^B_i = Σ_{l ≥ 0} (γλ)^l·δ_{t+l}            along the row's trajectory
    g_i   = 1 if the rows leaving s_i reach ≥ 2 distinct successors (⊥ and s_i itself count)
    D     = std(A^B over the group's gated rows) + 1e-6 with norm="mean_std" and ≥ 2 gated
            rows, else 1
    additive: A_i = A^E_i + ω·g_i·A^B_i / D;    replace: A_i = (1 − g_i)·A^E_i + g_i·A^B_i / D

Choices the abstract leaves open, fixed by the spec: the empirical behaviour policy (not a
greedy backup), the exact solve rather than iteration, the binary gate, and A^B scaled but not
centred. Every observed chain reaches ⊥, so ``I − γM`` is non-singular even at γ = 1.

All groups are solved at once: one block-diagonal sparse system over (group, state) nodes.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    STD_EPS,
    EpisodeStats,
    Norm,
    base_diagnostics,
    combine_codes,
    discounted_sum_to_go,
    episode_advantage,
    set_stats,
    state_values,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

Mixing = Literal["additive", "replace"]


@register("gated_bepo")
def gated_bepo(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    lam: float = 0.95,
    omega: float = 1.0,
    mixing: Mixing = "additive",
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Episode advantage plus gated GAE-style Bellman credit from the empirical state graph.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "s", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> compute("gated_bepo", batch, norm="mean").advantages.tolist()  # ⊥ only: no gate
        [1.0, -1.0]
    """
    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)  # A^E_i

    # Nodes: (group, state_key); successor ⊥ = n_nodes after a trajectory's last row.
    state_codes, _ = batch.codes("state_key")
    node, n_nodes = combine_codes(batch.group_codes, state_codes)
    following = batch.next_row
    successor = np.where(following >= 0, node[following], n_nodes)
    values, distinct_successors = state_values(node, successor, batch.reward, n_nodes, gamma)

    # δ_i = r_i + γ·V(s'_i) − V(s_i);  A^B_i = Σ_l (γλ)^l δ_{t+l}
    delta = batch.reward + gamma * values[successor] - values[node]
    bellman_adv = discounted_sum_to_go(batch, delta, gamma * lam)

    # g_i = 1 where s_i has ≥ 2 distinct successors; D from the group's gated rows.
    gate = distinct_successors[node] >= 2
    gated_stats = set_stats(bellman_adv[gate], batch.group_codes[gate], batch.n_groups)
    if norm == "mean_std":
        scale = np.where(gated_stats.count >= 2, gated_stats.std + STD_EPS, 1.0)
    else:
        scale = np.ones(batch.n_groups)
    scaled = bellman_adv / scale[batch.group_codes]

    if mixing == "additive":
        advantages = episode_adv + omega * np.where(gate, scaled, 0.0)
    else:
        advantages = np.where(gate, scaled, episode_adv)
    diagnostics = base_diagnostics(batch, node, n_nodes)
    diagnostics.update(gate_rate=float(np.mean(gate)), n_nodes=n_nodes)
    return EstimatorResult(advantages, diagnostics)
