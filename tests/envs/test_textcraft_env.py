"""``agentbench/TextCraft-v0``: the contract, the original's feedback, bad input, the expert."""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentbench_rl  # noqa: F401  (registers the envs with Gymnasium)
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import TEXT_CHARSET, EpisodeEndedError
from agentbench_rl.envs.textcraft.env import MAX_ECHO, TextCraftEnv
from agentbench_rl.envs.textcraft.tasks import load_manifest


@pytest.fixture
def env() -> TextCraftEnv:
    return TextCraftEnv(split="train")  # crafting_table and the other tasks below are train tasks


def run(env: TextCraftEnv, actions: list[str]) -> list[tuple[str, float, bool, dict[str, Any]]]:
    results = []
    for action in actions:
        obs, reward, terminated, _, info = env.step(action)
        results.append((obs, reward, terminated, info))
    return results


def test_check_env_passes() -> None:
    check_env(gym.make("agentbench/TextCraft-v0", split="test").unwrapped)
    check_env(gym.make("agentbench/TextCraft-v0", split="adapt", max_steps=5).unwrapped)


def test_reset_prompt_and_info(env: TextCraftEnv) -> None:
    obs, info = env.reset(options={"task_id": "crafting_table"})
    lines = obs.split("\n")
    assert lines[0] == "Crafting commands:"
    assert lines[-2:] == ["", "Goal: craft crafting table."]
    recipes = lines[1:-2]
    # the whole tree (crafting_table.json and the eight *_planks.json) plus 10 distractors
    tree = {
        "craft 1 crafting table using 4 planks",
        "craft 4 oak planks using 1 oak logs",
        "craft 4 crimson planks using 1 crimson stems",
        "craft 4 birch planks using 1 birch logs",
        "craft 4 spruce planks using 1 spruce logs",
        "craft 4 jungle planks using 1 jungle logs",
        "craft 4 acacia planks using 1 acacia logs",
        "craft 4 warped planks using 1 warped stems",
        "craft 4 dark oak planks using 1 dark oak logs",
    }
    assert tree <= set(recipes)
    assert len(recipes) == len(set(recipes)) == len(tree) + 10
    assert info["task_id"] == "crafting_table"
    assert info["category"] == "depth-2"
    assert info["won"] is False and info["score"] == 0.0 and info["step"] == 0
    assert info["obs_hash"] == stable_hash(obs)
    assert info["admissible_actions"] == sorted(
        ["inventory"]
        + [
            f"get 1 {kind} logs"
            for kind in ("acacia", "birch", "dark oak", "jungle", "oak", "spruce")
        ]
        + ["get 1 crimson stems", "get 1 warped stems"]
    )


def test_crafting_table_episode_with_the_original_feedback(env: TextCraftEnv) -> None:
    env.reset(options={"task_id": "crafting_table"})
    steps = run(
        env,
        [
            "inventory",
            "get 1 oak logs",
            "craft 4 oak planks using 1 oak logs",
            "inventory",
            "craft 1 crafting table using 4 oak planks",
        ],
    )
    assert [(obs, reward, done) for obs, reward, done, _ in steps] == [
        ("Inventory: You are not carrying anything.", 0.0, False),
        ("Got 1 oak logs", 0.0, False),
        ("Crafted 4 minecraft:oak_planks", 0.0, False),
        ("Inventory: [oak planks] (4) ", 0.0, False),
        ("Crafted 1 minecraft:crafting_table", 1.0, True),
    ]
    info = steps[-1][3]
    assert info["won"] is True and info["score"] == 1.0 and info["step"] == 5
    assert info["action_valid"] is True
    assert info["feedback"] == "Crafted 1 minecraft:crafting_table"
    with pytest.raises(EpisodeEndedError, match="after the episode ended"):
        env.step("inventory")


def test_failures_use_the_original_texts(env: TextCraftEnv) -> None:
    env.reset(options={"task_id": "painting"})
    cases = [
        ("get 1 stick", "Could not find stick"),
        ("get 1 planks", "Could not find planks"),
        ("get 1 unobtainium", "Could not find unobtainium"),
        ("craft 4 stick using oak planks", "Wrong item format: oak planks"),
        (
            "craft 4 stick using 2 oak planks",
            "Could not find enough items to craft minecraft:stick",
        ),
        ("craft 4 planks using 1 oak logs", "Could not find enough items to craft None"),
        ("look around", "Could not execute look around"),
    ]
    for action, feedback in cases:
        obs, reward, _, _, info = env.step(action)
        assert (obs, reward, info["action_valid"]) == (feedback, 0.0, False), action
    run(env, ["get 1 oak logs", "get 1 coal", "get 4 string", "craft 1 white wool using 4 string"])
    obs, _, _, _, info = env.step("craft 3 oak planks using 1 coal")
    assert obs == (
        "Could not find a valid recipe for ItemTagWithCount(item_tag=ItemTag("
        "tag=None, item_id='minecraft:oak_planks'), count=3)"
    )
    obs, _, _, _, _ = env.step("craft 4 planks using 1 oak logs")
    assert obs == (
        "Could not find a valid recipe for ItemTagWithCount(item_tag=ItemTag("
        "tag='minecraft:planks', item_id=None), count=4)"
    )
    # a tag ingredient takes one of its members, and white wool is none of wool's
    run(
        env,
        [
            "craft 4 oak planks using 1 oak logs",
            "craft 4 stick using 2 oak planks",
            "craft 4 stick using 2 oak planks",
        ],
    )
    obs, _, _, _, _ = env.step("craft 1 painting using 8 stick, 1 white wool")
    assert obs.startswith("Could not find a valid recipe for ItemTagWithCount(item_tag=ItemTag(")
    steps = run(
        env,
        [
            "get 1 ink sac",
            "craft 1 black dye using 1 ink sac",
            "craft 1 black wool using 1 black dye, 1 white wool",
            "craft 1 painting using 8 stick, 1 black wool",
        ],
    )
    assert [obs for obs, *_ in steps] == [
        "Got 1 ink sac",
        "Crafted 1 minecraft:black_dye",
        "Crafted 1 minecraft:black_wool",
        "Crafted 1 minecraft:painting",
    ]
    assert steps[-1][1:3] == (1.0, True)


def test_gets_add_up_and_zero_changes_nothing(env: TextCraftEnv) -> None:
    _, info = env.reset(options={"task_id": "crafting_table"})
    empty = info["state_hash"]
    obs, _, _, _, info = env.step("get 0 oak logs")
    assert (obs, info["action_valid"], info["state_hash"]) == ("Got 0 oak logs", True, empty)
    run(env, ["get 2 Oak_Logs.", "get 1 oak log", "get 3 oak logs"])
    assert env.step("inventory")[0] == "Inventory: [oak log] (1) [oak logs] (5) "


def test_state_hash_is_goal_and_inventory(env: TextCraftEnv) -> None:
    env.reset(options={"task_id": "crafting_table"})
    first = run(env, ["get 1 coal", "get 2 oak logs", "inventory"])[-1][3]["state_hash"]
    env.reset(options={"task_id": "crafting_table"})
    second = run(env, ["get 1 oak logs", "look", "get 1 coal", "get 1 oak logs"])[-1][3]
    assert second["state_hash"] == first
    env.reset(options={"task_id": "torch"})
    other_goal = run(env, ["get 1 coal", "get 2 oak logs"])[-1][3]["state_hash"]
    assert other_goal != first


BAD_INPUTS: list[Any] = [
    "",
    "x" * 10_000,
    b"\x00\xff\xfe\x80 get 1 oak logs \xc3",
    "".join(chr(code) for code in range(0, 0x2FFF, 13)),
    "\x00\x01\x02 craft \u2603 using 1 \ud800",
    "go to desk 1",
    "take apple 1 from countertop 2",
    "<action>put mug 1 in/on coffeemachine 1</action>",
    "get -1 oak logs",
    "get 99999999999999999999 oak logs",
    "craft 1 crafting table using 99999999999 oak planks",
    "craft " + "9" * 5000 + " oak planks using 1 oak logs",
]


@pytest.mark.parametrize("raw", BAD_INPUTS, ids=range(len(BAD_INPUTS)))
def test_bad_input_is_answered_and_changes_nothing(env: TextCraftEnv, raw: Any) -> None:
    _, info = env.reset(options={"task_id": "crafting_table"})
    run(env, ["get 1 oak logs"])
    before = env.inventory.copy(), env._state_hash()
    obs, reward, terminated, truncated, info = env.step(raw)
    assert (env.inventory, info["state_hash"]) == before
    assert (reward, terminated, truncated, info["action_valid"]) == (0.0, False, False, False)
    assert env.observation_space.contains(obs)
    assert set(obs) <= TEXT_CHARSET
    assert len(obs) <= len("Could not find a valid recipe for ") + MAX_ECHO + 3


def test_step_limit_truncates_and_then_step_raises() -> None:
    env = TextCraftEnv(split="train", max_steps=3)
    env.reset(options={"task_id": "crafting_table"})
    assert [step[2] for step in run(env, ["inventory", "inventory"])] == [False, False]
    _, _, terminated, truncated, _ = env.step("inventory")
    assert (terminated, truncated) == (False, True)
    with pytest.raises(EpisodeEndedError):
        env.step("get 1 oak logs")
    assert TextCraftEnv().max_steps == 40


def test_unknown_task_and_split_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown split"):
        TextCraftEnv(split="valid_seen")
    with pytest.raises(ValueError, match="'netherite_block' is not a task id of split 'test'"):
        TextCraftEnv().reset(options={"task_id": "netherite_block"})


def test_reset_without_a_task_draws_from_the_split_by_seed() -> None:
    env = TextCraftEnv(split="adapt")
    first = env.reset(seed=7)[1]["task_id"]
    assert first in env.task_ids("adapt")
    assert env.reset(seed=7)[1]["task_id"] == first


def test_prompts_use_only_the_text_space_charset() -> None:
    for split in TextCraftEnv.splits():
        env = TextCraftEnv(split=split)
        for task_id in env.task_ids(split):
            obs, _ = env.reset(options={"task_id": task_id})
            assert set(obs) <= set(string.ascii_letters + string.digits + " ,.:\n"), task_id


def test_prompts_do_not_depend_on_the_hash_seed() -> None:
    task_ids = ["crafting_table", "adapt-000", "painting", "cyan_banner"]
    script = (
        "import sys\nfrom agentbench_rl.envs.textcraft.env import TextCraftEnv\n"
        "for task_id in sys.argv[1:]:\n"
        "    env = TextCraftEnv(split='adapt' if task_id.startswith('adapt') else 'train')\n"
        "    sys.stdout.write(env.reset(options={'task_id': task_id})[0] + '\\0')\n"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        environ = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script, *task_ids],
            capture_output=True,
            text=True,
            env=environ,
            check=True,
        )
        outputs.append(done.stdout)
    here = "".join(
        TextCraftEnv(split="adapt" if task_id.startswith("adapt") else "train").reset(
            options={"task_id": task_id}
        )[0]
        + "\0"
        for task_id in task_ids
    )
    assert outputs[0] == outputs[1] == here


def play_expert(env: TextCraftEnv, task_id: str) -> dict[str, Any]:
    _, info = env.reset(options={"task_id": task_id})
    while True:
        action = env.expert_action()
        assert action in info["admissible_actions"], (task_id, action)
        _, _, terminated, truncated, info = env.step(action)
        assert info["action_valid"], (task_id, action)
        if terminated or truncated:
            return info


@pytest.mark.parametrize("split", ["test", "adapt", "train"])
def test_expert_wins_every_task(split: str) -> None:
    env = TextCraftEnv(split=split)
    results = [play_expert(env, task_id) for task_id in env.task_ids(split)]
    assert all(info["won"] for info in results)
    assert max(info["step"] for info in results) <= env.max_steps


def test_expert_recovers_from_any_state() -> None:
    rng = random.Random(0)
    env = TextCraftEnv(max_steps=200)
    for task_id in rng.sample(env.task_ids("test"), 40):
        _, info = env.reset(options={"task_id": task_id})
        for _ in range(rng.randrange(1, 12)):
            _, _, terminated, _, info = env.step(rng.choice(info["admissible_actions"]))
            if terminated:
                break
        else:
            while not env.episode_over:
                action = env.expert_action()
                assert action in info["admissible_actions"]
                _, _, _, _, info = env.step(action)
                assert info["action_valid"]
            assert info["won"], task_id


def test_admissible_actions_are_canonical_valid_and_complete() -> None:
    rng = random.Random(1)
    env, trial = TextCraftEnv(), TextCraftEnv()
    for task_id in rng.sample(env.task_ids("test"), 25):
        _, info = env.reset(options={"task_id": task_id})
        for _ in range(8):
            if env.episode_over:
                break
            for action in info["admissible_actions"]:
                assert env.canonicalize(action) == action
                trial.reset(options={"task_id": task_id})
                trial.inventory = dict(env.inventory)
                assert trial.step(action)[4]["action_valid"], (task_id, action)
            _, _, _, _, info = env.step(rng.choice(info["admissible_actions"]))
    # every craft the inventory allows is listed, whatever recipe (here: no tree recipe)
    env = TextCraftEnv(split="train")
    env.reset(options={"task_id": "crafting_table"})
    info = run(env, ["get 1 oak logs", "craft 4 oak planks using 1 oak logs"])[-1][3]
    assert {
        "craft 1 crafting table using 4 oak planks",
        "craft 4 stick using 2 oak planks",
        "craft 1 oak button using 1 oak planks",
    } <= set(info["admissible_actions"])


def test_random_agent_wins_some_tasks_but_not_all() -> None:
    rng = random.Random(0)
    env = TextCraftEnv()
    wins = 0
    for task_id in env.task_ids("test"):
        _, info = env.reset(options={"task_id": task_id})
        while not env.episode_over:
            _, _, _, _, info = env.step(rng.choice(info["admissible_actions"]))
        wins += info["won"]
    assert 0 < wins < len(env.task_ids("test"))


def test_registered_and_reachable_by_name() -> None:
    assert env_class("textcraft") is TextCraftEnv
    assert env_class("agentbench/TextCraft-v0") is TextCraftEnv
    manifest = load_manifest()
    for split in TextCraftEnv.splits():
        assert TextCraftEnv.split_checksum(split) == manifest["checksums"][split]
