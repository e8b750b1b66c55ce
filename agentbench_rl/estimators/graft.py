"""GRAFT: a graph GAE, TD residuals of the group graph's values, normalised per state.

Source: "GRAFT" (arXiv:2609.28963), as the issue that asked for it summarises the paper (Bellman
iteration on the trajectory graph, ``A = γV(s') − V(s)``, a "graph GAE" over k-hop residuals,
normalisation per same-state group); the paper's method section could not be read from this
machine, so the equations below are this project's reading, not a transcription
(``docs/estimators.md``).

Equations, per task group g: nodes are the group's observations plus absorbing success and
failure nodes (value 0); each row is a transition ``(s_i, r_i, s'_i)``, s'_i the next row's
observation or, after a trajectory's last row, the absorbing node of its outcome::

    V(s)  = mean_{i leaving s} (r_i + γ·V(s'_i))        (the fixed point of Bellman iteration,
                                                       solved exactly: one sparse system)
    δ_i   = r_i + γ·V(s'_i) − V(s_i)                   (``γV(s') − V(s)`` with the reward)
    Â_i   = Σ_{l=0}^{k−1} (γλ)^l·δ_{t+l}               along the row's trajectory (k = hops;
                                                       0: to its end)
    A^S_i = norm(Â_i, {Â_j : j in g, s_j = s_i})        (per same-state group)
    A_i   = A^E_i + ω·A^S_i                            (A^E: GiGPO's episode term)

Choices the summary leaves open, settled here and listed in ``docs/estimators.md``: states are
observations (what a trainer of LLM agents keys by); the backup is the behaviour's expectation
over the rows leaving a state (the empirical policy), solved exactly rather than iterated; the
residuals are summed along the row's own trajectory; the episode term is GiGPO's, so the
estimator sits in the GiGPO family (ω = 1, γ = λ = 0.95, hops = 0).
"""

from __future__ import annotations

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    EpisodeStats,
    Norm,
    anchor_sets,
    anchor_step_sets,
    base_diagnostics,
    episode_advantage,
    normalise,
    observation_graph,
    set_stats,
    state_values,
)
from agentbench_rl.estimators.registry import EstimatorResult, register


def truncated_sum_to_go(
    batch: StepBatch, values: np.ndarray, discount: float, hops: int
) -> np.ndarray:
    """``Σ_{l=0}^{hops−1} discount^l·values_{t+l}`` along each trajectory (``hops`` 0: to the
    end), every trajectory at once: one vectorised shift per hop.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": 0, "t": t, "reward": 0.0, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True} for t in range(3)])
        >>> truncated_sum_to_go(batch, np.array([1.0, 2.0, 4.0]), 0.5, 2).tolist()
        [2.0, 4.0, 4.0]
    """
    n = len(batch)
    if hops == 0:
        from agentbench_rl.estimators.common import discounted_sum_to_go

        return discounted_sum_to_go(batch, values, discount)
    following = np.append(np.where(batch.next_row >= 0, batch.next_row, n), n)
    padded = np.append(values, 0.0)
    total = np.zeros(n)
    reach = np.arange(n)
    weight = 1.0
    for _ in range(hops):
        total += weight * padded[reach]
        reach = following[reach]
        weight *= discount
    return total


@register("graft", step_sets=anchor_step_sets)
def graft(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    lam: float = 0.95,
    hops: int = 0,
    omega: float = 1.0,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """GiGPO's episode term plus a graph GAE normalised per state (our reading of GRAFT).

    The equations, the source and every choice the source left open are in this module's
    docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> # V(o) = 2, δ = ±1 (so Â = ±1, ±1 about their mean); episode term ±1
        >>> compute("graft", batch, norm="mean").advantages.tolist()
        [2.0, -2.0]
    """
    node, successor, n_nodes = observation_graph(batch)
    successor = np.minimum(successor, n_nodes)  # both absorbing nodes have value 0
    values, _ = state_values(node, successor, batch.reward, n_nodes, gamma)
    delta = batch.reward + gamma * values[successor] - values[node]  # δ_i
    graph_gae = truncated_sum_to_go(batch, delta, gamma * lam, hops)  # Â_i

    anchors, n_anchors = anchor_sets(batch, "obs")  # (group, observation) = the graph's node
    step_adv = normalise(graph_gae, anchors, set_stats(graph_gae, anchors, n_anchors), norm)
    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)
    diagnostics = base_diagnostics(batch, anchors, n_anchors)
    diagnostics["n_nodes"] = n_nodes
    return EstimatorResult(episode_adv + omega * step_adv, diagnostics)
