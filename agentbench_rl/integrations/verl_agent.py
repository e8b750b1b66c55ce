"""Every estimator of this package behind verl-agent's advantage signature: a verl-agent fork
switches estimator by one import.

verl-agent's trainer calls ``core_gigpo.compute_gigpo_outcome_advantage(token_level_rewards,
step_rewards, response_mask, anchor_obs, index, traj_index, epsilon, step_advantage_w, mode)``
on rows in step-major order (every trajectory's step t before any step t + 1): the episode
score on the response tokens of each row, the discounted step return, the response mask, the
anchor observation, the task-group id and the trajectory id. Each ``compute_<name>_outcome_
advantage`` here takes the same arguments and returns what that function returns (the
advantages on the response tokens, twice: advantages and returns), computed by our estimator
``<name>`` on the :class:`~agentbench_rl.core.batch.StepBatch` the rows describe:

- ``t``: the row's rank within its trajectory, in the order the rows come;
- ``reward``: ``r_t = G_t − γ·G_{t+1}`` from the step returns and the estimator's ``gamma``
  (which must be the γ verl-agent's ``compute_step_discounted_returns`` used; checked: the
  rewards must add up to each row's episode score);
- ``obs_key`` = ``state_key`` = the anchor observation (verl-agent has no true state);
- ``action_key``: ``actions`` when given, else empty (ProGPO's prefixes then hold observations
  only); ``valid``: ``valid`` when given, else every row;
- ``success``: a positive episode score; ``next_obs_key`` (GraphGPO): the next row's anchor
  observation, and after a trajectory's last step ``'success'`` when it succeeded (GraphGPO's
  rollout loop's node) or a node of its own;
- ``hidden`` (BiPACE): the ``hidden`` argument, one vector per row.

``mode`` is the norm (``"mean_norm"``: ``norm="mean"``, ``"mean_std_norm"``: ``"mean_std"``);
``step_advantage_w`` is GiGPO's ``omega`` and GraphGPO's ``step_weight`` (an estimator without
a step weight refuses any other value than 1); the estimator's own parameters come as keywords.
A task group of a single row gets its score, as verl-agent's episode term gives it
(``lone_row="score"``, where the estimator takes it). verl-agent's ``enable_similarity`` node
merge is not offered (give merged observations instead).

In a verl-agent checkout (``verl/trainer/ppo/ray_trainer.py``)::

    from agentbench_rl.integrations.verl_agent import compute_progpo_outcome_advantage
    ...
    advantages, returns = compute_progpo_outcome_advantage(...)  # where core_gigpo's was called

Example:
    >>> import numpy as np
    >>> import torch
    >>> rows = torch.tensor([[0.0, 10.0], [0.0, 10.0], [0.0, 0.0]])  # episode scores
    >>> advantages, _ = compute_gigpo_outcome_advantage(
    ...     rows, torch.tensor([9.5, 10.0, 0.0]), torch.ones(3, 2), np.array(["a", "b", "a"]),
    ...     np.array(["g", "g", "g"]), np.array(["x", "x", "y"]), gamma=0.95)
    >>> # episode term: 10 and 0 about the rows' mean 6.67; step term: anchor "a" holds 9.5 and
    >>> # 0 (±4.75), anchor "b" one row (0)
    >>> [round(float(v), 2) for v in advantages[:, 0]]
    [8.08, 3.33, -11.42]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agentbench_rl.estimators import resolve
from agentbench_rl.integrations.token_rows import row_advantages, token_advantages

MODES = {"mean_norm": "mean", "mean_std_norm": "mean_std"}
#: The parameter ``step_advantage_w`` sets, by estimator. CRBC is not one: its step weight's
#: default is 5 (the paper's w_S), which verl-agent's default 1.0 would silently replace; give
#: it as ``step_weight=``.
STEP_WEIGHT = {
    "gigpo": "omega",
    "graphgpo": "step_weight",
    "g2po": "step_weight",
    "graphhca": "step_weight",
    "graft": "omega",
}


def outcome_advantage(
    name: str,
    token_level_rewards: Any,
    step_rewards: Any,
    response_mask: Any,
    anchor_obs: Any,
    index: Any,
    traj_index: Any,
    epsilon: float = 1e-6,
    step_advantage_w: float = 1.0,
    mode: str = "mean_norm",
    enable_similarity: bool = False,
    similarity_thresh: float = 0.95,
    *,
    actions: Any = None,
    valid: Any = None,
    hidden: Any = None,
    **params: Any,
) -> tuple[Any, Any]:
    """Estimator ``name`` with verl-agent's signature (module docstring)."""

    declared = resolve(name)
    if enable_similarity:
        raise ValueError("verl-agent drop-in: enable_similarity is not offered (merge the keys)")
    if epsilon != 1e-6:
        raise ValueError(f"verl-agent drop-in: epsilon is 1e-6 in every estimator, got {epsilon}")
    if mode not in MODES:
        raise ValueError(f"verl-agent drop-in: unknown mode {mode!r} (choose from {list(MODES)})")
    if "norm" in declared.params:
        params.setdefault("norm", MODES[mode])
    if name in STEP_WEIGHT:
        params.setdefault(STEP_WEIGHT[name], step_advantage_w)
    elif step_advantage_w != 1.0:
        raise ValueError(f"verl-agent drop-in: {name} has no step weight ({step_advantage_w})")
    if "lone_row" in declared.params:
        params.setdefault("lone_row", "score")
    advantages = row_advantages(
        name,
        params,
        token_level_rewards,
        step_rewards,
        anchor_obs,
        index,
        traj_index,
        actions=actions,
        valid=valid,
        hidden=hidden,
    )
    scores = token_advantages(advantages, response_mask)
    return scores, scores


def _drop_in(name: str) -> Callable[..., tuple[Any, Any]]:
    def compute(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return outcome_advantage(name, *args, **kwargs)

    compute.__name__ = compute.__qualname__ = f"compute_{name}_outcome_advantage"
    compute.__doc__ = f"Our ``{name}`` with verl-agent's advantage signature (module docstring)."
    whole = inspect.signature(outcome_advantage)  # help() shows verl-agent's arguments
    compute.__signature__ = whole.replace(  # type: ignore[attr-defined]
        parameters=list(whole.parameters.values())[1:]
    )
    return compute


compute_grpo_outcome_advantage = _drop_in("grpo")
compute_rloo_outcome_advantage = _drop_in("rloo")
compute_gigpo_outcome_advantage = _drop_in("gigpo")
compute_bipace_outcome_advantage = _drop_in("bipace")
compute_ecpo_outcome_advantage = _drop_in("ecpo")
compute_progpo_outcome_advantage = _drop_in("progpo")
compute_gated_bepo_outcome_advantage = _drop_in("gated_bepo")
compute_hgpo_outcome_advantage = _drop_in("hgpo")
compute_graphgpo_outcome_advantage = _drop_in("graphgpo")
compute_g2po_outcome_advantage = _drop_in("g2po")
compute_crbc_outcome_advantage = _drop_in("crbc")
compute_graphhca_outcome_advantage = _drop_in("graphhca")
compute_graft_outcome_advantage = _drop_in("graft")
