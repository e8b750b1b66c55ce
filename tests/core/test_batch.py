"""StepBatch validation: every malformed batch raises ValueError naming the column and the row."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from agentbench_rl.core.batch import StepBatch, StepColumns


def record(traj: Any, t: int, **overrides: Any) -> dict[str, Any]:
    row = {
        "group": "g",
        "traj": traj,
        "t": t,
        "reward": 0.0,
        "obs_key": f"o{t}",
        "state_key": f"s{t}",
        "action_key": "up",
        "valid": True,
    }
    row.update(overrides)
    return row


def two_trajectories() -> list[dict[str, Any]]:
    # rows 0-2: trajectory "a" at t = 0, 1, 2; rows 3-4: trajectory "b" at t = 0, 1
    return [record("a", 0), record("a", 1), record("a", 2), record("b", 0), record("b", 1)]


def raises_at(column: str, row: int | None) -> Any:
    where = f"column '{column}'" + (f", row {row}:" if row is not None else "")
    return pytest.raises(ValueError, match=re.escape(where))


def test_a_valid_batch_keeps_its_columns_and_structure() -> None:
    batch = StepBatch.from_records(two_trajectories())
    assert len(batch) == 5
    assert (batch.n_groups, batch.n_trajs) == (1, 2)
    assert batch.next_row.tolist() == [1, 2, -1, 4, -1]
    assert batch.prev_row.tolist() == [-1, 0, 1, -1, 3]
    order, starts = batch.step_order
    # t = 0: rows 0 and 3; t = 1: rows 1 and 4; t = 2: row 2
    assert order.tolist() == [0, 3, 1, 4, 2]
    assert starts.tolist() == [0, 2, 4, 5]


def test_rows_in_any_order_give_the_same_structure() -> None:
    records = two_trajectories()
    shuffled = [records[i] for i in (4, 2, 0, 3, 1)]
    batch = StepBatch.from_records(shuffled)
    # shuffled rows: 0=b1, 1=a2, 2=a0, 3=b0, 4=a1
    assert batch.next_row.tolist() == [-1, -1, 4, 0, 1]
    assert batch.prev_row.tolist() == [3, 4, -1, -1, 2]


def test_ids_are_compared_as_given() -> None:
    records = [record(1, 0, group=1), record("1", 0, group="1")]
    batch = StepBatch.from_records(records)
    assert (batch.n_groups, batch.n_trajs) == (2, 2)


@pytest.mark.parametrize(
    ("ids", "n_distinct"),
    [
        ([1, 2, 1], 2),  # ints: kept as int64
        ([1, "1", 1], 2),  # an int and a string never merge
        ([1, 1.5, 1], 2),  # nor an int and a float
        ([1, 2**70, 1], 2),  # past int64: objects
        ([(1, 2), (1, 2), (3, 4)], 2),  # tuples
    ],
)
def test_id_columns_of_any_kind_give_the_groups_the_ids_say(
    ids: list[Any], n_distinct: int
) -> None:
    records = [record(traj, 0, group=ids[traj]) for traj in range(3)]  # one trajectory a row
    batch = StepBatch.from_records(records)
    assert batch.n_groups == n_distinct
    assert [batch.group[i] for i in range(3)] == ids
    assert batch.to_records()[1]["group"] == ids[1]


def test_error_messages_name_an_int_trajectory_as_given() -> None:
    records = [record(7, 0, group=0), record(7, 0, group=0)]
    with pytest.raises(ValueError, match=r"trajectory 7 repeats"):
        StepBatch.from_records(records)


def test_replaced_columns_are_taken_instead_of_the_records() -> None:
    records = two_trajectories()
    rewards = np.arange(5, dtype=float)
    hidden = np.ones((5, 3), dtype=np.float32)
    batch = StepBatch.from_records(records, reward=rewards, hidden=hidden)
    assert batch.reward.tolist() == rewards.tolist()
    assert batch.hidden is not None and batch.hidden.dtype == np.float32
    with raises_at("rewards", None):
        StepBatch.from_records(records, rewards=rewards)


def test_optional_columns_are_found_on_any_record_whatever_the_other_keys() -> None:
    records = two_trajectories()
    records[0]["note"] = "not a column"  # a ninth key that is no column
    assert StepBatch.from_records(records).semantic_key is None
    records[3]["semantic_key"] = "k"
    with raises_at("semantic_key", 0):  # given on row 3 only: the first row without it
        StepBatch.from_records(records)


def test_empty_batch() -> None:
    with pytest.raises(ValueError, match="empty"):
        StepBatch.from_records([])


def test_missing_column_names_the_row() -> None:
    records = two_trajectories()
    del records[3]["reward"]
    with raises_at("reward", 3):
        StepBatch.from_records(records)


def test_mismatched_lengths_name_the_column_and_row() -> None:
    columns = StepBatch.from_records(two_trajectories()).to_records()
    arrays = {key: [row[key] for row in columns] for key in columns[0]}
    arrays["reward"] = arrays["reward"][:4]
    with raises_at("reward", 4):
        StepBatch(**arrays)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_reward(bad: float) -> None:
    records = two_trajectories()
    records[2]["reward"] = bad
    with raises_at("reward", 2):
        StepBatch.from_records(records)


def test_t_not_an_integer() -> None:
    records = two_trajectories()
    records[1]["t"] = 1.5
    with raises_at("t", 1):
        StepBatch.from_records(records)


def test_t_that_does_not_start_at_zero() -> None:
    records = [record("a", 1), record("a", 2)]
    with raises_at("t", 0):
        StepBatch.from_records(records)


def test_t_with_a_gap() -> None:
    records = two_trajectories()
    records[2]["t"] = 3  # a: 0, 1, 3
    with raises_at("t", 2):
        StepBatch.from_records(records)


def test_t_that_repeats() -> None:
    records = two_trajectories()
    records[4]["t"] = 0  # b: 0, 0
    with pytest.raises(ValueError, match=r"column 't', row [34]: trajectory 'b' repeats"):
        StepBatch.from_records(records)


def test_trajectory_in_two_groups() -> None:
    records = two_trajectories()
    records[2]["group"] = "h"
    with pytest.raises(ValueError, match=r"column 'group', row \d: trajectory 'a' appears in two"):
        StepBatch.from_records(records)


def test_valid_that_is_not_boolean() -> None:
    records = two_trajectories()
    records[3]["valid"] = "yes"
    with raises_at("valid", 3):
        StepBatch.from_records(records)


def test_semantic_key_on_some_rows_only() -> None:
    records = two_trajectories()
    records[0]["semantic_key"] = "kitchen"
    with raises_at("semantic_key", 1):
        StepBatch.from_records(records)


def test_hidden_of_mixed_lengths() -> None:
    records = two_trajectories()
    for row in records:
        row["hidden"] = [1.0, 0.0]
    records[3]["hidden"] = [1.0, 0.0, 0.0]
    with raises_at("hidden", 3):
        StepBatch.from_records(records)


def test_hidden_missing_on_some_rows_is_kept_as_nan() -> None:
    records = two_trajectories()
    records[0]["hidden"] = [1.0, 2.0]
    batch = StepBatch.from_records(records)
    assert batch.hidden is not None
    assert batch.hidden[0].tolist() == [1.0, 2.0]
    assert np.isnan(batch.hidden[1:]).all()


def test_hidden_float32_stays_float32() -> None:
    arrays = {key: [row[key] for row in two_trajectories()] for key in two_trajectories()[0]}
    batch = StepBatch(**arrays, hidden=np.ones((5, 3), dtype=np.float32))
    assert batch.hidden is not None and batch.hidden.dtype == np.float32
    assert batch.take([4, 3]).hidden.dtype == np.float32  # type: ignore[union-attr]


def test_hidden_of_the_wrong_shape() -> None:
    arrays = {key: [row[key] for row in two_trajectories()] for key in two_trajectories()[0]}
    with raises_at("hidden", None):
        StepBatch(**arrays, hidden=np.ones(5))


def test_take_permutes_and_revalidates() -> None:
    batch = StepBatch.from_records(two_trajectories())
    permuted = batch.take([3, 0, 4, 1, 2])
    assert permuted.traj.tolist() == ["b", "a", "b", "a", "a"]
    assert permuted.next_row.tolist() == [2, 3, -1, 4, -1]
    with raises_at("t", None):
        batch.take([1, 2])  # trajectory "a" without its t = 0


def test_round_trip_through_records() -> None:
    records = two_trajectories()
    for row in records:
        row["hidden"] = [0.5, 1.5]
        row["success"] = row["traj"] == "a"
    batch = StepBatch.from_records(records)
    assert StepBatch.from_records(batch.to_records()).to_records() == batch.to_records()


def columns_equal(ours: StepBatch, theirs: StepBatch) -> None:
    for name in ("group", "traj", "t", "reward", "obs_key", "state_key", "action_key", "valid"):
        assert getattr(ours, name).tolist() == getattr(theirs, name).tolist(), name
        assert getattr(ours, name).dtype == getattr(theirs, name).dtype, name


@pytest.mark.parametrize("ids", [lambda i: i, lambda i: f"traj-{i}"])
@pytest.mark.parametrize(("chunk", "block"), [(1, 1), (3, 4), (7, 2), (4, 1024)])
def test_step_columns_build_the_batch_from_records_builds(ids: Any, chunk: int, block: int) -> None:
    # four trajectories written step-major, the driver's order, in chunks and blocks of any size
    records = [
        record(ids(traj), t, group=traj // 2, reward=float(traj * t), success=traj % 2 == 0)
        for t in range(5)
        for traj in range(4)
    ]
    written = [{k: v for k, v in r.items() if k != "success"} for r in records]
    rows = StepColumns()
    rows.BLOCK_ROWS = block
    for start in range(0, len(records), chunk):
        rows.extend(written[start : start + chunk])
        # readable while written: converted rows and pending ones alike
        assert [rows.row(i) for i in range(len(rows))] == written[: len(rows)]
    rows.set_column("success", np.array([r["success"] for r in records]))
    assert len(rows) == len(records)
    assert [rows.row(i) for i in range(len(rows))] == records
    built = rows.batch()
    columns_equal(built, StepBatch.from_records(records))
    assert built.success is not None and built.success.tolist() == [r["success"] for r in records]
    assert rows.records() == records
    assert [rows.row(i) for i in range(len(rows))] == records  # and once the blocks are joined


def test_step_columns_take_replaced_columns_and_hidden_as_from_records_does() -> None:
    records = two_trajectories()
    rows = StepColumns.of([r | {"hidden": [float(i), 1.0]} for i, r in enumerate(records)])
    built = rows.batch(reward=np.arange(5.0))
    assert built.reward.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert built.hidden is not None and built.hidden[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_step_columns_name_what_is_wrong() -> None:
    rows = StepColumns()
    with raises_at("group", None):
        rows.batch()
    rows.extend(two_trajectories())
    with raises_at("success", None):
        rows.set_column("success", np.array([True]))
    with raises_at("reward", None):
        rows.set_column("reward", np.zeros(5))
    with raises_at("rewards", None):
        rows.batch(rewards=np.zeros(5))
    with raises_at("t", 5):
        rows.extend([record("a", 5)])  # a gap in trajectory "a", found when the batch is built
        rows.batch()
    with pytest.raises(IndexError, match="row 6 of 6"):
        rows.row(6)


def test_step_columns_name_a_record_that_lacks_a_column_by_its_row() -> None:
    rows = StepColumns()
    rows.BLOCK_ROWS = 2
    rows.extend(two_trajectories()[:3])  # rows 0-2, converted
    lacking = record("b", 0)
    del lacking["state_key"]
    with raises_at("state_key", 4):  # named when its block is converted: here, written
        rows.extend([record("b", 0) | {"traj": "c"}, lacking])
    rows = StepColumns()
    rows.extend([*two_trajectories()[:3], lacking])
    with raises_at("state_key", 3):  # or when the batch is built
        rows.batch()


def test_step_columns_keep_what_is_not_a_number_as_given_for_the_batch_to_name() -> None:
    rows = StepColumns()
    rows.BLOCK_ROWS = 2
    rows.extend(two_trajectories()[:2])  # a block of booleans
    rows.extend([record("a", 2), record("b", 0, valid="yes")])  # a block holding a string
    with pytest.raises(ValueError, match=re.escape("column 'valid', row 3: 'yes' is not a")):
        rows.batch()
