"""verl's batch rows -> ``StepBatch`` -> ``compute(...)``: the advantage step of the verl engine.

Our agent loop (``agent_loop.py``) returns one verl sample per env step, keyed
``{uid}_{session}_{i}`` by verl, with the step's record in the sample's ``extra_fields`` under
:data:`RECORD_KEY`. This module turns such rows back into the estimators' input exactly as the
home trainer does (``train/ppo.py``):

- group = the prompt ``uid`` (one task, repeated ``rollout.n`` times by verl),
- trajectory = ``uid`` + session id (one group member),
- t, obs/state/action keys, validity and success from the step record,
- reward = ``success_reward`` on the last step of a won trajectory (``reward="success"``) or the
  env's own step reward (``reward="env"``),

then the run's ``EstimatorSpec.compute(batch)`` and the trainer's ``advantage_norm``; every
token of a row's response gets the row's advantage. Rows verl added only to pad the batch to a
divisible size (tag ``is_padding``; they copy the first real row's fields, step record
included) are skipped and get advantage 0.

Nothing here imports verl, so this part is tested in the main environment too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentbench_rl.core.batch import REQUIRED_COLUMNS, StepBatch, StepFields
from agentbench_rl.estimators import EstimatorResult, EstimatorSpec
from agentbench_rl.estimators.common import AdvantageNorm, normalize_advantages
from agentbench_rl.rollout.batched import Reward, training_reward

#: Where a sample's step record lives in verl's ``extra_fields``.
RECORD_KEY = "agentbench_step"


class VerlStepRecord(StepFields):
    """One step as it travels in a verl sample's ``extra_fields`` (what the agent loop writes
    and this module reads): the step's :class:`~agentbench_rl.core.batch.StepFields` (group and
    trajectory come from verl's uid and session), its task, and, once its episode ends, whether
    it succeeded and the episode's length (for the success reward on its last step)."""

    task_id: str
    success: bool
    steps: int


#: The fields every step record must hold to become a row: the ``StepBatch`` columns but
#: group and trajectory, success and the episode's length.
RECORD_FIELDS = (
    *(name for name in REQUIRED_COLUMNS if name not in ("group", "traj")),
    "success",
    "steps",
)


def step_batch_from_rows(
    uids: Sequence[Any],
    sessions: Sequence[Any],
    records: Sequence[Mapping[str, Any] | None],
    padding: Sequence[bool],
    *,
    reward: Reward = "success",
    success_reward: float = 10.0,
) -> tuple[StepBatch, np.ndarray]:
    """The real rows of a verl batch as a ``StepBatch``, and their positions in the batch.

    Example:
        >>> step = {"t": 0, "reward": 0.0, "obs_key": "o", "state_key": "s",
        ...         "action_key": "up", "valid": True, "success": True, "steps": 1}
        >>> batch, rows = step_batch_from_rows(["u", "u", "pad"], [0, 1, 0],
        ...                                    [step, step, step], [False, False, True])
        >>> rows.tolist(), batch.traj.tolist(), batch.reward.tolist()
        ([0, 1], ['u/0', 'u/1'], [10.0, 10.0])
    """
    n = len(uids)
    if not len(sessions) == len(records) == len(padding) == n:
        raise ValueError(
            f"verl rows: {n} uids, {len(sessions)} sessions, {len(records)} records and "
            f"{len(padding)} padding flags"
        )
    keep = np.flatnonzero(~np.asarray(padding, dtype=bool))
    if keep.size == 0:
        raise ValueError("verl rows: every row of the batch is padding")
    rows = keep.tolist()
    kept: list[Mapping[str, Any]] = []
    needed = set(RECORD_FIELDS)
    for row in rows:  # checked first: the columns below read every field
        record = records[row]
        if not isinstance(record, Mapping):
            raise ValueError(
                f"verl rows: row {row} (uid {uids[row]}) has no '{RECORD_KEY}' step record; "
                "was it produced by the agentbench agent loop?"
            )
        if not needed <= record.keys():
            missing = [name for name in RECORD_FIELDS if name not in record]
            raise ValueError(f"verl rows: row {row}'s step record lacks {', '.join(missing)}")
        kept.append(record)
    columns: dict[str, list[Any]] = {
        "group": [str(uids[row]) for row in rows],
        "traj": [f"{uids[row]}/{int(sessions[row])}" for row in rows],
        **{name: [record[name] for record in kept] for name in RECORD_FIELDS},
    }
    next_keys = [record.get("next_obs_key") for record in kept]  # GraphGPO's, where all carry it
    rewards = [training_reward(record, reward, success_reward) for record in kept]
    batch = StepBatch(
        group=np.array(columns["group"], dtype=object),
        traj=np.array(columns["traj"], dtype=object),
        t=np.asarray(columns["t"], dtype=np.int64),
        reward=np.asarray(rewards, dtype=np.float64),
        obs_key=np.array(columns["obs_key"], dtype=object),
        state_key=np.array(columns["state_key"], dtype=object),
        action_key=np.array(columns["action_key"], dtype=object),
        valid=np.asarray(columns["valid"], dtype=bool),
        success=np.asarray(columns["success"], dtype=bool),
        next_obs_key=(
            np.array(next_keys, dtype=object) if all(k is not None for k in next_keys) else None
        ),
    )
    return batch, keep


def row_advantages(
    uids: Sequence[Any],
    sessions: Sequence[Any],
    records: Sequence[Mapping[str, Any] | None],
    padding: Sequence[bool],
    estimator: EstimatorSpec,
    *,
    reward: Reward = "success",
    success_reward: float = 10.0,
    advantage_norm: AdvantageNorm = "none",
) -> tuple[np.ndarray, EstimatorResult]:
    """One advantage per row of a verl batch (0 on padding rows), normalised over the real rows
    by ``advantage_norm`` as the home trainer does, and the estimator's result.

    Example:
        >>> def step(success):
        ...     return {"t": 0, "reward": 0.0, "obs_key": "o", "state_key": "s",
        ...             "action_key": "up", "valid": True, "success": success, "steps": 1}
        >>> grpo = EstimatorSpec("grpo", {"norm": "mean"})
        >>> advantages, _ = row_advantages(["u", "pad", "u"], [0, 0, 1],
        ...                                [step(True), step(True), step(False)],
        ...                                [False, True, False], grpo)
        >>> advantages.tolist()   # rewards 10 and 0, mean 5; the padding row gets 0
        [5.0, 0.0, -5.0]
    """
    batch, keep = step_batch_from_rows(
        uids, sessions, records, padding, reward=reward, success_reward=success_reward
    )
    result = estimator.compute(batch)
    advantages = np.zeros(len(uids), dtype=np.float64)
    advantages[keep] = normalize_advantages(
        np.asarray(result.advantages, dtype=np.float64), advantage_norm
    )
    return advantages, result
