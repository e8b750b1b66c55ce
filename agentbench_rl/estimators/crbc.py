"""CRBC: cross-rollout Bellman closure, Q − V of the behaviour on the group's empirical process.

Source: "Cross-Rollout Bellman Closure" (arXiv:2609.35082), as the issue that asked for it
summarises the paper (the behaviour policy's Bellman fixed point on the group's empirical
process with absorbing success and failure, in one linear solve; Q − V credit gated on anchors
with at least two distinct actions, normalised by the anchor's std; (w_G, w_S) = (1, 5),
β = 0.98); the paper's method section could not be read from this machine, so the equations
below are this project's reading, not a transcription (``docs/estimators.md``).

Equations, per task group g: nodes are the group's observations plus absorbing success ⊕ and
failure ⊖ nodes (value 0); each row is a transition ``(s_i, a_i, r_i, s'_i)``, s'_i the next
row's observation or, after a trajectory's last row, the absorbing node of its outcome::

    y_i     = r_i + β·V(s'_i)                     (the row's one-step target)
    V(s)    = mean_{i leaving s} y_i               (the closure: one sparse linear solve)
    Q(s, a) = mean_{i leaving s with a_i = a} y_i
    g_i     = 1 if the rows leaving s_i hold ≥ 2 distinct actions (the anchor), else 0
    A^S_i   = g_i·(Q(s_i, a_i) − V(s_i)) / (std_{j leaving s_i} y_j + 1e-6)   (norm="mean_std";
              not divided with norm="mean")
    A_i     = w_G·A^E_i + w_S·A^S_i               (A^E: GRPO's episode term, rows counted)

Choices the summary leaves open, settled here and listed in ``docs/estimators.md``: states are
observations; actions are the canonical action keys; "the anchor's std" is the std of the
one-step targets of the rows leaving the anchor (the evidence the anchor's Q and V average); an
anchor of one row, or of one action, gets no step credit; the absorbing nodes are told apart by
the trajectory's ``success`` (a positive return where the batch has none), which decides only
whether two terminal steps count as distinct successors, not a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    STD_EPS,
    EpisodeStats,
    Norm,
    base_diagnostics,
    combine_codes,
    episode_advantage,
    observation_graph,
    set_stats,
    state_values,
)
from agentbench_rl.estimators.registry import EstimatorResult, register


def crbc_step_sets(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """CRBC's step-level sets: the rows leaving each (group, observation) node.

    The ``step_sets`` declaration of CRBC.
    """
    node, _, n_nodes = observation_graph(batch)
    return node, n_nodes


@register("crbc", step_sets=crbc_step_sets)
def crbc(
    batch: StepBatch,
    *,
    gamma: float = 0.98,
    episode_weight: float = 1.0,
    step_weight: float = 5.0,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """GRPO's episode term plus gated Q − V of the behaviour's closure (our reading of CRBC).

    The equations, the source and every choice the source left open are in this module's
    docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": action, "valid": True}
        ...     for traj, action, reward in (("x", "a", 3.0), ("y", "b", 1.0))])
        >>> # V(o) = 2; Q(o, a) = 3, Q(o, b) = 1: Q − V = ±1; episode term ±1; 1 + 5·1
        >>> compute("crbc", batch, norm="mean").advantages.tolist()
        [6.0, -6.0]
    """
    node, successor, n_nodes = observation_graph(batch)
    absorbing = np.minimum(successor, n_nodes)  # ⊕ and ⊖ both have value 0
    values, _ = state_values(node, absorbing, batch.reward, n_nodes, gamma)
    target = batch.reward + gamma * values[absorbing]  # y_i

    action_codes, _ = batch.codes("action_key")
    pair, n_pairs = combine_codes(node, action_codes)  # (node, action)
    q = set_stats(target, pair, n_pairs).mean[pair]
    pair_node = np.empty(n_pairs, dtype=np.int64)
    pair_node[pair] = node
    gate = np.bincount(pair_node, minlength=n_nodes)[node] >= 2  # ≥ 2 distinct actions
    advantage = q - values[node]
    if norm == "mean_std":
        advantage = advantage / (set_stats(target, node, n_nodes).std[node] + STD_EPS)
    step_adv = np.where(gate, advantage, 0.0)

    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)
    diagnostics = base_diagnostics(batch, node, n_nodes)
    diagnostics.update(gate_rate=float(np.mean(gate)), n_nodes=n_nodes)
    return EstimatorResult(episode_weight * episode_adv + step_weight * step_adv, diagnostics)
