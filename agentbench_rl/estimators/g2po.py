"""G2PO: credit from the value of the anchor state a step leads to, on the group's graph.

Source: Wang et al. 2026, "Group-Graph Policy Optimization for Long-Horizon Agentic Reinforcement
Learning" (arXiv:2606.22995), and its public code (Nala-YN/G2PO, ``g2po/core_g2po.py``:
``compute_group_aggregation_values``, ``compute_step_level_advantage``,
``compute_g2po_outcome_advantage``, on verl-agent).

Equations (``docs/estimators.md``), per task group g; anchor sets as GiGPO's (rows of g with the
same observation), ``L_i`` the length of row i's trajectory, ``t_i`` its step::

    V(S)     = mean_{j in S} γ^{L_j − t_j}·R(τ_j)               (the anchor set's value)
    next_i   = V(S(next row))             if i is not its trajectory's last row
             = c                          if it is and R(τ_i) = c  (terminal success)
             = 0                          otherwise                 (terminal failure)
    A^N_i    = norm(next_i − p·[not valid_i], {same over j in S(i)})   (0 for a set of one)
    A^G_i    = norm(next_i − V(S(i)), {same over j in g})               (the value gained)
    A^E_i    = norm(score_i, {score_j : j in g})                        (GiGPO's episode term)
    A_i      = A^E_i + w·(A^N_i + A^G_i)

with c = 10 (the code's ``SUCCESS_REWARD``; ``success_value``), γ = 0.95 and
``score_i = R(τ_i) − p·[not valid_i]``. The code's trainer pays 10 for a win, so a batch of the
env's own rewards (1 for a win in ALFWorld and TextCraft) never reaches c = 10: give
``success_value`` the batch's success reward there.

Choices the paper leaves open, settled by the authors' code and kept here: the anchor value
discounts the trajectory's return by its steps to the end plus one (γ^{L−t}: the last step's
value is γ·R); a terminal step succeeds only when its return equals c exactly; the next-state
term is normalised within the anchor set with the invalid-action penalty (the code's 0.1, our
``invalid_penalty``), the gain over every row of the task group without it; stds are unbiased.
The defaults are the recipe's run scripts' (``mode=mean_std_norm``, ``step_advantage_w=1``;
its ``ppo_trainer.yaml`` says ``mean_norm``).

Differs from the code on purpose, each documented in ``docs/estimators.md``: a task group of a
single row gets ``A^E = 0`` (``lone_row="score"``: the code's ``score / (1 + 1e-6)``) and
``A^G = 0`` (the code's is NaN, the std of one value); a set of equal values normalises to exactly
0 (the code's float mean can miss them by an ulp, ~1e-9 after the 1e-6).
"""

from __future__ import annotations

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    LoneRow,
    Norm,
    anchor_sets,
    anchor_step_sets,
    base_diagnostics,
    episode_advantage,
    invalid_penalties,
    lone_rows_scored,
    normalise,
    set_stats,
    trajectory_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

#: The code's ``SUCCESS_REWARD``: a terminal step leads to this value when its return equals it.
SUCCESS_VALUE = 10.0


def anchor_values(batch: StepBatch, gamma: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Each row's anchor set, each anchor set's value ``V(S)`` and the set count.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": t, "reward": reward if t == 1 else 0.0,
        ...      "obs_key": obs, "state_key": obs, "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 10.0), ("y", 0.0)) for t, obs in enumerate("AB")])
        >>> codes, values, count = anchor_values(batch, 0.5)
        >>> values.tolist()   # A: (0.5² · 10 + 0) / 2, B: (0.5 · 10 + 0) / 2
        [1.25, 2.5]
    """
    anchors, n_anchors = anchor_sets(batch, "obs")
    length = np.bincount(batch.traj_codes, minlength=batch.n_trajs)[batch.traj_codes]
    returns = trajectory_returns(batch)[batch.traj_codes]
    discounted = np.power(gamma, length - batch.t) * returns
    values = set_stats(discounted, anchors, n_anchors).mean
    return anchors, values, n_anchors


@register("g2po", step_sets=anchor_step_sets)
def g2po(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    norm: Norm = "mean_std",
    invalid_penalty: float = 0.1,
    lone_row: LoneRow = "zero",
    success_value: float = SUCCESS_VALUE,
) -> EstimatorResult:
    """GiGPO's episode term plus the anchor value a step reaches and gains (G2PO's code).

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 10.0), ("y", 0.0))])
        >>> # V(o) = 0.95·10/2 = 4.75; next: 10 and 0 (±5 about their mean), gains 5.25 and
        >>> # −4.75 (±5); the episode term ±5: each row 5 + 5 + 5
        >>> compute("g2po", batch, norm="mean").advantages.tolist()
        [15.0, -15.0]
    """
    anchors, values, n_anchors = anchor_values(batch, gamma)
    following = batch.next_row
    success = trajectory_returns(batch)[batch.traj_codes] == success_value
    terminal = np.where(success, success_value, 0.0)
    reached = np.where(following >= 0, values[anchors[np.maximum(following, 0)]], terminal)

    # A^N_i: the value reached, within the anchor set (with the invalid-action penalty)
    penalised = reached - invalid_penalties(batch, invalid_penalty)
    next_adv = normalise(penalised, anchors, set_stats(penalised, anchors, n_anchors), norm)
    # A^G_i: the value gained, over the task group
    gained = reached - values[anchors]
    group_stats = set_stats(gained, batch.group_codes, batch.n_groups)
    gain_adv = normalise(gained, batch.group_codes, group_stats, norm)

    episode_adv = episode_advantage(batch, norm, "rows", invalid_penalty)  # A^E_i
    if lone_row == "score":
        episode_adv = lone_rows_scored(batch, episode_adv, norm, invalid_penalty)
    advantages = episode_adv + step_weight * (next_adv + gain_adv)
    return EstimatorResult(advantages, base_diagnostics(batch, anchors, n_anchors))
