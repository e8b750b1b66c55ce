"""GiGPO: group-in-group policy optimisation, an episode term plus an anchor-state step term.

Source: Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training"
(arXiv:2505.10978), and its public code (verl-agent, ``gigpo/core_gigpo.py``).

Equations (``docs/estimators.md``)::

    G_i   = r_i + γ·G_{i+1} − p·[not valid_i]           (step return; G = 0 after the last row)
    A^E_i = norm(score_i, episode set of i)               (as GRPO)
    A^S_i = norm(G_i, {G_j : j in i's group, key_j = key_i})   key = obs_key (anchor="obs")
    A_i   = A^E_i + ω·A^S_i

Choices the paper leaves open: the anchor set holds every row of the group with the same key,
from any trajectory and any step (several rows of one trajectory included), as the code does;
an anchor set of one row gets ``A^S = 0``, and so does a group of one row for ``A^E``;
``anchor="state"`` keys by the true state instead of the
observation text, for envs whose observations alias states.

Differs from verl-agent on purpose: verl-agent gives a task group that holds a single row
``score / (1 + 1e-6)`` in the episode term (it takes mean 0 and std 1 for a set of one), where
we give 0 (the spec's ``|S| = 1`` rule); ``lone_row="score"`` restores the code's form (an
anchor set of one row gets 0 in both: its mean is its own value). The two agree on every row of
a set of two or more. See "Resolved (a set of one value)" in ``docs/estimators.md``.
"""

from __future__ import annotations

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    Anchor,
    EpisodeStats,
    LoneRow,
    Norm,
    anchor_sets,
    anchor_step_sets,
    base_diagnostics,
    episode_advantage,
    lone_rows_scored,
    normalise,
    set_stats,
    step_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register


@register("gigpo", step_sets=anchor_step_sets)
def gigpo(
    batch: StepBatch,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    anchor: Anchor = "obs",
    invalid_penalty: float = 0.0,
    lone_row: LoneRow = "zero",
) -> EstimatorResult:
    """Episode advantage plus ω times the step advantage within anchor sets.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> compute("gigpo", batch, norm="mean").advantages.tolist()   # 1 + 1, −1 − 1
        [2.0, -2.0]
    """
    step_return = step_returns(batch, gamma, invalid_penalty)  # G_i
    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)  # A^E_i
    if lone_row == "score":
        episode_adv = lone_rows_scored(batch, episode_adv, norm, invalid_penalty)

    # A^S_i = norm(G_i, {G_j : same group, same anchor key})
    anchor_codes, n_anchors = anchor_sets(batch, anchor)
    anchor_stats = set_stats(step_return, anchor_codes, n_anchors)
    step_adv = normalise(step_return, anchor_codes, anchor_stats, norm)

    advantages = episode_adv + omega * step_adv
    return EstimatorResult(advantages, base_diagnostics(batch, anchor_codes, n_anchors))
