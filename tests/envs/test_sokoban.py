"""Sokoban: rules, solver, generator, splits and the two envs, on hand-checked levels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.base import EpisodeEndedError
from agentbench_rl.envs.sokoban.env import SokobanEnv, VisualSokobanEnv
from agentbench_rl.envs.sokoban.generator import LevelConfig, generate_level
from agentbench_rl.envs.sokoban.levels import (
    FIXED_SPLIT_SIZES,
    build_fixed_splits,
    load_level,
    manifest_payload,
    parse_task_id,
)
from agentbench_rl.envs.sokoban.render import TILE, render_image, tile_stack
from agentbench_rl.envs.sokoban.rules import move, parse_grid, render_grid, solved
from agentbench_rl.envs.sokoban.solver import solve

REPO = Path(__file__).resolve().parents[2]

# A corridor: player, floor, box, target. Cells are numbered y * 6 + x.
CORRIDOR = "######\n#P_XO#\n######"


def test_move_pushes_and_scores_like_the_classic_env() -> None:
    room, player, boxes = parse_grid(CORRIDOR)
    assert (player, boxes) == (7, frozenset({9}))
    # Walk right onto floor: -0.1.
    player, boxes, reward = move(room, player, boxes, "right")
    assert (player, boxes, reward) == (8, frozenset({9}), -0.1)
    # Push the box onto the target: -0.1 + 1 + 10.
    player, boxes, reward = move(room, player, boxes, "right")
    assert (player, boxes, reward) == (9, frozenset({10}), 10.9)
    assert solved(room, boxes)
    # Walls: bump up, nothing moves, still -0.1.
    assert move(room, 9, frozenset({10}), "up") == (9, frozenset({10}), -0.1)


def test_pushing_a_box_off_its_target_costs_one() -> None:
    room, player, boxes = parse_grid("#######\n#_P√__#\n#######")
    # The box stands on its target at x=3; pushing it right moves it off: -0.1 - 1.
    player, boxes, reward = move(room, player, boxes, "right")
    assert boxes == frozenset({11}) and reward == pytest.approx(-1.1)
    assert render_grid(room, player, boxes) == "#######\n#__SX_#\n#######"


def test_box_against_box_or_wall_does_not_move() -> None:
    room, player, boxes = parse_grid("#######\n#PXX_O#\n#____O#\n#######")
    assert move(room, player, boxes, "right") == (player, boxes, -0.1)


def test_parse_render_round_trip_and_errors() -> None:
    grid = "#####\n#S_X#\n#___#\n#####"
    assert render_grid(*parse_grid(grid)) == grid
    with pytest.raises(ValueError, match="no player"):
        parse_grid("###\n#X#\n#O#")
    with pytest.raises(ValueError, match="2 boxes but 1 targets"):
        parse_grid("#####\n#PXX#\n#O__#")


def test_solver_finds_shortest_solutions_by_hand() -> None:
    assert solve(*parse_grid(CORRIDOR)) == ["right", "right"]
    #   #######
    #   #P____#   player (1,1)
    #   #_X___#   box (2,2)
    #   #___O_#   target (4,3)
    #   #######
    # The box must go right twice and down once. Pushing right first: down, right, right (box at
    # (4,2)), up, right, down = 6 steps; pushing down first: right, down, left, down, right,
    # right = 6 steps. Nothing shorter exists (3 pushes plus at least 3 moves to get behind it).
    room, player, boxes = parse_grid("#######\n#P____#\n#_X___#\n#___O_#\n#######")
    solution = solve(room, player, boxes)
    assert solution is not None and len(solution) == 6
    for action in solution:
        player, boxes, _ = move(room, player, boxes, action)
    assert solved(room, boxes)


def test_solver_respects_max_steps_and_dead_boxes() -> None:
    assert solve(*parse_grid(CORRIDOR), max_steps=1) is None
    # Box in a corner that is not a target: unsolvable.
    assert solve(*parse_grid("#####\n#X__#\n#_P_#\n#__O#\n#####")) is None


def test_generator_is_seeded_and_every_level_fits_the_step_limit() -> None:
    assert generate_level(123) == generate_level(123)
    assert generate_level(123) != generate_level(124)
    config = LevelConfig(width=7, height=7, num_boxes=2, solution_limit=20)
    for seed in range(20):
        level = generate_level(seed, config)
        assert len(level.boxes) == 2 and not solved(level.room, level.boxes)
        solution = solve(level.room, level.player, level.boxes)
        assert solution is not None and len(solution) == level.optimal_steps <= 20


def test_shipped_manifest_equals_the_build_script_output() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "envs/sokoban/build_splits.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_splits_are_fixed_disjoint_and_pinned() -> None:
    manifest = json.loads((REPO / "agentbench_rl/envs/sokoban/splits.json").read_text())
    test_layouts = {row["layout"] for row in manifest["splits"]["test"]}
    val_layouts = {row["layout"] for row in manifest["splits"]["val"]}
    assert len(test_layouts) == 500 and len(val_layouts) == 200
    assert not test_layouts & val_layouts
    reserved = test_layouts | val_layouts
    train = {load_level(f"train-{index}").layout for index in range(300)}
    assert not train & reserved
    assert SokobanEnv.task_ids("test")[:2] == ["test-0000", "test-0001"]
    assert len(SokobanEnv.task_ids("val")) == FIXED_SPLIT_SIZES["val"]
    with pytest.raises(ValueError, match="unbounded"):
        SokobanEnv.task_ids("train")
    with pytest.raises(ValueError, match="past the end"):
        parse_task_id("test-0500")


def test_non_standard_setting_builds_its_own_fixed_splits() -> None:
    config = LevelConfig(width=5, height=5, num_boxes=1, solution_limit=10)
    levels = build_fixed_splits(config)
    payload = manifest_payload(config, levels)
    assert payload["config"]["width"] == 5 and len(payload["splits"]["test"]) == 500
    env = SokobanEnv(split="test", width=5, height=5, solution_limit=10)
    assert env.checksum() == payload["checksums"]["test"] != SokobanEnv.split_checksum("test")


@pytest.mark.parametrize("task", ["test-0003", "val-0010", "train-5"])
def test_a_task_id_names_the_same_level_whatever_the_step_limit(task: str) -> None:
    # Before the fix the step limit was part of the level seed: test-0003 under max_steps=3 was
    # another room, with another split checksum (the ids must not move with the limit).
    split = task.split("-")[0]
    seen = set()
    for max_steps in (3, 15, 40):
        env = SokobanEnv(split=split, max_steps=max_steps)
        obs, info = env.reset(options={"task_id": task})
        seen.add((obs, info["category"], env.checksum() if split != "train" else None))
    assert len(seen) == 1
    if split != "train":
        assert seen.pop()[2] == SokobanEnv.split_checksum(split)


def test_the_step_limit_still_truncates_a_level_it_cannot_fit() -> None:
    # test-0000's optimal solution (from the pinned manifest) is longer than 1 step: with a
    # 1-step limit the expert is cut off, the level itself unchanged.
    env = SokobanEnv(split="test", max_steps=1)
    env.reset(options={"task_id": "test-0000"})
    assert env.level.optimal_steps > 1
    *_, terminated, truncated, _ = env.step(env.expert_action())
    assert (terminated, truncated) == (False, True)


@pytest.mark.parametrize("env_cls", [SokobanEnv, VisualSokobanEnv])
def test_check_env_passes(env_cls: type[SokobanEnv]) -> None:
    check_env(env_cls(split="test"), skip_render_check=True)
    check_env(env_cls(split="train"), skip_render_check=True)


def test_gymnasium_make_works_after_a_plain_install() -> None:
    code = (
        "import gymnasium as gym, agentbench_rl;"
        "env = gym.make('agentbench/Sokoban-v0', split='test');"
        "obs, info = env.reset(options={'task_id': 'test-0000'});"
        "env2 = gym.make('agentbench_rl:agentbench/VisualSokoban-v0', split='val');"
        "print(info['task_id'], env2.unwrapped.split)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["test-0000", "val"]


def test_reset_and_step_on_a_known_level() -> None:
    env = SokobanEnv(split="test")
    obs, info = env.reset(options={"task_id": "test-0000"})
    # Pinned by the manifest: box under its target, player to the lower right.
    assert obs == "######\n######\n#O_###\n#X_#_#\n#__P_#\n######"
    assert info["admissible_actions"] == ["up", "down", "left", "right"]
    assert info["obs_hash"] == info["state_hash"] == stable_hash(obs)
    assert info["won"] is False and info["score"] == 0.0 and info["category"] == "easy"
    # By hand: left, left, then push up: -0.1, -0.1, -0.1 + 1 + 10.
    rewards = []
    for raw in ("<think>walk</think><action>LEFT</action>", "left", "<action>up</action>"):
        obs, reward, terminated, truncated, info = env.step(raw)
        rewards.append(reward)
    assert rewards == [-0.1, -0.1, 10.9]
    assert terminated and not truncated and info["won"] and info["score"] == 1.0
    assert obs == "######\n######\n#√_###\n#P_#_#\n#____#\n######"


def test_expert_wins_every_test_level_within_the_limit() -> None:
    env = SokobanEnv(split="test")
    wins = 0
    for task in SokobanEnv.task_ids("test"):
        env.reset(options={"task_id": task})
        terminated = truncated = False
        steps = 0
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(env.expert_action())
            steps += 1
        wins += info["won"]
        assert steps == load_level(task).optimal_steps
    assert wins == 500


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "x" * 10_000,
        "\x00\xff\x80garbage",
        "go to countertop 1",
        "craft 4 oak planks using 1 oak log",
        "<action></action>",
        "upp",
        "search[red shoes]",
    ],
)
def test_bad_input_leaves_the_state_unchanged(junk: str) -> None:
    env = SokobanEnv(split="test")
    obs, info = env.reset(options={"task_id": "test-0007"})
    after, reward, terminated, truncated, step_info = env.step(junk)
    assert after == obs and reward == 0.0 and not terminated and not truncated
    assert step_info["action_valid"] is False
    assert step_info["state_hash"] == info["state_hash"]


def test_binary_action_does_not_raise() -> None:
    env = SokobanEnv(split="test")
    env.reset(options={"task_id": "test-0001"})
    _, _, _, _, info = env.step(b"\xff\x00up")  # type: ignore[arg-type]
    assert info["action_valid"] is False


def test_aliases_and_tags_map_to_one_canonical_action() -> None:
    env = SokobanEnv(split="test")
    for raw in ("up", "UP", "<action> Move Up </action>", "north", "1"):
        env.reset(options={"task_id": "test-0002"})
        _, _, _, _, info = env.step(raw)
        assert info["action_canonical"] == "up" and info["action_valid"]


def test_step_limit_truncates_and_step_after_end_raises() -> None:
    env = SokobanEnv(split="test", max_steps=3)
    env.reset(options={"task_id": "test-0000"})
    results = [env.step("nonsense") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]  # truncated on the 3rd step
    with pytest.raises(EpisodeEndedError, match="call reset"):
        env.step("up")


def test_visual_observation_is_tiles_of_the_grid() -> None:
    env = VisualSokobanEnv(split="test")
    obs, info = env.reset(options={"task_id": "test-0000"})
    grid = obs["text"]
    image = obs["image"]
    assert image.shape == (6 * TILE, 6 * TILE, 3) and image.dtype == np.uint8
    rows = grid.split("\n")
    tiles = tile_stack()
    symbol_index = {"#": 0, "_": 1, "O": 2, "X": 3, "√": 4, "P": 5, "S": 6}
    for y, row in enumerate(rows):
        for x, symbol in enumerate(row):
            patch = image[y * TILE : (y + 1) * TILE, x * TILE : (x + 1) * TILE]
            assert np.array_equal(patch, tiles[symbol_index[symbol]])
    assert info["obs_hash"] != info["state_hash"]  # image bytes vs grid text
    assert np.array_equal(render_image(grid), image)
    assert env.render() is None


def test_reset_without_task_id_draws_from_the_seed() -> None:
    env = SokobanEnv(split="val")
    first = env.reset(seed=5)[1]["task_id"]
    assert env.reset(seed=5)[1]["task_id"] == first
    assert first.startswith("val-")
