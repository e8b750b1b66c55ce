"""GRPO: the group-relative episode advantage, the same for every step of a trajectory.

Source: Shao et al. 2024, "DeepSeekMath" (GRPO); applied per step as in the GiGPO code
(Feng et al. 2025), whose episode term this is.

Equations (``docs/estimators.md``)::

    score_i = R(τ_i) − p·[not valid_i]
    A_i     = A^E_i = norm(score_i, S_i)
    S_i     = {score_j : j a row of i's group}     episode_stats="rows" (default)
            = {R(τ) : τ a trajectory of the group}  episode_stats="trajectories"

Choices the paper leaves open: GRPO scores whole responses, one per trajectory; for multi-step
agents the GiGPO code normalises over every row of the group (a long trajectory weighs more),
which is the default here; ``episode_stats="trajectories"`` gives one vote per trajectory
(the invalid-action penalty is then subtracted after normalisation,
``A^E_i = norm(R(τ_i), {R(τ)}) − p·[not valid_i]``).

Differs from verl-agent on purpose: a group that holds a single row gets ``A = 0`` here (the
spec's ``|S| = 1`` rule); verl-agent gives it ``score / (1 + 1e-6)`` (mean 0, std 1 for a set of
one). See "Resolved (a set of one value)" in ``docs/estimators.md``.
"""

from __future__ import annotations

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    EpisodeStats,
    Norm,
    base_diagnostics,
    episode_advantage,
)
from agentbench_rl.estimators.registry import EstimatorResult, register


@register("grpo")
def grpo(
    batch: StepBatch,
    *,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Group-relative episode advantage ``A_i = A^E_i``.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> compute("grpo", batch, norm="mean").advantages.tolist()
        [1.0, -1.0]
    """
    advantages = episode_advantage(batch, norm, episode_stats, invalid_penalty)
    return EstimatorResult(advantages, base_diagnostics(batch))
