"""ECPO: evidence-calibrated action advantage with a variance gate, inside GiGPO's anchor sets.

Source: Li et al. 2026, "When Denser Credit Is Not Enough: Evidence-Calibrated Policy
Optimization for Long-Horizon LLM Agent Training" (arXiv:2606.05885).

Equations (``docs/estimators.md``), for anchor set S (n_s rows, mean μ_s, unbiased std σ_s of G)
and each canonical action u seen in S (n_u rows, mean return Ḡ_u)::

    μ̃_u   = (n_u·Ḡ_u + κ·μ_s) / (n_u + κ)                       shrunk action value
    A_act = (μ̃_u − μ_s) / (σ_s + 1e-6)     (norm="mean": μ̃_u − μ_s)
    B     = Σ_u (n_u/n_s)·(Ḡ_u − μ_s)²                            between-action variance
    W     = (1/n_s)·Σ_u Σ_{j: u_j = u} (G_j − Ḡ_u)²                within-action variance
    ρ     = tanh(n_s/τ) · B / (B + W + 1e-6)                       gate
    A_i   = A^E_i + ω·ρ(S_i)·A_act(S_i, u_i)

Choices the paper leaves open, fixed by the spec: B and W use 1/n_s (population variances) while
σ_s is unbiased; the gate's 1e-6 keeps an anchor whose returns are all equal at ρ = 0; the
anchor key is the observation (``anchor="obs"``) as in GiGPO, or the true state.
Diagnostics: ``mean_gate`` (mean ρ over rows) and ``divergent_anchor_rate`` (among anchors with
an action seen once and an action seen at least twice, the share where some action seen once
has a larger |A_act| than every action seen at least twice; 0 when no anchor qualifies).
"""

from __future__ import annotations

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import (
    STD_EPS,
    Anchor,
    EpisodeStats,
    Norm,
    anchor_sets,
    anchor_step_sets,
    base_diagnostics,
    combine_codes,
    episode_advantage,
    set_stats,
    step_returns,
)
from agentbench_rl.estimators.registry import EstimatorResult, register

GATE_EPS = 1e-6  # the 1e-6 in ρ's denominator


def divergent_anchor_rate(
    anchor_of_action: np.ndarray, action_count: np.ndarray, abs_adv: np.ndarray, n_anchors: int
) -> float:
    """Share of eligible anchors where an action seen once out-scores every action seen twice
    or more, by |A_act|. Arrays are per (anchor, action) set.

    Example:
        >>> divergent_anchor_rate(np.array([0, 0, 1, 1]), np.array([1, 2, 1, 3]),
        ...                       np.array([0.9, 0.5, 0.1, 0.2]), 2)
        0.5
    """
    once = action_count == 1
    best_once = np.full(n_anchors, -np.inf)
    best_repeated = np.full(n_anchors, -np.inf)
    np.maximum.at(best_once, anchor_of_action[once], abs_adv[once])
    np.maximum.at(best_repeated, anchor_of_action[~once], abs_adv[~once])
    eligible = np.isfinite(best_once) & np.isfinite(best_repeated)
    if not eligible.any():
        return 0.0
    return float(np.mean(best_once[eligible] > best_repeated[eligible]))


@register("ecpo", step_sets=anchor_step_sets)
def ecpo(
    batch: StepBatch,
    *,
    kappa: float = 2.0,
    tau: float = 4.0,
    gamma: float = 0.95,
    omega: float = 1.0,
    norm: Norm = "mean_std",
    episode_stats: EpisodeStats = "rows",
    anchor: Anchor = "obs",
    invalid_penalty: float = 0.0,
) -> EstimatorResult:
    """Episode advantage plus ω times the gated, shrunk action advantage of the row's anchor.

    The equations, the source paper and every choice the paper left open are in this
    module's docstring (and in ``docs/estimators.md``).

    Example:
        >>> from agentbench_rl.estimators import compute
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 3.0), ("y", 1.0))])
        >>> compute("ecpo", batch, norm="mean").advantages.tolist()  # one action: ρ = 0
        [1.0, -1.0]
    """
    step_return = step_returns(batch, gamma, invalid_penalty)  # G_i
    episode_adv = episode_advantage(batch, norm, episode_stats, invalid_penalty)  # A^E_i

    # Anchor sets S: n_s, μ_s, σ_s of G.
    anchor_codes, n_anchors = anchor_sets(batch, anchor)
    s_stats = set_stats(step_return, anchor_codes, n_anchors)
    # Actions u within S: n_u, Ḡ_u.
    action_codes, _ = batch.codes("action_key")
    pair_codes, n_pairs = combine_codes(anchor_codes, action_codes)
    u_stats = set_stats(step_return, pair_codes, n_pairs)
    anchor_of_pair = np.empty(n_pairs, dtype=np.int64)
    anchor_of_pair[pair_codes] = anchor_codes

    n_u, mean_u = u_stats.count.astype(np.float64), u_stats.mean
    n_s, mean_s = s_stats.count.astype(np.float64), s_stats.mean
    mean_s_of_pair = mean_s[anchor_of_pair]

    # μ̃_u = (n_u·Ḡ_u + κ·μ_s) / (n_u + κ);  A_act = (μ̃_u − μ_s) / (σ_s + 1e-6) or μ̃_u − μ_s
    shrunk = (n_u * mean_u + kappa * mean_s_of_pair) / (n_u + kappa)
    action_adv = shrunk - mean_s_of_pair
    if norm == "mean_std":
        action_adv = action_adv / (s_stats.std[anchor_of_pair] + STD_EPS)

    # B = Σ_u (n_u/n_s)(Ḡ_u − μ_s)²;  W = (1/n_s) Σ_u Σ_j (G_j − Ḡ_u)²
    between_terms = (n_u / n_s[anchor_of_pair]) * (mean_u - mean_s_of_pair) ** 2
    between = np.bincount(anchor_of_pair, weights=between_terms, minlength=n_anchors)
    within_dev = step_return - mean_u[pair_codes]
    within = np.bincount(anchor_codes, weights=within_dev * within_dev, minlength=n_anchors) / n_s
    # ρ = tanh(n_s/τ) · B / (B + W + 1e-6)
    gate = np.tanh(n_s / tau) * between / (between + within + GATE_EPS)

    advantages = episode_adv + omega * gate[anchor_codes] * action_adv[pair_codes]
    diagnostics = base_diagnostics(batch, anchor_codes, n_anchors)
    diagnostics.update(
        mean_gate=float(np.mean(gate[anchor_codes])),
        divergent_anchor_rate=divergent_anchor_rate(
            anchor_of_pair, u_stats.count, np.abs(action_adv), n_anchors
        ),
    )
    return EstimatorResult(advantages, diagnostics)
