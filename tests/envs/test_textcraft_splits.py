"""TextCraft's split manifest: shipped = built, sizes, stratification, ADaPT's rule."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.textcraft.env import TextCraftEnv
from agentbench_rl.envs.textcraft.recipes import load_recipe_book
from agentbench_rl.envs.textcraft.tasks import (
    build_manifest,
    build_prompt,
    load_manifest,
    manifest_text,
    split_checksum_of,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = REPO_ROOT / "agentbench_rl/envs/textcraft/splits.json"

# The 11 goals of depth 4; ADaPT's recorded run (results/ADaPT_maxd3_textcraft_*.json) opens
# with six of them: polished granite stairs, hopper minecart, polished granite slab, lodestone,
# purple banner, cyan banner.
DEPTH_4 = {
    "cyan_banner",
    "gray_banner",
    "hopper_minecart",
    "lectern",
    "lime_banner",
    "lodestone",
    "polished_andesite_slab",
    "polished_andesite_stairs",
    "polished_granite_slab",
    "polished_granite_stairs",
    "purple_banner",
}


@pytest.fixture(scope="module")
def manifest() -> dict:
    return load_manifest()


def test_shipped_manifest_equals_the_builder_output() -> None:
    assert SHIPPED.read_text("utf-8") == manifest_text(build_manifest(load_recipe_book()))


def test_build_script_check_mode_agrees() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "envs/textcraft/build_splits.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_the_netherite_block_is_out_of_reach(manifest: dict) -> None:
    # 9 netherite ingots, each 4 gold ingots (+4 scrap), each gold ingot 9 nuggets:
    # 36 + 9 + 1 crafts and one get each of nuggets and scrap = 48 actions > 40.
    assert manifest["excluded"] == [{"item": "netherite_block", "depth": 3, "expert_steps": 48}]
    assert manifest["max_steps"] == 40


def test_train_and_test_are_disjoint_and_cover_every_goal(manifest: dict) -> None:
    book = load_recipe_book()
    train = [row["item"] for row in manifest["splits"]["train"]]
    test = [row["item"] for row in manifest["splits"]["test"]]
    assert (len(test), len(train)) == (200, 543 - 200)
    assert not set(train) & set(test)
    goals = {name.removeprefix("minecraft:") for name in book.goal_items()}
    assert set(train) | set(test) == goals - {"netherite_block"}
    assert [row["task_id"] for row in manifest["splits"]["test"]] == test


def test_test_is_stratified_by_depth(manifest: dict) -> None:
    # goals per depth 125, 291, 116 (117 less the netherite block), 11 = 543; 200 of them in
    # proportion: 46.04, 107.18, 42.73, 4.05 -> floors 46, 107, 42, 4 (199) and the last seat to
    # the largest remainder, depth 3.
    rows = manifest["splits"]
    assert Counter(row["depth"] for row in rows["train"] + rows["test"]) == {
        1: 125,
        2: 291,
        3: 116,
        4: 11,
    }
    assert Counter(row["depth"] for row in rows["test"]) == {1: 46, 2: 107, 3: 43, 4: 4}


def test_adapt_follows_adapts_rule(manifest: dict) -> None:
    rows = manifest["splits"]["adapt"]
    assert [row["task_id"] for row in rows] == [f"adapt-{index:03d}" for index in range(200)]
    depths = [row["depth"] for row in rows]
    # 418 goals of depth >= 2 (291 + 116 + 11): 200 of them, no wrap-around, deepest first
    assert depths == sorted(depths, reverse=True)
    assert Counter(depths) == {4: 11, 3: 116, 2: 73}
    assert {row["item"] for row in rows[:11]} == DEPTH_4
    assert len({row["item"] for row in rows}) == 200


def test_rows_pin_the_prompt_and_the_checksums_match(manifest: dict) -> None:
    book = load_recipe_book()
    row = next(
        row
        for row in manifest["splits"]["test"] + manifest["splits"]["train"]
        if row["item"] == "crafting_table"
    )
    assert row["prompt_hash"] == stable_hash(build_prompt(book, "minecraft:crafting_table"))
    assert row["depth"] == 2
    for split, rows in manifest["splits"].items():
        assert split_checksum_of(manifest["data_hash"], split, rows) == manifest["checksums"][split]
        assert TextCraftEnv.task_ids(split) == [row["task_id"] for row in rows]
    # any change to a row changes its split's checksum
    test_rows = manifest["splits"]["test"]
    changed = [dict(test_rows[0], depth=9), *test_rows[1:]]
    assert (
        split_checksum_of(manifest["data_hash"], "test", changed) != manifest["checksums"]["test"]
    )
    assert manifest["data_hash"] == book.data_hash
