"""The parts of the verl engine that need no verl (they run in the main environment): the
advantage step (rows in any order, padding rows anywhere: the advantages of ``compute`` on the
rows), ``verl-data``, checkpoint export and the one-line error without the extra."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentbench_rl.agents.simple import RandomAgent
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.estimators import REGISTRY, EstimatorSpec, StepBatch, compute
from agentbench_rl.estimators.common import normalize_advantages
from agentbench_rl.integrations.verl.advantages import row_advantages, step_batch_from_rows
from agentbench_rl.integrations.verl.config import (
    check_verl_config,
    read_agent_loop_config,
    write_agent_loop_file,
)
from agentbench_rl.integrations.verl.launcher import checkpoint_steps, hf_checkpoint
from agentbench_rl.rollout.group import GroupEnv, rollout_group
from agentbench_rl.train.config import TrainConfig

SUPPORTED = [name for name in REGISTRY if name != "bipace"]  # BiPACE needs hidden states


def verl_rows(seed: int) -> list[dict[str, Any]]:
    """Two Sokoban groups of four random members as verl rows (uid, session, record)."""
    rows = []
    for uid, task in (("uid-a", "val-0000"), ("uid-b", "val-0003")):
        env = GroupEnv(EnvSpec(name="sokoban", split="val", max_steps=5), group_size=4)
        rollout = rollout_group(env, RandomAgent(), task, seed=seed)
        steps = {traj: outcome["steps"] for traj, outcome in rollout.outcomes.items()}
        for record in rollout.records:
            session = int(record["traj"].rsplit("_", 1)[1])
            step = {key: record[key] for key in ("t", "reward", "obs_key", "state_key")}
            step |= {"action_key": record["action_key"], "valid": bool(record["valid"])}
            step |= {"success": record["success"], "steps": steps[record["traj"]]}
            rows.append({"uid": uid, "session": session, "record": step, "padding": False})
    return rows


@pytest.mark.parametrize("name", SUPPORTED)
def test_shuffled_and_padded_rows_get_the_advantages_of_compute(name: str) -> None:
    rows = verl_rows(seed=3)
    # hand-made reference: env rewards (reward="env"), rows in rollout order
    reference = StepBatch.from_records(
        [{"group": r["uid"], "traj": f"{r['uid']}/{r['session']}", **r["record"]} for r in rows]
    )
    params = {"invalid_penalty": 0.1} if "invalid_penalty" in REGISTRY[name].defaults else {}
    expected = compute(name, reference, **params).advantages
    for index, row in enumerate(rows):
        row["expected"] = expected[index]
    pad = {**rows[0], "uid": "pad-1", "padding": True, "expected": 0.0}  # verl copies row 0
    mixed = rows + [dict(pad, session=k) for k in range(3)]
    random.Random(1).shuffle(mixed)
    advantages, result = row_advantages(
        [r["uid"] for r in mixed],
        [r["session"] for r in mixed],
        [r["record"] for r in mixed],
        [r["padding"] for r in mixed],
        EstimatorSpec(name, params),
        reward="env",
    )
    np.testing.assert_allclose(advantages, [r["expected"] for r in mixed], rtol=1e-9, atol=1e-12)
    assert result.diagnostics["n_rows"] == len(rows)


def test_advantage_norm_is_applied_over_the_real_rows_as_the_home_trainer_does() -> None:
    # Before, the verl engine dropped advantage_norm: batch_std runs trained on raw advantages.
    rows = verl_rows(seed=3)
    pad = {**rows[0], "uid": "pad-1", "padding": True}
    mixed = [*rows, pad]
    columns = (
        [r["uid"] for r in mixed],
        [r["session"] for r in mixed],
        [r["record"] for r in mixed],
        [r["padding"] for r in mixed],
    )
    gigpo = EstimatorSpec("gigpo")
    raw, _ = row_advantages(*columns, gigpo, reward="env")
    scaled, _ = row_advantages(*columns, gigpo, reward="env", advantage_norm="batch_std")
    real = raw[:-1]
    assert real.std() > 0 and scaled[-1] == 0.0
    np.testing.assert_allclose(scaled[:-1], normalize_advantages(real, "batch_std"))
    np.testing.assert_allclose(scaled[:-1], real / real.std())


def test_the_whole_config_crosses_to_verls_workers_and_validation_settings_are_refused(
    tmp_path: Path,
) -> None:
    # Before, 13 of TrainConfig's fields were declared again (VerlSettings) to cross untyped.
    config = TrainConfig(
        env="textcraft",
        val_split="test",
        estimator="gigpo",
        estimator_params={"omega": 0.5},
        advantage_norm="batch_std",
        train_categories=["depth-1"],
        max_steps=7,
    )
    path = write_agent_loop_file(check_verl_config(config), tmp_path)
    read = read_agent_loop_config(path)
    assert read == config and read.identity() == config.identity()
    assert read.train_env().make().max_steps == 7
    for change, name in (
        ({"val_greedy": True}, "val_greedy"),
        ({"val_seeds": [0, 1]}, "val_seeds"),
    ):
        with pytest.raises(ValueError, match=rf"does not validate while training.*{name}"):
            check_verl_config(config.model_copy(update=change))


def test_verl_data_keeps_the_train_categories() -> None:
    from agentbench_rl.envs import env_class
    from agentbench_rl.integrations.verl.data import split_tasks

    known = env_class("textcraft").task_categories("train")
    tasks = split_tasks(EnvSpec(name="textcraft", split="train", categories=("depth-2",)))
    assert tasks and {known[task] for task in tasks} == {"depth-2"}
    assert tasks == [
        task for task in env_class("textcraft").task_ids("train") if known[task] == "depth-2"
    ]
    with pytest.raises(ValueError, match="train_categories: sokoban's split 'train' has no fixed"):
        split_tasks(EnvSpec(name="sokoban", split="train", categories=("easy",)), size=4)


def test_success_reward_on_the_last_step_of_won_trajectories() -> None:
    won = {"t": 1, "reward": 0.3, "obs_key": "o", "state_key": "s", "action_key": "a"}
    won |= {"valid": True, "success": True, "steps": 2}
    batch, kept = step_batch_from_rows(
        ["u", "u", "u"], [0, 0, 1], [dict(won, t=0), won, dict(won, t=0, steps=1, success=False)],
        [False, False, False], reward="success", success_reward=10.0,
    )  # fmt: skip
    assert batch.reward.tolist() == [0.0, 10.0, 0.0] and kept.tolist() == [0, 1, 2]


def test_rows_without_a_step_record_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="no 'agentbench_step' step record"):
        step_batch_from_rows(["u"], [0], [None], [False])
    with pytest.raises(ValueError, match="every row of the batch is padding"):
        step_batch_from_rows(["p"], [0], [None], [True])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_verl_data_writes_one_row_per_task(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from agentbench_rl.envs import env_class

    done = cli("verl-data", str(tmp_path / "t.parquet"), "--env", "textcraft", "--split", "test")
    assert done.returncode == 0, done.stderr
    rows = pd.read_parquet(tmp_path / "t.parquet")
    ids = env_class("textcraft").task_ids("test")
    assert [info["task_id"] for info in rows["extra_info"]] == ids
    assert [info["index"] for info in rows["extra_info"]] == list(range(len(ids)))
    assert set(rows["agent_name"]) == {"agentbench"} and set(rows["data_source"]) == {
        "agentbench/textcraft"
    }
    done = cli("verl-data", str(tmp_path / "s.parquet"), "--env", "sokoban", "--split", "train")
    assert done.returncode == 2 and "has no fixed task list" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_checkpoints_export_to_a_hugging_face_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="holds no verl checkpoint"):
        hf_checkpoint(tmp_path)
    for step in (5, 10):
        folder = tmp_path / "checkpoints" / f"global_step_{step}" / "actor" / "huggingface"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
        (folder / "model.safetensors").write_bytes(b"")
    (tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("10")
    assert checkpoint_steps(tmp_path) == [5, 10]
    assert hf_checkpoint(tmp_path) == tmp_path / "checkpoints/global_step_10/actor/huggingface"
    assert hf_checkpoint(tmp_path, 5).parts[-3] == "global_step_5"
    with pytest.raises(FileNotFoundError, match="no checkpoint of step 7"):
        hf_checkpoint(tmp_path, 7)
    done = cli("verl-export", str(tmp_path), "--step", "5")
    assert done.returncode == 0 and done.stdout.strip().endswith("global_step_5/actor/huggingface")


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is installed")
def test_engine_verl_without_the_extra_is_one_clear_error(tmp_path: Path) -> None:
    done = cli("train", "--engine", "verl", "--env", "sokoban", "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "engine verl needs the verl extra" in done.stderr
    assert not (tmp_path / "r").exists()
