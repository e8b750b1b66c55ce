"""GraphHCA: hindsight credit from a log success potential on the group's pooled graph.

Source: "GraphHCA" (arXiv:2609.35084), as the issue that asked for it summarises the paper
(hindsight credit from a log success potential, the fixed point of a discounted expectation on
the pooled graph, increments standardised per source state, GRPO at w_s = 0; its Table 3
replaces the expectation by a power mean, ω = 1, 5, 10, ∞); the paper's method section could
not be read from this machine, so the equations below are this project's reading, not a
transcription (``docs/estimators.md``).

Equations, per task group g: nodes are the group's observations plus absorbing success ⊕
(P = 1) and failure ⊖ (P = 0) nodes; each row is a transition ``s_i → s'_i``, s'_i the next row's
observation or, after a trajectory's last row, the absorbing node of its outcome::

    P(s)  = γ·M_ω({P(s'_i) : i leaving s})     M_ω(x) = (mean x^ω)^{1/ω}; M_∞ = max
    Φ(s)  = log max(P(s), floor)                (Φ(⊕) = 0, Φ(⊖) = log floor)
    δ_i   = Φ(s'_i) − Φ(s_i)                    (the potential the step gained, in hindsight)
    A^S_i = norm(δ_i, {δ_j : j leaving s_i})    (standardised per source state)
    A_i   = A^E_i + w_s·A^S_i                   (A^E: GRPO's episode term; GRPO at w_s = 0)

P is the least fixed point: at ω = 1 one sparse linear solve (the success probability of the
behaviour on the graph, discounted per step); at ω = ∞ ``P(s) = γ^{d(s)}`` with d the fewest
edges to ⊕ (the max backup ranks states as GraphGPO's shortest path does); otherwise value
iteration from P = 0 until no node moves by 1e-15.

``power`` is ω: a finite number ≥ 1, or ``"inf"`` for the max (a command line's ``key=value``
takes finite numbers only).

Choices the summary leaves open, settled here and listed in ``docs/estimators.md``: states are
observations; γ = 0.95 (the trainers' discount), floor = 0.01, w_s = 1, ω = 1; a step's
increment is standardised among the rows leaving its state (0 for a state left once);
success is the trajectory's ``success`` (a positive return where the batch has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    EpisodeStats,
    Norm,
    base_diagnostics,
    episode_advantage,
    normalise,
    observation_graph,
    set_stats,
    state_values,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

#: Value iteration stops when no node's potential moves by more than this, or after the cap (the
#: increments are standardised per state, so an error of the potential is divided by at least
#: 1e-6 where a state's increments should all be equal: it must stay far below that).
TOLERANCE = 1e-15
MAX_SWEEPS = 100_000


def success_potential(
    node: np.ndarray, successor: np.ndarray, n_nodes: int, gamma: float, power: float
) -> np.ndarray:
    """``P`` over the nodes, then ⊕ (1) and ⊖ (0) at ``n_nodes`` and ``n_nodes + 1``
    (module docstring).

    Example:
        >>> # A -> B -> ⊕ and A -> ⊖, γ = 0.5: P(B) = 0.5; P(A) = 0.5·mean(0.5, 0) or 0.5·max
        >>> node, successor = np.array([0, 1, 0]), np.array([1, 2, 3])
        >>> [success_potential(node, successor, 2, 0.5, w)[:2].tolist() for w in (1, np.inf)]
        [[0.125, 0.5], [0.25, 0.5]]
    """
    reached_success = (successor == n_nodes).astype(np.float64)
    if power == 1:  # P(s) = γ·mean P(s'): the linear closure, both absorbing nodes folded in
        inner = np.minimum(successor, n_nodes)
        values, _ = state_values(node, inner, gamma * reached_success, n_nodes, gamma)
        return np.append(values[:n_nodes], [1.0, 0.0])
    if np.isinf(power):  # γ^{fewest edges to ⊕}
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import dijkstra

        size = n_nodes + 2
        reverse = csr_matrix((np.ones(len(node)), (successor, node)), shape=(size, size))
        distance = dijkstra(reverse, directed=True, indices=[n_nodes], unweighted=True)[0]
        potential: np.ndarray = np.where(np.isfinite(distance), np.power(gamma, distance), 0.0)
        potential[n_nodes + 1] = 0.0
        return potential
    leaving = np.bincount(node, minlength=n_nodes).astype(np.float64)
    potential = np.append(np.zeros(n_nodes), [1.0, 0.0])
    for _ in range(MAX_SWEEPS):
        mean = np.bincount(node, weights=potential[successor] ** power, minlength=n_nodes)
        updated = gamma * (mean / leaving) ** (1.0 / power)
        moved = float(np.max(np.abs(updated - potential[:n_nodes]), initial=0.0))
        potential[:n_nodes] = updated
        if moved <= TOLERANCE:
            break
    return potential


def source_step_sets(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """GraphHCA's step-level sets: the rows leaving each (group, observation) node.

    The ``step_sets`` declaration of GraphHCA.
    """
    node, _, n_nodes = observation_graph(batch)
    return node, n_nodes


@register("graphhca", step_sets=source_step_sets)
def graphhca(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    power: float | Literal["inf"] = 1.0,
    floor: float = 0.01,
    step_weight: float = 1.0,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """GRPO's episode term plus log-potential increments per state (our reading of GraphHCA).

    The equations, the source and every choice the source left open are in this module's
    docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 1.0), ("y", 0.0))])
        >>> # P(o) = 0.5·mean(1, 0) = 0.25 at γ = 0.5; δ = log 1 − log 0.25 and log 0.01 −
        >>> # log 0.25, ±2.30 about their mean; episode term ±0.5
        >>> compute("graphhca", batch, gamma=0.5, norm="mean").advantages.round(4).tolist()
        [2.8026, -2.8026]
    """
    node, successor, n_nodes = observation_graph(batch)
    exponent = np.inf if power == "inf" else float(power)
    potential = success_potential(node, successor, n_nodes, gamma, exponent)  # P
    log_potential = np.log(np.maximum(potential, floor))  # Φ
    increment = log_potential[successor] - log_potential[node]  # δ_i
    step_adv = normalise(increment, node, set_stats(increment, node, n_nodes), norm)

    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)
    diagnostics = base_diagnostics(batch, node, n_nodes)
    diagnostics["n_nodes"] = n_nodes
    return EstimatorResult(episode_adv + step_weight * step_adv, diagnostics)
