"""What a trainer adapter costs (``bench estimators --adapters``, issue 60 point 4): GiGPO on a
synthetic rollout's rows, once called directly on its :class:`~agentbench_rl.core.batch.StepBatch`
and once through each adapter from the shape that trainer hands it, built beforehand:

- **token rows** (verl-agent's drop-in and SkyRL, :mod:`agentbench_rl.integrations.token_rows`):
  per-token episode scores, discounted step returns, anchors, group and trajectory indices in,
  one advantage per token out;
- **verl rows** (:mod:`agentbench_rl.integrations.verl.advantages`): uids, sessions and a step
  record per row in;
- **slime** (:mod:`agentbench_rl.integrations.slime`): ``rollout_data`` with a step record per
  sample in, a tensor per sample out.

Each adapter's time includes everything it does past its trainer's call (reading the rows into
a ``StepBatch``, the estimator, putting the advantages back); the ratio to the direct call is
the adapter's cost per step (the goal: at most :data:`GOAL` at 100k rows). Each is checked to
give the direct call's advantages first. Trinity's adapter needs ``trinity-rft`` and is not
timed here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentbench_rl.bench.estimators import (
    FULL_SIZES,
    QUICK_SIZES,
    SyntheticRollout,
    best_time,
    synthetic_rollout,
)
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators import EstimatorSpec
from agentbench_rl.estimators.common import discounted_sum_to_go
from agentbench_rl.integrations import slime, token_rows
from agentbench_rl.integrations.verl import advantages as verl_rows

ESTIMATOR = "gigpo"
GOAL = 1.2  # adapter time / direct time at 100k rows
REPEATS = 5
TOKENS = 8  # response tokens per row (the token-rows shape's width)


@dataclass(frozen=True)
class AdapterTime:
    """One adapter at one size: best seconds, and its ratio to the direct call."""

    adapter: str
    rows: int
    seconds: float
    ratio: float


def adapter_calls(batch: StepBatch) -> dict[str, Callable[[], Any]]:
    """Each adapter's call on its trainer's shape of ``batch``'s rows (built here, outside the
    timing), returning what that trainer gets back (:func:`per_row` reads one advantage per
    row of it)."""
    spec = EstimatorSpec(ESTIMATOR)
    gamma = token_rows.estimator_gamma(ESTIMATOR, {})
    n = len(batch)
    traj = np.asarray(batch.traj)
    members = np.unique(traj, return_inverse=True)[1]  # each row's trajectory, numbered
    score_of_row = np.bincount(members, weights=batch.reward)[members]
    returns = discounted_sum_to_go(batch, np.asarray(batch.reward, dtype=np.float64), gamma)
    token_level = np.zeros((n, TOKENS))
    token_level[:, -1] = score_of_row
    mask = np.ones((n, TOKENS), dtype=np.float32)
    group = np.asarray(batch.group)
    records = [
        {
            "t": int(batch.t[row]),
            "reward": float(batch.reward[row]),
            "obs_key": batch.obs_key[row],
            "state_key": batch.state_key[row],
            "action_key": batch.action_key[row],
            "valid": bool(batch.valid[row]),
            "success": bool(score_of_row[row] > 0),
            "steps": 0,
        }
        for row in range(n)
    ]
    uids = [str(value) for value in group]
    sessions = [int(value) for value in members]

    def tokens() -> np.ndarray:
        found = token_rows.row_advantages(
            ESTIMATOR,
            {},
            token_level,
            returns,
            batch.obs_key,
            group,
            traj,
            actions=batch.action_key,
            valid=batch.valid,
        )
        return token_rows.token_advantages(found, mask)

    def verl() -> np.ndarray:
        found, _ = verl_rows.row_advantages(
            uids, sessions, records, [False] * n, spec, reward="env"
        )
        return found

    steps = [
        {**record, "group": uid, "member": member}
        for record, uid, member in zip(records, uids, sessions, strict=True)
    ]

    def slime_call() -> Any:
        data: dict[str, Any] = {"response_lengths": [TOKENS] * n, slime.STEPS_KEY: steps}
        slime.advantages(None, data, estimator=spec, reward="env")
        return data["advantages"]  # the tensors slime gets; the check reads them

    return {"token rows (verl-agent, SkyRL)": tokens, "verl rows": verl, "slime": slime_call}


def per_row(returned: Any) -> np.ndarray:
    """One advantage per row of what an adapter returned (a token tensor, a list of them, or
    one value per row)."""
    if isinstance(returned, list):
        return np.array([float(tensor[0]) for tensor in returned])
    array = np.asarray(token_rows.as_numpy(returned), dtype=np.float64)
    return array[:, 0] if array.ndim == 2 else array


def run(quick: bool, console: Console) -> list[AdapterTime]:
    """Time every adapter against the direct call at each size; print the table."""
    found = []
    for rows in QUICK_SIZES if quick else FULL_SIZES:
        rollout = synthetic_rollout(rows, seed=rows)
        batch = rollout.batch()
        direct_values = np.asarray(EstimatorSpec(ESTIMATOR).compute(rollout.batch()).advantages)
        direct = best_time(functools.partial(_direct, rollout), REPEATS)
        for name, call in adapter_calls(batch).items():
            if not np.allclose(per_row(call()), direct_values, rtol=1e-5, atol=1e-6):
                raise AssertionError(f"{name}: not the direct call's advantages")
            seconds = best_time(call, REPEATS)
            found.append(AdapterTime(name, rows, seconds, seconds / direct))
        found.append(AdapterTime("direct compute", rows, direct, 1.0))
    console.print(table(found))
    return found


def _direct(rollout: SyntheticRollout) -> object:
    """The direct call, on a fresh (uncached) batch as every estimator timing takes it."""
    return EstimatorSpec(ESTIMATOR).compute(rollout.batch())


def table(times: list[AdapterTime]) -> Table:
    shown = Table(title=f"{ESTIMATOR} through each adapter (best of {REPEATS}; goal <= {GOAL}x)")
    for column in ("adapter", "rows", "ms", "x direct"):
        shown.add_column(column, justify="left" if column == "adapter" else "right")
    for entry in times:
        shown.add_row(
            entry.adapter, f"{entry.rows:,}", f"{entry.seconds * 1e3:.1f}", f"{entry.ratio:.2f}"
        )
    return shown
