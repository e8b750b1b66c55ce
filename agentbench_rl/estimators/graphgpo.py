"""GraphGPO: a step is worth how close it brings the group to success on the group's own graph.

Source: "Beyond Trajectory-Level Attribution: Graph-Based Credit Assignment for Agentic
Reinforcement Learning" (arXiv:2605.26684, ICML 2026), and its public code (verl-agent's
``recipe/GraphGPO/core_graph.py``: ``ComplexGraph.from_data``, ``all_to_target_shortest_paths``,
``compute_graph_path_returns``, ``compute_graphgpo_outcome_advantage``; the normalisation is
``gigpo/core_gigpo.py``'s).

Equations (``docs/estimators.md``), per task group g, for row i with observation ``o_i``::

    next_i  = ★_g                     if i is its trajectory's last row and R(τ_i) > 0
            = o'_i                    otherwise (the observation after the step)
    E_g     = {o_i → next_i : i in g}                   (the group's state-transition graph)
    d(v)    = fewest edges from v to ★_g in E_g         (d(★_g) = 0)
            = max{finite d in g} + 1                     when ★_g is unreachable from v
    R_i     = c·γ^{d(next_i)}                            normalize_distance = False
            = c·γ^{d(next_i) − d(o_i) + 1}               normalize_distance = True
    A^S_i   = norm(R_i, {R_j : j in g, o_j = o_i})       (GiGPO's anchor sets)
    A^E_i   = norm(score_i, {score_j : j in g})          (GiGPO's episode term, every row)
    A_i     = w_S·A^S_i + w_E·A^E_i

with ``c`` = 10 and γ = 0.10 (the recipe's config), ``score_i = R(τ_i) − p·[not valid_i]``.

Choices the paper leaves open, settled by the authors' code and kept here: a trajectory reaches
the success node ★ when its return is positive (the code's ``episode_rewards > 0``: with
success rewards, when it was won; with partial env rewards, any positive return); ★ is a node
of every group, so in a group where no trajectory reached it every distance is 0 + 1 = 1 and
every ``R`` equals ``c·γ`` (its step term is 0); edges are unweighted (weight 1) and parallel
edges count once; an unreachable node's distance is one more than the group's farthest finite
one; the step sets are the anchor sets of the exact observation (the graph's optional node
merge does not reach them); the episode term is GiGPO's over every row of the group (``mean``
and the unbiased std of the rows' scores); the graph return carries no invalid-action penalty
(the episode score does, as GiGPO's).

``o'_i`` is the batch's ``next_obs_key`` (the episode driver writes it); a batch without that
column reads it as the next row's ``obs_key``, and a failed trajectory's last step then leads to
a node of its own (its final observation is not in the batch).

Differs from the code on purpose, each documented in ``docs/estimators.md``:

- a task group of a single row gets ``A^E = 0`` (the spec's ``|S| = 1`` rule), where the code
  gives it its score (mean 0, std 1 for a set of one): ``lone_row="score"`` restores that;
- ★ is a node no observation can be (the code's is the string ``'success'``, which an
  observation reading "success" would be);
- the code's ``enable_similarity`` node merge (``difflib`` ratio ≥ ``similarity_thresh`` to the
  first-seen representative) is not offered: the batch carries observation keys, not texts, and
  the merge depends on the order rows arrive in, which no estimator here may (a batch's
  advantages are invariant to row order). Give merged keys as ``obs_key`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    LoneRow,
    Norm,
    anchor_sets,
    base_diagnostics,
    combine_codes,
    episode_advantage,
    lone_rows_scored,
    normalise,
    set_stats,
    trajectory_groups,
    trajectory_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

#: The code's return of a step onto the success node (``10*gamma**0``).
SUCCESS_VALUE = 10.0


def next_nodes(batch: StepBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The graph of every group at once: each row's node (``o_i``) and next node
    (``next_i``), the group of every node, and the node count. Nodes are dense codes of
    (group, observation key); each group's success node ★ comes after them.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": t, "reward": reward, "obs_key": obs,
        ...      "state_key": obs, "action_key": "a", "valid": True}
        ...     for traj, path, last in (("x", "AB", 10.0), ("y", "AC", 0.0))
        ...     for t, obs in enumerate(path) for reward in [last if t == 1 else 0.0]])
        >>> node, following, group, count = next_nodes(batch)
        >>> node.tolist(), following.tolist(), count   # ★ is node 4; y ends at a node of its own
        ([0, 1, 0, 2], [1, 4, 2, 3], 5)
    """
    n = len(batch)
    following = batch.next_row
    last = following < 0
    won = trajectory_returns(batch)[batch.traj_codes] > 0
    # Observation keys and next keys share one code space (a next observation is a node too);
    # the batch's cached codes of each column are joined, never the keys themselves again.
    obs_codes, n_obs = batch.codes("obs_key")
    if batch.next_obs_key is not None:
        after = _joined_codes(batch, obs_codes, n_obs)
    else:
        after = obs_codes[np.where(last, 0, following)]
        ends = last & ~won  # a failed trajectory's end: a node of its own
        after[ends] = n_obs + batch.traj_codes[ends]
    keys = np.concatenate([obs_codes, after])
    groups = np.concatenate([batch.group_codes, batch.group_codes])
    codes, n_codes = combine_codes(groups, keys)
    node, target = codes[:n], codes[n:].copy()
    target[last & won] = n_codes + batch.group_codes[last & won]  # ★ of the row's group
    node_group = np.empty(n_codes + batch.n_groups, dtype=np.int64)
    node_group[codes] = groups
    node_group[n_codes:] = np.arange(batch.n_groups)
    return node, target, node_group, n_codes + batch.n_groups


def _joined_codes(batch: StepBatch, obs_codes: np.ndarray, n_obs: int) -> np.ndarray:
    """``next_obs_key``'s codes in ``obs_key``'s code space: a key both columns hold gets its
    observation code, a key only ``next_obs_key`` holds a new code from ``n_obs`` on."""
    assert batch.next_obs_key is not None
    next_codes, n_next = batch.codes("next_obs_key")
    rows = np.arange(len(batch))
    obs_row, next_row = np.empty(n_obs, dtype=np.int64), np.empty(n_next, dtype=np.int64)
    obs_row[obs_codes] = rows  # any row holding each key
    next_row[next_codes] = rows
    mapping = pd.Index(batch.obs_key[obs_row]).get_indexer(batch.next_obs_key[next_row])
    unseen = mapping < 0
    mapping[unseen] = n_obs + np.arange(int(unseen.sum()))
    joined: np.ndarray = mapping[next_codes].astype(np.int64, copy=False)
    return joined


def distances_to_success(batch: StepBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every row's node and next node, and each node's distance to its group's ★ (unreachable:
    the group's farthest finite distance + 1). One breadth-first search from every ★ over the
    reversed edges of all groups at once (compiled: ``scipy.sparse.csgraph``).

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": t, "reward": reward, "obs_key": obs,
        ...      "state_key": obs, "action_key": "a", "valid": True}
        ...     for traj, path, last in (("x", "AB", 10.0), ("y", "AC", 0.0))
        ...     for t, obs in enumerate(path) for reward in [last if t == 1 else 0.0]])
        >>> node, following, distance = distances_to_success(batch)
        >>> distance.tolist()   # A: 2, B: 1, C and y's end cannot reach ★: 2 + 1, ★: 0
        [2.0, 1.0, 3.0, 3.0, 0.0]
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    node, following, node_group, n_nodes = next_nodes(batch)
    stars = np.arange(n_nodes - batch.n_groups, n_nodes)
    reverse = csr_matrix((np.ones(len(node)), (following, node)), shape=(n_nodes, n_nodes))
    distance = dijkstra(reverse, directed=True, indices=stars, unweighted=True, min_only=True)
    finite = np.isfinite(distance)
    farthest = np.zeros(batch.n_groups)
    np.maximum.at(farthest, node_group[finite], distance[finite])
    distance = np.where(finite, distance, farthest[node_group] + 1.0)
    return node, following, distance


def graph_returns(
    batch: StepBatch, gamma: float, normalize_distance: bool, scale: float = SUCCESS_VALUE
) -> np.ndarray:
    """``R_i`` of every row (module docstring)."""
    node, following, distance = distances_to_success(batch)
    exponent = distance[following]
    if normalize_distance:
        exponent = exponent - distance[node] + 1.0
    returns: np.ndarray = scale * np.power(gamma, exponent)
    return returns


def graph_step_sets(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """GraphGPO's step-level sets: the anchor sets of the exact observation.

    The ``step_sets`` declaration of GraphGPO.
    """
    return anchor_sets(batch, "obs")


@register("graphgpo", uses=("next_obs_key",), step_sets=graph_step_sets)
def graphgpo(
    batch: StepBatch,
    *,
    gamma: float = 0.1,
    step_weight: float = 1.0,
    episode_weight: float = 1.0,
    norm: Norm = "mean_std",
    normalize_distance: bool = False,
    lone_row: LoneRow = "zero",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Graph-distance step returns normalised within anchor sets, plus GiGPO's episode term.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 10.0), ("y", 0.0))])
        >>> # x steps onto ★ (R = 10); y to its own end, which cannot reach ★: d = 1 + 1,
        >>> # R = 10·0.1² = 0.1. Step term ±4.95 about their mean, episode term ±5.
        >>> compute("graphgpo", batch, norm="mean").advantages.tolist()
        [9.95, -9.95]
    """
    returns = graph_returns(batch, gamma, normalize_distance)  # R_i

    # A^S_i = norm(R_i, {R_j : same group, same observation})
    anchors, n_anchors = anchor_sets(batch, "obs")
    step_adv = normalise(returns, anchors, set_stats(returns, anchors, n_anchors), norm)

    advantages = step_weight * step_adv
    if episode_weight != 0.0:  # the code skips the episode term at weight 0
        episode_adv = episode_advantage(batch, norm, "rows", invalid_penalty)
        if lone_row == "score":
            episode_adv = lone_rows_scored(batch, episode_adv, norm, invalid_penalty)
        advantages = advantages + episode_weight * episode_adv
    diagnostics = base_diagnostics(batch, anchors, n_anchors)
    reached = trajectory_returns(batch) > 0  # groups with a node ★ some step leads to
    diagnostics["success_groups"] = float(
        np.mean(
            np.bincount(trajectory_groups(batch), weights=reached, minlength=batch.n_groups) > 0
        )
    )
    return EstimatorResult(advantages, diagnostics)
