"""Per-token rows with step keys, the shape trainers hand an advantage function (verl-agent's
``compute_gigpo_outcome_advantage``, SkyRL's registry), to and from a
:class:`~agentbench_rl.core.batch.StepBatch`: :func:`step_batch_of` reads the rows (one row per
env step: its episode score on the response tokens, its discounted step return, its anchor
observation, its task group and trajectory; :mod:`.verl_agent` documents each column), and
:func:`token_advantages` puts one advantage per row back on the row's response tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators import EstimatorParams, EstimatorSpec, resolve

SUCCESS_NODE = "success"  # GraphGPO's rollout loop's node after a successful last step


def step_batch_of(
    token_level_rewards: Any,
    step_rewards: Any,
    anchor_obs: Any,
    index: Any,
    traj_index: Any,
    *,
    gamma: float,
    actions: Any = None,
    valid: Any = None,
    hidden: Any = None,
) -> StepBatch:
    """The :class:`StepBatch` the rows describe (:mod:`.verl_agent`'s docstring names each
    column); ``ValueError`` when the step returns and the episode scores disagree under
    ``gamma``."""
    scores = np.asarray(as_numpy(token_level_rewards), dtype=np.float64).sum(axis=-1)
    returns = np.asarray(as_numpy(step_rewards), dtype=np.float64).reshape(-1)
    n = len(returns)
    group = _texts(index)
    obs = _texts(anchor_obs)
    # a trajectory is its (group, traj_index) pair: numbered in order of first arrival
    group_codes = pd.factorize(group)[0].astype(np.int64)
    member_codes = pd.factorize(np.asarray(as_numpy(traj_index)))[0].astype(np.int64)
    traj_codes = pd.factorize(group_codes * (member_codes.max(initial=0) + 1) + member_codes)[0]
    order = np.argsort(traj_codes, kind="stable")  # each trajectory's rows, in arrival order
    ordered = traj_codes[order]
    starts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    t = np.empty(n, dtype=np.int64)  # rank within the trajectory, in arrival order
    t[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    following = np.full(n, -1)  # the row of the trajectory's next step
    same = ordered[1:] == ordered[:-1]
    following[order[:-1][same]] = order[1:][same]
    after = np.where(following >= 0, returns[np.maximum(following, 0)], 0.0)
    reward = returns - gamma * after
    totals = np.bincount(traj_codes, weights=reward)[traj_codes]
    if not np.allclose(totals, scores, rtol=1e-6, atol=1e-6):
        row = int(np.flatnonzero(~np.isclose(totals, scores, rtol=1e-6, atol=1e-6))[0])
        raise ValueError(
            f"step rows: row {row}'s step rewards (from its step returns with gamma "
            f"{gamma}) add up to {totals[row]:.6g}, its episode score is {scores[row]:.6g}: give "
            "the estimator the gamma of compute_step_discounted_returns"
        )
    success = scores > 0
    ends = np.empty(n, dtype=object)  # a failed trajectory's own end node
    failed_ends = np.flatnonzero((following < 0) & ~success)
    ends[failed_ends] = [f"end\0{code}" for code in traj_codes[failed_ends]]
    next_obs = np.where(following >= 0, obs[np.maximum(following, 0)], ends)
    next_obs[(following < 0) & success] = SUCCESS_NODE
    return StepBatch(
        group=group,
        traj=traj_codes,
        t=t,
        reward=reward,
        obs_key=obs,
        state_key=obs,
        action_key=_texts(actions) if actions is not None else np.full(n, "", dtype=object),
        valid=np.asarray(valid, dtype=bool) if valid is not None else np.ones(n, dtype=bool),
        success=success,
        next_obs_key=next_obs.astype(object),
        hidden=np.asarray(as_numpy(hidden), dtype=np.float32) if hidden is not None else None,
    )


def _texts(values: Any) -> np.ndarray:
    """``values`` as an object array of their texts (keys compare as text, as the rows' did)."""
    return np.asarray(as_numpy(values)).astype(str).astype(object)


def as_numpy(values: Any) -> Any:
    """A torch tensor as numpy; anything else as it is."""
    detach = getattr(values, "detach", None)
    return detach().cpu().numpy() if callable(detach) else values


def token_advantages(advantages: Any, response_mask: Any) -> Any:
    """One advantage per row on each of the row's response tokens (a tensor shaped like
    ``response_mask``, of its float dtype or float32)."""
    import torch

    mask = torch.as_tensor(response_mask)
    dtype = mask.dtype if mask.is_floating_point() else torch.float32
    return torch.as_tensor(np.asarray(advantages), dtype=dtype).unsqueeze(-1) * mask


def estimator_gamma(name: str, params: EstimatorParams) -> float:
    """The discount the rows' step returns are read with: the estimator's ``gamma``, given or
    its default (0.95 for one that does not discount)."""
    return float(params.get("gamma", resolve(name).defaults.get("gamma", 0.95)))


def row_advantages(
    name: str,
    params: EstimatorParams,
    token_level_rewards: Any,
    step_rewards: Any,
    anchor_obs: Any,
    index: Any,
    traj_index: Any,
    *,
    actions: Any = None,
    valid: Any = None,
    hidden: Any = None,
) -> np.ndarray:
    """Estimator ``name`` with ``params`` on the rows (:func:`step_batch_of`): one advantage
    per row."""
    batch = step_batch_of(
        token_level_rewards,
        step_rewards,
        anchor_obs,
        index,
        traj_index,
        gamma=estimator_gamma(name, params),
        actions=actions,
        valid=valid,
        hidden=hidden,
    )
    return np.asarray(EstimatorSpec(name, params).compute(batch).advantages)
