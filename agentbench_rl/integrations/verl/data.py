"""``agentbench-rl verl-data``: a split's task list as verl's parquet dataset.

One row per task; verl repeats each row ``rollout.n`` times (the group) and hands the row to our
agent loop, which reads ``extra_info.task_id`` and plays the env. The ``prompt`` column is only
a label (verl's dataset requires one): the agent loop builds every step's real prompt. Splits
without a fixed task list (Sokoban's procedurally generated ``train``) need ``size``: the rows
are then ``<split>-0`` .. ``<split>-<size-1>``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd

from agentbench_rl.core.atomic import atomic_write_bytes
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.integrations.verl.config import AGENT_NAME


def split_tasks(env: EnvSpec, size: int | None = None) -> list[str]:
    """The task ids of ``env``'s split: all of a fixed split (those of its categories when
    given, as the home trainer's ``train_categories``; the first ``size`` when given), or
    ``size`` generated ids of an unbounded one.

    Example:
        >>> split_tasks(EnvSpec(name="sokoban", split="train"), size=2)
        ['train-0', 'train-1']
        >>> split_tasks(EnvSpec(name="textcraft", split="train", categories=("depth-1",)), 1)
        ['acacia_planks']
    """
    if size is not None and size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if env.fixed():
        ids = env.tasks(what="train_categories")
        return ids[:size] if size is not None else ids
    env.draw_tasks(0, 0, what="train_categories")  # refuses categories, in one line
    if size is None:
        raise ValueError(
            f"split '{env.split}' of '{env.name}' has no fixed task list: give its size"
        )
    return [f"{env.split}-{n}" for n in range(size)]


def task_rows(env: EnvSpec, size: int | None = None) -> pd.DataFrame:
    """The dataset rows (verl's columns: data_source, prompt, agent_name, reward_model,
    extra_info).

    Example:
        >>> rows = task_rows(EnvSpec(name="sokoban", split="test"), size=2)
        >>> rows.loc[1, "extra_info"]["task_id"], rows.loc[1, "agent_name"]
        ('test-0001', 'agentbench')
    """
    name, split = env.name, env.split
    rows: list[dict[str, Any]] = []
    for index, task_id in enumerate(split_tasks(env, size)):
        rows.append(
            {
                "data_source": f"agentbench/{name}",
                "prompt": [{"role": "user", "content": f"{name} {split} task {task_id}"}],
                "agent_name": AGENT_NAME,
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": {"index": index, "env": name, "split": split, "task_id": task_id},
            }
        )
    return pd.DataFrame(rows)


def write_split(env: EnvSpec, path: Path, size: int | None = None) -> int:
    """Write ``env``'s split's rows to ``path`` (parquet, atomically); returns the number of
    rows."""
    rows = task_rows(env, size)
    buffer = io.BytesIO()
    try:
        rows.to_parquet(buffer, index=False)
    except ImportError as missing:
        raise ImportError(f"verl-data writes parquet, which needs pyarrow ({missing})") from None
    atomic_write_bytes(Path(path), buffer.getvalue())
    return len(rows)
