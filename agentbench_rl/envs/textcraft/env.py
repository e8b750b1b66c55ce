"""``agentbench/TextCraft-v0``: craft a Minecraft item from base items, given its recipes."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import ClassVar

from agentbench_rl.core.actions import canonicalize_action
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.core.memo import Memo
from agentbench_rl.envs.base import TEXT_CHARSET, TextAgentEnv, Transition, text_space
from agentbench_rl.envs.textcraft.commands import (
    Craft,
    Get,
    Inventory,
    parse_command,
    sorted_ingredients,
)
from agentbench_rl.envs.textcraft.planner import Planner
from agentbench_rl.envs.textcraft.recipes import PREFIX, Recipe, RecipeBook, display_name
from agentbench_rl.envs.textcraft.tasks import (
    DEFAULT_MAX_STEPS,
    SPLITS,
    build_prompt,
    checked_recipe_book,
    load_manifest,
    task_index,
)

#: Feedback quotes at most this much of what the agent wrote (the original quotes all of it).
MAX_ECHO = 200


class TextCraftEnv(TextAgentEnv[str]):
    """TextCraft (ADaPT, Prasad et al. 2023) on the agentbench contract.

    The reset observation lists the recipes of the goal's crafting tree plus up to 10
    distractors and ends with ``Goal: craft <item>.``; after each step the observation is the
    original's feedback (``Got 1 oak logs``, ``Crafted 4 minecraft:oak_planks``, ``Could not
    find ...``). Crafting the goal gives reward 1 and ends the episode; the step limit is 40.

    Example:
        >>> env = TextCraftEnv(split="train")
        >>> obs, info = env.reset(options={"task_id": "crafting_table"})
        >>> obs.splitlines()[-1], info["category"]
        ('Goal: craft crafting table.', 'depth-2')
        >>> env.step("get 1 oak logs")[0]
        'Got 1 oak logs'
        >>> obs, reward, *_ = env.step("craft 4 oak planks using 1 oak logs")
        >>> obs, reward
        ('Crafted 4 minecraft:oak_planks', 0.0)
        >>> obs, reward, terminated, _, info = env.step(
        ...     "<action>Craft crafting_table using 4 oak plank</action>")
        >>> obs, reward, terminated
        ('Crafted 1 minecraft:crafting_table', 1.0, True)
        >>> info["action_canonical"]
        'craft 1 crafting table using 4 oak planks'
    """

    env_name: ClassVar[str] = "textcraft"
    prompt_instruction: ClassVar[str] = (
        "You craft Minecraft items. Use the recipes to craft the goal item."
    )
    default_max_steps: ClassVar[int] = DEFAULT_MAX_STEPS

    def __init__(
        self, split: str = "test", max_steps: int | None = None, render_mode: str | None = None
    ) -> None:
        super().__init__(split=split, max_steps=max_steps, render_mode=render_mode)
        self.observation_space = text_space()
        self.book = checked_recipe_book()
        self.planner = Planner(self.book)
        self.goal = ""
        self.depth = 0
        self.inventory: dict[str, int] = {}
        self._base_gets: list[str] = []
        self._text = ""

    # -------------------------------------------------------------- splits
    @classmethod
    def splits(cls) -> Sequence[str]:
        """``train`` (343 goals), ``test`` (200 goals by depth), ``adapt`` (ADaPT's 200).

        Example:
            >>> TextCraftEnv.splits()
            ('train', 'test', 'adapt')
        """
        return SPLITS

    @classmethod
    def task_ids(cls, split: str) -> list[str]:
        """The ids of a split, in manifest order (item names, or ``adapt-000`` ..).

        Example:
            >>> TextCraftEnv.task_ids("adapt")[:2], len(TextCraftEnv.task_ids("test"))
            (['adapt-000', 'adapt-001'], 200)
        """
        if split not in SPLITS:
            raise ValueError(
                f"textcraft: unknown split '{split}' (choose from {', '.join(SPLITS)})"
            )
        return [row["task_id"] for row in load_manifest()["splits"][split]]

    @classmethod
    def split_checksum(cls, split: str) -> str:
        """The split's checksum from the shipped manifest.

        Example:
            >>> len(TextCraftEnv.split_checksum("test"))
            32
        """
        if split not in SPLITS:
            raise ValueError(
                f"textcraft: unknown split '{split}' (choose from {', '.join(SPLITS)})"
            )
        checksum: str = load_manifest()["checksums"][split]
        return checksum

    @classmethod
    def task_categories(cls, split: str) -> Mapping[str, str]:
        """``depth-N`` of every task of a split, from the manifest.

        Example:
            >>> TextCraftEnv.task_categories("adapt")["adapt-000"]
            'depth-4'
        """
        cls.task_ids(split)  # names an unknown split
        return {row["task_id"]: f"depth-{row['depth']}" for row in load_manifest()["splits"][split]}

    @classmethod
    def expected_return(cls, success: bool, score: float, steps: int) -> float:
        """1 for crafting the goal (which ends the episode), 0 for every other step."""
        return 1.0 if success else 0.0

    def _sample_task_id(self) -> str:
        ids = self.task_ids(self.split)
        return ids[int(self.np_random.integers(len(ids)))]

    # -------------------------------------------------------------- dynamics
    def _load_task(self, task_id: str) -> None:
        row = task_index().get(task_id)
        if row is None:
            raise ValueError(
                f"textcraft: unknown task id '{task_id}' (train and test ids are item names "
                "such as 'crafting_table'; adapt ids are 'adapt-000' .. 'adapt-199')"
            )
        goal = PREFIX + row["item"]
        prompt = _prompt(goal)
        if stable_hash(prompt) != row["prompt_hash"]:
            raise RuntimeError(
                f"textcraft: the prompt of task '{task_id}' differs from the one the manifest "
                "pins (recipe data or Python's random module changed)"
            )
        self.goal, self.depth = goal, int(row["depth"])
        self.inventory = {}
        self._base_gets = [
            Get(count, item).canonical(self.book)
            for item, counts in self.book.base_items(goal).items()
            for count in counts
        ]
        self._text = prompt

    def canonicalize(self, raw: str | bytes) -> str:
        """The canonical command (see :mod:`agentbench_rl.envs.textcraft.commands`).

        Example:
            >>> env = TextCraftEnv()
            >>> env.canonicalize("Craft 1 minecraft:Crafting_Table using 04 oak_plank")
            'craft 1 crafting table using 4 oak planks'
        """
        return parse_command(canonicalize_action(raw), self.book).canonical(self.book)

    def _apply(self, action: str) -> Transition:
        command = parse_command(action, self.book)
        if isinstance(command, Inventory):
            return self._answer(True, self.inventory_text())
        if isinstance(command, Get):
            return self._get(command)
        if isinstance(command, Craft):
            return self._craft(command)
        return self._answer(False, f"Could not execute {_echo(command.text)}")

    def _get(self, command: Get) -> Transition:
        shown = _echo(display_name(command.name))
        if not self.book.is_gettable(command.name):
            return self._answer(False, f"Could not find {shown}")
        if command.count:  # the original keeps a 0 entry for "get 0"; the state stays the same
            self.inventory[command.name] = self.inventory.get(command.name, 0) + command.count
        return self._answer(True, f"Got {command.count} {shown}")

    def _craft(self, command: Craft) -> Transition:
        if command.malformed:
            return self._answer(False, f"Wrong item format: {_echo(command.malformed[0])}")
        output_is_tag = self.book.is_tag(command.output)
        # As the original's ``has_items``: each entry alone must be held, in at least its count
        # (so "0 stick" fails when no stick is held, and "2 a, 2 a" passes with 2 a held, then
        # meets no recipe: no shipped recipe lets one item fill two inputs).
        if any(
            self.book.is_tag(name) or name not in self.inventory or self.inventory[name] < count
            for name, count in command.ingredients
        ):
            # The original names the output's item id, which a tag does not have.
            target = "None" if output_is_tag else _echo(command.output)
            return self._answer(False, f"Could not find enough items to craft {target}")
        recipe = self.book.find_recipe(command.output, command.ingredients)
        if recipe is None:
            # The original prints the repr of its output object; agents trained on it saw that.
            tag, item = (command.output, None) if output_is_tag else (None, command.output)
            described = (
                f"ItemTagWithCount(item_tag=ItemTag(tag={tag!r}, item_id={item!r}), "
                f"count={command.output_count(self.book)})"
            )
            return self._answer(False, f"Could not find a valid recipe for {_echo(described)}")
        for name, count in command.ingredients:
            self.inventory[name] -= count
            if self.inventory[name] == 0:
                del self.inventory[name]
        self.inventory[recipe.output] = self.inventory.get(recipe.output, 0) + recipe.count
        self._text = f"Crafted {recipe.count} {recipe.output}"
        return Transition(
            reward=1.0 if recipe.output == self.goal else 0.0, valid=True, feedback=self._text
        )

    def _answer(self, valid: bool, text: str) -> Transition:
        self._text = text
        return Transition(reward=0.0, valid=valid, feedback=text)

    def inventory_text(self) -> str:
        """What ``inventory`` answers, items sorted by name (the original: in order received).

        Example:
            >>> env = TextCraftEnv(split="train")
            >>> _ = env.reset(options={"task_id": "crafting_table"})
            >>> env.inventory_text()
            'Inventory: You are not carrying anything.'
        """
        if not self.inventory:
            return "Inventory: You are not carrying anything."
        held = sorted((display_name(name), count) for name, count in self.inventory.items())
        return "Inventory: " + "".join(f"[{name}] ({count}) " for name, count in held)

    # -------------------------------------------------------------- observation and state
    def _observation(self) -> str:
        return self._text

    def _obs_hash(self) -> str:
        return stable_hash(self._text)

    def _state_hash(self) -> str:
        return stable_hash({"goal": self.goal, "inventory": sorted(self.inventory.items())})

    def admissible_actions(self) -> list[str]:
        """``inventory``; the base items of the goal's tree, each fetched in a count some recipe
        of the tree uses and in the amount the expert's plan fetches now; and every craft the
        inventory allows now (any recipe). Sorted.

        Other gets (other counts, base items outside the tree) are valid too but not listed; the
        plan's amounts are, because deep goals are only reachable within the step limit by
        fetching a whole batch at once (an anvil takes 279 iron nuggets).

        Example:
            >>> env = TextCraftEnv(split="train")
            >>> _ = env.reset(options={"task_id": "crafting_table"})
            >>> "get 1 oak logs" in env.admissible_actions()
            True
        """

        def work() -> tuple[str, ...]:
            actions = {"inventory", *self._base_gets}
            actions.update(action for action in self._plan() if action.startswith("get "))
            actions.update(self._possible_crafts())
            return tuple(sorted(actions))

        return list(_ADMISSIBLE.get_or(self._where(), work))

    def _possible_crafts(self) -> set[str]:
        candidates: set[Recipe] = set()
        for item in self.inventory:
            candidates.update(self.book.recipes_by_candidate.get(item, ()))
        crafts: set[str] = set()
        for recipe in candidates:
            choices = [
                [
                    item
                    for item in (
                        self.book.members(ingredient.name)
                        if ingredient.is_tag
                        else (ingredient.name,)
                    )
                    if self.inventory.get(item, 0) >= ingredient.count
                ]
                for ingredient in recipe.inputs
            ]
            for picked in itertools.product(*choices):
                needed: Counter[str] = Counter()
                for item, ingredient in zip(picked, recipe.inputs, strict=True):
                    needed[item] += ingredient.count
                if all(self.inventory[item] >= count for item, count in needed.items()):
                    crafts.add(_craft_text(self.book, recipe, picked))
        return crafts

    def won(self) -> bool:
        """Whether the goal has been crafted.

        Example:
            >>> env = TextCraftEnv(split="train")
            >>> _ = env.reset(options={"task_id": "crafting_table"})
            >>> env.won()
            False
        """
        return self.inventory.get(self.goal, 0) > 0

    def category(self) -> str:
        """``depth-N``: the goal's crafting depth (1 to 4).

        Example:
            >>> env = TextCraftEnv(split="adapt")
            >>> _ = env.reset(options={"task_id": "adapt-000"})
            >>> env.category()
            'depth-4'
        """
        return f"depth-{self.depth}"

    def expert_action(self) -> str:
        """The next action of the planner's plan from the current inventory.

        Example:
            >>> env = TextCraftEnv(split="train")
            >>> _ = env.reset(options={"task_id": "crafting_table"})
            >>> env.expert_action()
            'get 1 acacia logs'
        """
        plan = self._plan()
        return plan[0] if plan else "inventory"

    def _where(self) -> tuple[str, tuple[tuple[str, int], ...]]:
        """The goal and the inventory: all that the plan and the admissible actions read."""
        return self.goal, tuple(sorted(self.inventory.items()))

    def _plan(self) -> tuple[str, ...]:
        """The expert's plan from the current inventory."""
        return _PLANS.get_or(
            self._where(), lambda: tuple(self.planner.plan(self.goal, self.inventory))
        )


#: The expert's plan and the admissible actions by goal and inventory, for every env of the
#: process (both are pure functions of them, the recipe book being the one checked book):
#: group members, repeated episodes and a fidelity run's continuations reach the same
#: inventories again.
_PLANS: Memo[tuple[str, tuple[tuple[str, int], ...]], tuple[str, ...]] = Memo()
_ADMISSIBLE: Memo[tuple[str, tuple[tuple[str, int], ...]], tuple[str, ...]] = Memo()


def _craft_text(book: RecipeBook, recipe: Recipe, picked: Sequence[str]) -> str:
    """The canonical craft of ``recipe`` with ``picked`` items for its inputs."""
    pairs = zip(picked, (ingredient.count for ingredient in recipe.inputs), strict=True)
    return Craft(recipe.output, recipe.count, sorted_ingredients(pairs)).canonical(book)


def _echo(text: str) -> str:
    """Agent-written text fit to quote: characters of the text space only, at most MAX_ECHO."""
    kept = "".join(char if char in TEXT_CHARSET else "?" for char in text[: MAX_ECHO + 1])
    return kept if len(kept) <= MAX_ECHO else kept[:MAX_ECHO] + "..."


@lru_cache(maxsize=1024)
def _prompt(goal: str) -> str:
    return build_prompt(checked_recipe_book(), goal)
