"""Every estimator of this package as a Trinity-RFT advantage function (``trinity-rft``).

Trinity picks its advantage function by name from ``ADVANTAGE_FN``
(``algorithm.advantage_fn``); one is a class whose ``__call__(exps, **kwargs)`` returns the
experiences with ``advantages`` and ``returns`` set on their action tokens, and a metrics dict.
:func:`register` adds each of our estimators there as ``agentbench_<name>``, computed on the
:class:`~agentbench_rl.core.batch.StepBatch` the experiences describe, read as Trinity's own
GiGPO reads them (``trinity/algorithm/advantage_fn/gigpo_advantage.py``):

- one experience per env step: its task group ``eid.tid``, its trajectory ``eid.rid``, its step
  ``eid.step``;
- the step's anchor ``info["env_state_hash"]`` (what Trinity's ALFWorld workflow records; a step
  without one is an anchor of its own), its action ``info["action"]`` where recorded;
- its immediate reward ``info["step_reward"]`` where the workflow records one, else the
  trajectory's ``reward`` on its last step and 0 before (Trinity's sparse fallback).

The rows then go through the same mapping as the per-token trainers'
(:func:`~agentbench_rl.integrations.token_rows.step_batch_of`), and each experience gets its
row's advantage on every token of its ``action_mask``. The estimator's parameters are the
``advantage_fn_args`` (``gamma``, ``omega``, ...; checked). Like Trinity's GiGPO, these run in
the experience pipeline (``compute_in_trainer`` is ``False``).

In a Trinity config::

    algorithm:
      advantage_fn: agentbench_gigpo      # after agentbench_rl.integrations.trinity.register()
      advantage_fn_args: {gamma: 0.95}
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from trinity.algorithm.advantage_fn import ADVANTAGE_FN, AdvantageFn
from trinity.buffer.operators import ExperienceOperator

from agentbench_rl.estimators import EstimatorSpec, available
from agentbench_rl.estimators.common import dose
from agentbench_rl.integrations.token_rows import estimator_gamma, step_batch_of

PREFIX = "agentbench_"
STATE_KEY = "env_state_hash"
STEP_REWARD_KEY = "step_reward"
ACTION_KEY = "action"


class StepCreditAdvantageFn(AdvantageFn, ExperienceOperator):
    """One of our estimators over Trinity experiences (module docstring); a subclass per
    estimator is what :func:`register` files."""

    estimator: ClassVar[str]

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)
        EstimatorSpec(self.estimator, self.params)  # an unknown parameter fails here, at once

    def __call__(self, exps: Any, **kwargs: Any) -> tuple[Any, dict[str, float]]:
        return self.process(exps)

    def process(self, exps: list[Any]) -> tuple[list[Any], dict[str, float]]:
        if not exps:
            return [], {}
        gamma = estimator_gamma(self.estimator, self.params)
        order = sorted(range(len(exps)), key=lambda i: int(exps[i].eid.step))  # step-major
        rows = [exps[i] for i in order]
        rewards = _step_rewards(rows)
        batch = step_batch_of(
            np.array([[score] for score in _episode_scores(rows, rewards)]),
            _discounted_returns(rows, rewards, gamma),
            [(exp.info or {}).get(STATE_KEY, f"{exp.eid.rid}/{exp.eid.step}") for exp in rows],
            [exp.eid.tid for exp in rows],
            [exp.eid.rid for exp in rows],
            gamma=gamma,
            actions=[str((exp.info or {}).get(ACTION_KEY, "")) for exp in rows],
        )
        advantages = EstimatorSpec(self.estimator, self.params).compute(batch).advantages
        for exp, value in zip(rows, np.asarray(advantages, dtype=np.float64), strict=True):
            scalar = float(value)
            mask = exp.action_mask
            exp.advantages = mask * scalar if mask is not None else torch.tensor(scalar)
            exp.returns = exp.advantages.clone()
        missing = sum(STATE_KEY not in (exp.info or {}) for exp in rows)
        metrics = {
            f"{PREFIX}{self.estimator}/dose": float(dose(np.asarray(advantages))),
            f"{PREFIX}{self.estimator}/steps_without_state_hash": float(missing),
        }
        return exps, metrics

    @classmethod
    def compute_in_trainer(cls) -> bool:
        return False

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {}


def _step_rewards(rows: list[Any]) -> dict[int, float]:
    """Each experience's immediate reward (module docstring), by ``id``."""
    by_run: dict[str, list[Any]] = {}
    for exp in rows:
        by_run.setdefault(exp.eid.rid, []).append(exp)
    rewards = {}
    for steps in by_run.values():
        recorded = any(STEP_REWARD_KEY in (exp.info or {}) for exp in steps)
        last = max(int(exp.eid.step) for exp in steps)
        for exp in steps:
            if recorded:
                rewards[id(exp)] = float((exp.info or {}).get(STEP_REWARD_KEY, 0.0))
            else:
                final = int(exp.eid.step) == last and exp.reward is not None
                rewards[id(exp)] = float(exp.reward) if final else 0.0
    return rewards


def _episode_scores(rows: list[Any], rewards: dict[int, float]) -> list[float]:
    totals: dict[str, float] = {}
    for exp in rows:
        totals[exp.eid.rid] = totals.get(exp.eid.rid, 0.0) + rewards[id(exp)]
    return [totals[exp.eid.rid] for exp in rows]


def _discounted_returns(rows: list[Any], rewards: dict[int, float], gamma: float) -> np.ndarray:
    """G_t of each row, from its trajectory's later rewards."""
    returns = {}
    by_run: dict[str, list[Any]] = {}
    for exp in rows:
        by_run.setdefault(exp.eid.rid, []).append(exp)
    for steps in by_run.values():
        running = 0.0
        for exp in sorted(steps, key=lambda e: int(e.eid.step), reverse=True):
            running = rewards[id(exp)] + gamma * running
            returns[id(exp)] = running
    return np.array([returns[id(exp)] for exp in rows])


def register(names: list[str] | None = None) -> list[str]:
    """Add ``names`` (default: every estimator of our registry) to Trinity's ``ADVANTAGE_FN`` as
    ``agentbench_<name>``; a name registered already is left as it is. Returns the names."""
    registered = []
    for name in names or available():
        key = f"{PREFIX}{name}"
        if key not in ADVANTAGE_FN.modules:
            title = "".join(part.title() for part in name.split("_"))
            cls = type(
                f"Agentbench{title}AdvantageFn", (StepCreditAdvantageFn,), {"estimator": name}
            )
            ADVANTAGE_FN.register_module(key, module_cls=cls)
        registered.append(key)
    return registered
