"""Step-level advantage estimators for LLM-agent RL, one module each, behind a registry.

The maths of every estimator is fixed by ``docs/estimators.md``; each module's docstring repeats
its equations, its source paper and the choices the paper left open.

Example:
    >>> from agentbench_rl.estimators import StepBatch, compute
    >>> batch = StepBatch.from_records([
    ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
    ...      "state_key": "o", "action_key": "a", "valid": True}
    ...     for traj, reward in (("x", 1.0), ("y", 0.0))])
    >>> result = compute("gigpo", batch, norm="mean")
    >>> result.advantages.tolist(), result.diagnostics["step_groups"]
    ([1.0, -1.0], 1)
"""

from agentbench_rl.core.batch import StepBatch

# Importing the modules registers the built-ins, in the order ``available()`` lists them (and
# the benchmarks' tables show them): episode-level baselines first, then the step-level ones.
# isort: off
from agentbench_rl.estimators import grpo, rloo, gigpo, bipace, ecpo  # noqa: F401
from agentbench_rl.estimators import progpo, gated_bepo, hgpo, graphgpo  # noqa: F401
from agentbench_rl.estimators import g2po, crbc, graphhca, graft  # noqa: F401

# isort: on
from agentbench_rl.estimators.registry import (
    ENTRY_POINT_GROUP,
    NEED_COLUMNS,
    PARAM_RULES,
    REGISTRY,
    EstimatorParams,
    EstimatorResult,
    EstimatorSpec,
    ParamRule,
    RegisteredEstimator,
    available,
    check_params,
    compute,
    declares,
    register,
    resolve,
    runnable,
)

NAMES: tuple[str, ...] = tuple(REGISTRY)  # the built-in estimators

__all__ = [
    "ENTRY_POINT_GROUP",
    "NAMES",
    "NEED_COLUMNS",
    "PARAM_RULES",
    "REGISTRY",
    "EstimatorParams",
    "EstimatorResult",
    "EstimatorSpec",
    "ParamRule",
    "RegisteredEstimator",
    "StepBatch",
    "available",
    "check_params",
    "compute",
    "declares",
    "register",
    "resolve",
    "runnable",
]
