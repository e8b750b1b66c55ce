"""Hostile input to the envs' ``reset``: alias task ids, ids of other splits, huge ids, options
that are not a dict or hold a typo, and Sokoban generator settings out of bounds.

An env accepts exactly the ids of its own split (``info["task_id"]`` is then the id asked for)
and answers everything else with a ``ValueError`` that names the problem in one line.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agentbench_rl.envs import make
from agentbench_rl.envs.sokoban.generator import MAX_SIDE, LevelConfig, generate_level
from agentbench_rl.envs.sokoban.levels import parse_task_id, task_id

ARABIC_INDIC_ZEROS = "\u0660" * 4


def refusal(env: Any, options: Any) -> str:
    with pytest.raises(ValueError) as caught:
        env.reset(seed=0, options=options)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300
    return message


# ------------------------------------------------------------------------------ task ids
@pytest.mark.parametrize("env_name", ["sokoban", "visual_sokoban"])
@pytest.mark.parametrize(
    "alias",
    [
        "test-00000",
        f"test-{ARABIC_INDIC_ZEROS}",
        "test-0000\n",
        " test-0000",
        "TEST-0000",
        "test-0",
        "val-0000",  # another split
        "train-5",  # another split
        "test-0500",  # past the end
        "test-" + "9" * 5000,  # past Python's digit limit
        "x" * 100_000,
    ],
)
def test_sokoban_takes_only_the_exact_ids_of_its_split(env_name: str, alias: str) -> None:
    env = make(env_name, split="test")
    assert "is not a task id of split 'test'" in refusal(env, {"task_id": alias})
    _, info = env.reset(options={"task_id": "test-0000"})
    assert info["task_id"] == "test-0000"


def test_sokoban_train_ids_are_unpadded_and_bounded() -> None:
    env = make("sokoban", split="train")
    for good in ("train-0", "train-5", "train-1234", "train-2147483647"):
        assert env.reset(options={"task_id": good})[1]["task_id"] == good
    for bad in ("train-05", "train-0005", "train-2147483648", "train-" + "1" * 20, "test-0000"):
        assert "is not a task id of split 'train'" in refusal(env, {"task_id": bad})
    # a drawn train task is in the same form
    drawn = env.reset(seed=3)[1]["task_id"]
    assert drawn == task_id("train", parse_task_id(drawn)[1])


def test_textcraft_takes_only_its_own_split() -> None:
    env = make("textcraft", split="test")
    first = env.task_ids("test")[0]
    assert env.reset(options={"task_id": first})[1]["task_id"] == first
    for other in ("crafting_table", "adapt-000", first.upper(), first + "\n"):
        assert "is not a task id of split 'test'" in refusal(env, {"task_id": other})


def test_webshop_takes_only_the_exact_ids_of_its_split(
    shared_data_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("bm25s")
    env = make("webshop", split="test", data_dir=shared_data_dir / "webshop", cache_dir=tmp_path)
    for alias in ("test-000000", f"test-0{ARABIC_INDIC_ZEROS}", "test-00000\n", "train-00512"):
        assert "is not a task id of split 'test'" in refusal(env, {"task_id": alias})
    assert env.reset(options={"task_id": "test-00000"})[1]["task_id"] == "test-00000"


# ------------------------------------------------------------------------------ options
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("test-0000", "reset options must be a dict such as {'task_id': ...}, got str"),
        (["task_id", "test-0000"], "must be a dict such as {'task_id': ...}, got list"),
        ({"taskid": "test-0000"}, "unknown reset option 'taskid' (known: task_id)"),
        ({"task_id": "test-0000", "seed": 3}, "unknown reset option 'seed'"),
        ({"task_id": 7}, "task_id must be a string, got int"),
        ({"task_id": b"test-0000"}, "task_id must be a string, got bytes"),
    ],
)
def test_bad_reset_options_are_named(options: Any, message: str) -> None:
    assert message in refusal(make("sokoban", split="test"), options)


def test_a_refused_reset_leaves_the_env_as_it_was() -> None:
    env = make("sokoban", split="test")
    observation, _ = env.reset(options={"task_id": "test-0003"})
    refusal(env, {"taskid": "test-0004"})
    assert env.task_id == "test-0003" and env.render() is None
    assert env.observation_text() == observation


def test_no_options_and_a_none_task_draw_a_task() -> None:
    env = make("sokoban", split="val")
    for options in (None, {}, {"task_id": None}):
        _, info = env.reset(seed=1, options=options)
        assert info["task_id"] in env.task_ids("val")


# ------------------------------------------------------------------------------ generator bounds
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"width": 30, "height": 30}, f"room must be 4x4 to {MAX_SIDE}x{MAX_SIDE}, got 30x30"),
        ({"width": 3}, "room must be 4x4"),
        ({"num_boxes": 0}, "num_boxes must be 1 to 3, got 0"),
        ({"num_boxes": 4}, "num_boxes must be 1 to 3, got 4"),
        ({"max_steps": 10_000}, "max_steps must be 1 to 100, got 10000"),
        ({"solution_limit": 10_000}, "solution_limit must be 1 to 100, got 10000"),
        ({"solution_limit": 0}, "solution_limit must be 1 to 100, got 0"),
        ({"width": 6.5}, "width must be a whole number, got 6.5"),
        ({"width": True}, "width must be a whole number, got True"),
    ],
)
def test_generator_settings_out_of_bounds_are_named(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make("sokoban", split="test", **settings)


def test_a_setting_without_levels_fails_fast_with_a_value_error() -> None:
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"no 4x4 level with 3 boxes solvable in 15 steps"):
        make("sokoban", split="test", width=4, height=4, num_boxes=3)
    assert time.monotonic() - start < 60  # 1000 cheap attempts, not minutes


def test_the_search_deadline_turns_into_a_value_error() -> None:
    with pytest.raises(ValueError, match="took over"):
        generate_level(0, LevelConfig(4, 4, 3, 15), deadline=time.monotonic() - 1)
