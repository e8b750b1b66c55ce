"""Sokoban's task ids and splits.

Task ids are ``<split>-<index>``: ``test-0000`` .. ``test-0499``, ``val-0000`` .. ``val-0199``, and
``train-<n>`` for any 0 <= n < 2**31, written without leading zeros. Each level has exactly one id
(``test-00000`` or ``train-007`` are refused, not read as aliases). For the standard setting (6x6,
one box, optimal solutions of at most 15 steps) the test and val levels are pinned in
``splits.json`` (shipped with the package) by layout and layout hash; every other setting builds
its fixed splits with the same seeded procedure. Train levels are generated on demand and skip
any layout of the test or val split, so the splits never share a level. The episode's step limit
is not part of the setting: a task id names the same level whatever ``max_steps`` the env has.
"""

from __future__ import annotations

import json
import re
from dataclasses import astuple
from functools import lru_cache
from importlib import resources
from typing import Any

from agentbench_rl.core.hashing import seed_from, stable_hash
from agentbench_rl.envs.sokoban.generator import Level, LevelConfig, generate_level, search_deadline
from agentbench_rl.envs.sokoban.rules import parse_grid

STANDARD = LevelConfig()
FIXED_SPLIT_SIZES = {"test": 500, "val": 200}
SPLITS = ("train", "val", "test")
MANIFEST = "splits.json"
TRAIN_SIZE = 2**31  # train ids are train-0 .. train-2147483647
_TASK_ID = re.compile(r"(train|val|test)-([0-9]{1,10})", re.ASCII)


def parse_task_id(value: str) -> tuple[str, int]:
    """Split ``test-0042`` into ``("test", 42)``; raises ``ValueError`` naming the bad id.

    Example:
        >>> parse_task_id("val-0007")
        ('val', 7)
    """
    match = _TASK_ID.fullmatch(value) if len(value) <= 16 else None
    if match is None or value != task_id(match.group(1), int(match.group(2))):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise ValueError(f"sokoban: bad task id {shown!r} (expected e.g. test-0042 or train-7)")
    split, index = match.group(1), int(match.group(2))
    size = FIXED_SPLIT_SIZES.get(split, TRAIN_SIZE)
    if index >= size:
        raise ValueError(
            f"sokoban: task id '{value}' is past the end of split '{split}' ({size} levels)"
        )
    return split, index


def task_id(split: str, index: int) -> str:
    """The id of level ``index`` of ``split``: zero-padded to 4 digits in the fixed splits,
    unpadded in ``train``.

    Example:
        >>> task_id("test", 7), task_id("train", 7)
        ('test-0007', 'train-7')
    """
    return f"{split}-{index}" if split == "train" else f"{split}-{index:04d}"


def build_fixed_splits(config: LevelConfig) -> dict[str, list[Level]]:
    """Generate the test and val levels of ``config``: seeded, in order, no layout twice."""
    seen: set[str] = set()
    splits: dict[str, list[Level]] = {}
    deadline = search_deadline()
    for split, size in FIXED_SPLIT_SIZES.items():
        levels = []
        for index in range(size):
            attempt = 0
            while True:
                level = generate_level(
                    seed_from("sokoban", split, index, attempt, astuple(config)), config, deadline
                )
                if level.layout not in seen:
                    break
                attempt += 1
            seen.add(level.layout)
            levels.append(level)
        splits[split] = levels
    return splits


def manifest_payload(config: LevelConfig, splits: dict[str, list[Level]]) -> dict[str, Any]:
    """The manifest (what ``splits.json`` holds) of a set of fixed splits."""
    entries = {
        split: [
            {
                "task_id": task_id(split, index),
                "layout": level.layout,
                "layout_hash": stable_hash(level.layout),
                "optimal_steps": level.optimal_steps,
            }
            for index, level in enumerate(levels)
        ]
        for split, levels in splits.items()
    }
    return {
        "env": "sokoban",
        "config": {
            "width": config.width,
            "height": config.height,
            "num_boxes": config.num_boxes,
            "solution_limit": config.solution_limit,
        },
        "checksums": {split: _checksum(config, rows) for split, rows in entries.items()},
        "splits": entries,
    }


def _checksum(config: LevelConfig, rows: list[dict[str, Any]]) -> str:
    return stable_hash([astuple(config), [(row["task_id"], row["layout_hash"]) for row in rows]])


@lru_cache(maxsize=8)
def fixed_splits(config: LevelConfig) -> dict[str, Any]:
    """The manifest of ``config``: the shipped one for the standard setting, else built."""
    if config != STANDARD:
        return manifest_payload(config, build_fixed_splits(config))
    text = resources.files("agentbench_rl.envs.sokoban").joinpath(MANIFEST).read_text("utf-8")
    manifest: dict[str, Any] = json.loads(text)
    for split, rows in manifest["splits"].items():
        for row in rows:
            if stable_hash(row["layout"]) != row["layout_hash"]:
                raise ValueError(
                    f"sokoban: {MANIFEST} is corrupt: level {row['task_id']} "
                    "does not match its layout hash"
                )
        if _checksum(config, rows) != manifest["checksums"][split]:
            raise ValueError(f"sokoban: {MANIFEST} is corrupt: checksum of split '{split}'")
    return manifest


@lru_cache(maxsize=8)
def _reserved_layouts(config: LevelConfig) -> frozenset[str]:
    manifest = fixed_splits(config)
    return frozenset(row["layout"] for rows in manifest["splits"].values() for row in rows)


@lru_cache(maxsize=4096)
def load_level(task: str, config: LevelConfig = STANDARD) -> Level:
    """The level behind a task id.

    Example:
        >>> load_level("test-0000").optimal_steps >= 1
        True
    """
    split, index = parse_task_id(task)
    if split != "train":
        row = fixed_splits(config)["splits"][split][index]
        room, player, boxes = parse_grid(row["layout"])
        return Level(room, player, boxes, row["optimal_steps"])
    reserved = _reserved_layouts(config)
    attempt, deadline = 0, search_deadline()
    while True:
        level = generate_level(
            seed_from("sokoban", "train", index, attempt, astuple(config)), config, deadline
        )
        if level.layout not in reserved:
            return level
        attempt += 1


def difficulty(optimal_steps: int, solution_limit: int) -> str:
    """The category of a level: ``easy``, ``medium`` or ``hard`` by thirds of its setting's
    solution limit (for 15: optimal solution of 1-5, 6-10 or 11-15 steps), so a level keeps its
    category whatever the episode's step limit.

    Example:
        >>> difficulty(5, 15), difficulty(6, 15), difficulty(11, 15)
        ('easy', 'medium', 'hard')
    """
    if optimal_steps * 3 <= solution_limit:
        return "easy"
    if optimal_steps * 3 <= 2 * solution_limit:
        return "medium"
    return "hard"
