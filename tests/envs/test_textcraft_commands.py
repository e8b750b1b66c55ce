"""TextCraft's canonical actions: the same move written two ways is one string."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_rl.envs.textcraft.commands import (
    MAX_COUNT,
    Craft,
    Get,
    Inventory,
    Unknown,
    parse_command,
    resolve_name,
)
from agentbench_rl.envs.textcraft.env import TextCraftEnv
from agentbench_rl.envs.textcraft.recipes import load_recipe_book


@pytest.fixture(scope="module")
def env() -> TextCraftEnv:
    return TextCraftEnv()


@pytest.mark.parametrize(
    ("spellings", "canonical"),
    [
        (
            [
                "get 1 oak logs",
                "Get 01 Oak_Logs",
                "<action>get 1 minecraft:oak_logs</action>",
                "get 1 oak logs.",
                "  get   1\toak  logs ",
            ],
            "get 1 oak logs",
        ),
        # the plural of the last word, both ways
        (["get 2 oak log", "get 2 oak_log", "GET 2 minecraft:Oak_Log"], "get 2 oak log"),
        (["get 4 strings", "get 4 string"], "get 4 string"),
        # output count taken from the recipe the ingredients meet (the original ignores it)
        (
            [
                "craft 4 oak planks using 1 oak logs",
                "craft 1 oak planks using 1 oak logs",
                "craft oak planks using 1 oak logs",
                "craft 4 oak plank using 01 oak logs",
                "craft 4 minecraft:oak_planks using 1 minecraft:oak_logs",
            ],
            "craft 4 oak planks using 1 oak logs",
        ),
        (
            [
                "craft 1 crafting table using 4 oak planks",
                "Craft crafting_table using 4 oak_plank",
                "<think>planks</think><action>craft 1 crafting table using 04 oak planks</action>",
            ],
            "craft 1 crafting table using 4 oak planks",
        ),
        # ingredients sorted by name; "sticks" is the item stick, not the group tag sticks
        (
            [
                "craft 1 painting using 8 stick, 1 black wool",
                "craft 1 painting using 1 black wool, 8 sticks",
                "craft painting using 1 black_wool,8 stick",
            ],
            "craft 1 painting using 1 black wool, 8 stick",
        ),
        (["inventory", "Inventory", "inventory:", "INVENTORY please"], "inventory"),
    ],
)
def test_spellings_share_one_canonical_form(
    env: TextCraftEnv, spellings: list[str], canonical: str
) -> None:
    assert {env.canonicalize(spelling) for spelling in spellings} == {canonical}


def test_distinct_moves_keep_distinct_forms(env: TextCraftEnv) -> None:
    # oak log (for oak wood) and oak logs (for oak planks) are two items in the original.
    assert env.canonicalize("get 1 oak log") != env.canonicalize("get 1 oak logs")
    # two half-size ingredients are not one full one (the original refuses them too)
    assert env.canonicalize("craft 1 crafting table using 2 oak planks, 2 oak planks") == (
        "craft 1 crafting table using 2 oak planks, 2 oak planks"
    )
    # a craft that meets no recipe keeps the count written, or 1
    assert env.canonicalize("craft 3 oak planks using 1 oak log") == (
        "craft 3 oak planks using 1 oak log"
    )
    assert env.canonicalize("craft oak planks using 2 oak logs") == (
        "craft 1 oak planks using 2 oak logs"
    )


def test_other_text_is_only_normalised(env: TextCraftEnv) -> None:
    assert env.canonicalize("Go  To Desk 1") == "go to desk 1"
    assert env.canonicalize("") == ""
    assert env.canonicalize("craft 4 stick using oak planks") == "craft 4 stick using oak planks"
    assert env.canonicalize(b"get 1 oak logs") == "get 1 oak logs"


def test_parse_command_kinds() -> None:
    book = load_recipe_book()
    assert parse_command("inventory", book) == Inventory()
    assert parse_command("get 3 coal", book) == Get(3, "minecraft:coal")
    assert parse_command("get coal", book) == Unknown("get coal")
    assert parse_command("get 1", book) == Unknown("get 1")
    assert parse_command(f"get {MAX_COUNT} coal", book) == Get(MAX_COUNT, "minecraft:coal")
    assert parse_command(f"get {MAX_COUNT + 1} coal", book) == Unknown(f"get {MAX_COUNT + 1} coal")
    assert parse_command("get " + "9" * 5000 + " coal", book) == Unknown(
        "get " + "9" * 5000 + " coal"
    )
    # the original splits a craft at the last " using "
    assert parse_command("craft 4 torch using 1 coal, stick", book) == Craft(
        "minecraft:torch", 4, (("minecraft:coal", 1),), ("stick",)
    )
    assert parse_command("craft using 1 coal", book) == Unknown("craft using 1 coal")


def test_resolve_name() -> None:
    book = load_recipe_book()
    assert resolve_name("Minecraft:Oak_Planks", book) == "minecraft:oak_planks"
    assert resolve_name("oak plank", book) == "minecraft:oak_planks"
    assert resolve_name("glass panes", book) == "minecraft:glass_pane"
    assert resolve_name("planks", book) == "minecraft:planks"  # the tag, as recipes show it
    assert resolve_name("banner", book) == "minecraft:banner"  # a tag no recipe line shows
    assert resolve_name("unobtainium", book) == "minecraft:unobtainium"


_WORDS = st.sampled_from(
    [
        "get",
        "craft",
        "using",
        "inventory",
        "1",
        "04",
        "oak",
        "planks",
        "plank",
        "logs",
        ",",
        "stick",
        "sticks",
        "minecraft:oak_logs",
        "crafting_table",
        "<action>",
        "</action>",
        " ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_WORDS, max_size=12).map(" ".join), st.text(max_size=60)))
def test_canonical_form_is_a_fixed_point(text: str) -> None:
    env = TextCraftEnv()
    canonical = env.canonicalize(text)
    assert env.canonicalize(canonical) == canonical
