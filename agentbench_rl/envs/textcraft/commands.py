"""TextCraft's three commands, parsed from text and written back in one canonical form.

``get N item``, ``craft N target using N a, N b`` and ``inventory``, as in the original. The
canonical form makes the same move written two ways one string: counts as plain integers (``04``
is ``4``), names as the recipe lines print them (``minecraft:oak_planks``, ``Oak_Planks`` and
``oak plank`` are all ``oak planks``), ingredients sorted by name, and a craft's output count
that of the recipe its ingredients meet (the original ignores the output count the agent writes,
so ``craft 1 oak planks using 1 oak logs`` is ``craft 4 oak planks using 1 oak logs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agentbench_rl.envs.textcraft.recipes import PREFIX, RecipeBook, display_name, full_name

#: Counts above this are refused (the original takes any; a 5,000-digit count would not parse).
MAX_COUNT = 1_000_000

_COUNT_AND_NAME = re.compile(r"([0-9]+) (.*)", re.DOTALL)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Inventory:
    """``inventory``: show what the agent holds.

    Example:
        >>> from agentbench_rl.envs.textcraft.recipes import load_recipe_book
        >>> Inventory().canonical(load_recipe_book())
        'inventory'
    """

    def canonical(self, book: RecipeBook) -> str:
        """Always ``inventory`` (see the class example)."""
        return "inventory"


@dataclass(frozen=True)
class Get:
    """``get N item``: fetch ``count`` of a base item (``name`` is a full name).

    Example:
        >>> from agentbench_rl.envs.textcraft.recipes import load_recipe_book
        >>> Get(1, "minecraft:oak_logs").canonical(load_recipe_book())
        'get 1 oak logs'
    """

    count: int
    name: str

    def canonical(self, book: RecipeBook) -> str:
        """``get <count> <display name>`` (see the class example)."""
        return f"get {self.count} {display_name(self.name)}"


@dataclass(frozen=True)
class Craft:
    """``craft N target using N a, N b``.

    Attributes:
        output: the full name of the target.
        count: the output count the agent wrote (``None`` if it wrote none).
        ingredients: ``(full name, count)`` pairs, sorted by display name then count.
        malformed: ingredient texts that are not ``<count> <name>``, in the order written (the
            original reports the first).

    Example:
        >>> from agentbench_rl.envs.textcraft.recipes import load_recipe_book
        >>> craft = Craft("minecraft:oak_planks", 1, (("minecraft:oak_logs", 1),))
        >>> craft.output_count(load_recipe_book()), craft.canonical(load_recipe_book())
        (4, 'craft 4 oak planks using 1 oak logs')
    """

    output: str
    count: int | None
    ingredients: tuple[tuple[str, int], ...]
    malformed: tuple[str, ...] = ()

    def output_count(self, book: RecipeBook) -> int:
        """The count of the recipe the ingredients meet, else the written count (default 1);
        see the class example."""
        recipe = None if self.malformed else book.find_recipe(self.output, self.ingredients)
        if recipe is not None:
            return recipe.count
        return 1 if self.count is None else self.count

    def canonical(self, book: RecipeBook) -> str:
        """``craft <output count> <target> using <ingredients>`` (see the class example)."""
        parts = [f"{count} {display_name(name)}" for name, count in self.ingredients]
        parts.extend(self.malformed)
        output = display_name(self.output)
        return f"craft {self.output_count(book)} {output} using {', '.join(parts)}"


@dataclass(frozen=True)
class Unknown:
    """Anything that is not a command; ``text`` is the normalised input.

    Example:
        >>> from agentbench_rl.envs.textcraft.recipes import load_recipe_book
        >>> Unknown("go to desk 1").canonical(load_recipe_book())
        'go to desk 1'
    """

    text: str

    def canonical(self, book: RecipeBook) -> str:
        """The normalised text itself (see the class example)."""
        return self.text


Command = Inventory | Get | Craft | Unknown


def parse_command(text: str, book: RecipeBook) -> Command:
    """Parse normalised text (lower case, single spaces) into a command.

    The original matches with ``re.match``: anything that starts with ``inventory`` shows the
    inventory, and ``craft`` splits at the last `` using ``.

    Example:
        >>> from agentbench_rl.envs.textcraft.recipes import load_recipe_book
        >>> parse_command("get 02 oak_log", load_recipe_book())
        Get(count=2, name='minecraft:oak_log')
        >>> parse_command("go to desk 1", load_recipe_book())
        Unknown(text='go to desk 1')
    """
    if text.startswith("inventory"):
        return Inventory()
    if text.startswith("get "):
        counted = _count_and_name(text[len("get ") :])
        if counted is not None:
            return Get(counted[0], resolve_name(counted[1], book))
    if text.startswith("craft ") and " using " in text[len("craft ") :]:
        target, _, ingredients_text = text[len("craft ") :].rpartition(" using ")
        return _parse_craft(target, ingredients_text, book, text)
    return Unknown(text)


def _parse_craft(target: str, ingredients_text: str, book: RecipeBook, text: str) -> Command:
    counted_target = _count_and_name(target)
    if counted_target is None and _COUNT_AND_NAME.fullmatch(target):
        return Unknown(text)  # a count too large to take
    count, output = counted_target if counted_target is not None else (None, target)
    ingredients: list[tuple[str, int]] = []
    malformed: list[str] = []
    for piece in ingredients_text.split(","):
        counted = _count_and_name(piece.strip())
        if counted is None:
            malformed.append(piece.strip())
        else:
            ingredients.append((resolve_name(counted[1], book), counted[0]))
    return Craft(
        resolve_name(output, book), count, sorted_ingredients(ingredients), tuple(malformed)
    )


def sorted_ingredients(pairs: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """``(full name, count)`` pairs in canonical order: by display name, then count.

    Example:
        >>> sorted_ingredients([("minecraft:stick", 2), ("minecraft:iron_ingot", 3)])
        (('minecraft:iron_ingot', 3), ('minecraft:stick', 2))
    """
    return tuple(sorted(pairs, key=lambda pair: (display_name(pair[0]), pair[1])))


def _count_and_name(text: str) -> tuple[int, str] | None:
    """``"04 oak logs"`` -> ``(4, "oak logs")``; ``None`` without a count or above MAX_COUNT."""
    match = _COUNT_AND_NAME.fullmatch(text)
    if match is None:
        return None
    digits = match.group(1).lstrip("0") or "0"
    if len(digits) > len(str(MAX_COUNT)) or int(digits) > MAX_COUNT:
        return None
    return int(digits), match.group(2)


def resolve_name(text: str, book: RecipeBook) -> str:
    """The full name an agent means by ``text``.

    Drops a ``minecraft:`` prefix and a final full stop, reads underscores as spaces, then takes
    the first of: the name as written, if a recipe shows it or it is a known item; its last word
    in the other number (``oak plank`` -> ``oak planks``, ``sticks`` -> ``stick``); else the
    name as written (a group tag no recipe line shows, such as ``banner``, or an unknown name).
    Exact names win, so ``oak log`` and ``oak logs``, two different items in the original, stay
    apart.

    Example:
        >>> from agentbench_rl.envs.textcraft.recipes import load_recipe_book
        >>> book = load_recipe_book()
        >>> resolve_name("minecraft:Oak_Plank", book), resolve_name("sticks", book)
        ('minecraft:oak_planks', 'minecraft:stick')
    """
    words = _SPACES.sub(" ", text.lower().replace(PREFIX, "").replace("_", " ")).strip()
    words = words.removesuffix(".").strip()
    written = full_name(words)
    if written in book.vocabulary:
        return written
    for variant in _number_variants(words):
        if full_name(variant) in book.vocabulary:
            return full_name(variant)
    return written


def _number_variants(words: str) -> list[str]:
    """The phrase with its last word in singular and plural spellings."""
    head, _, last = words.rpartition(" ")
    prefix = f"{head} " if head else ""
    variants = []
    if last.endswith("ies"):
        variants.append(last[:-3] + "y")
    if last.endswith("es"):
        variants.append(last[:-2])
    if last.endswith("s"):
        variants.append(last[:-1])
    else:
        variants.append(last + "s")
        variants.append(last + "es")
        if last.endswith("y"):
            variants.append(last[:-1] + "ies")
    return [prefix + variant for variant in variants if variant]
