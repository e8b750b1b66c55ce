"""``agentbench/WebShop-v0``: WebShop's text mode (the original's ``WebAgentTextEnv`` with
``observation_mode="text"``).

Actions are ``search[query]`` and ``click[button]``, parsed as the original's ``parse_action``
(``name[argument]``); a click must name a clickable of the current page (``click[search]`` is
refused, as in the original) and a search works from any page, as in the original's ``step``.
``Buy Now`` ends the episode with the purchase's score as reward (0 for every other step);
``won`` when the score is 1. The step limit is 15.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from json.encoder import encode_basestring
from pathlib import Path
from typing import ClassVar

from agentbench_rl.core.actions import canonicalize_action
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.base import StepInfo, TextAgentEnv, Transition, text_space
from agentbench_rl.envs.webshop.data import CatalogueName, resolve_data_dir
from agentbench_rl.envs.webshop.expert import Expert, ShopState
from agentbench_rl.envs.webshop.goals import SPLITS, Goal, parse_task_id
from agentbench_rl.envs.webshop.pages import (
    BACK_TO_SEARCH,
    BUY_NOW,
    NEXT_PAGE,
    PREV_PAGE,
    PRODUCT_WINDOW,
    SEARCH_ACTION,
    SEARCH_BUTTON,
    SUB_PAGES,
    Page,
    done_page,
    item_page,
    results_page,
    search_page,
    sub_page,
)
from agentbench_rl.envs.webshop.reward import OPTION_RULES, RewardInfo, get_reward
from agentbench_rl.envs.webshop.world import (
    Setting,
    World,
    load_world,
    require_extras,
    shipped_manifest,
)

_NO_GOAL = Goal("", "", (), {}, 0.0, "", "", "", "")


@lru_cache(maxsize=4096)  # a pure function of the text; play repeats its actions
def canonical_action(raw: str | bytes) -> str:
    """Lower-cased, whitespace-collapsed ``name[argument]``; a search query is also stripped.

    Example:
        >>> canonical_action("<action>Search[  Red  MUG ]</action>")
        'search[red mug]'
        >>> canonical_action("click[Buy Now] now!"), canonical_action("hello")
        ('click[buy now]', 'hello')
    """
    text = canonicalize_action(raw)
    parsed = parse_action(text)
    if parsed is None:
        return text
    name, argument = parsed
    if name == "search":
        argument = argument.strip() or argument
    return f"{name}[{argument}]"


def session_state_bytes(
    page: Page,
    options: Mapping[str, str],
    goal: str,
    query: str | None,
    results_page: int,
    asin: str | None,
) -> bytes:
    """What the state hash hashes: the session as canonical JSON (sorted keys, no spaces),
    written piece by piece so the page's text, the long part, is encoded once per page.

    Example:
        >>> from agentbench_rl.core.hashing import canonical_bytes
        >>> page = search_page('i want a "mug"')
        >>> state = {"page": page.text, "options": {"size": "l", "color": "red"}, "goal": "g",
        ...          "query": None, "results_page": 1, "asin": "B0"}
        >>> written = session_state_bytes(page, state["options"], "g", None, 1, "B0")
        >>> written == canonical_bytes(state)
        True
    """

    def encoded(text: str | None) -> str:  # as json.dumps(text, ensure_ascii=False) writes it
        return "null" if text is None else encode_basestring(text)

    chosen = ",".join(
        f"{encoded(name)}:{encoded(value)}" for name, value in sorted(options.items())
    )
    return (
        f'{{"asin":{encoded(asin)},"goal":{encoded(goal)},"options":{{{chosen}}},'
        f'"page":{page.text_json},"query":{encoded(query)},"results_page":{int(results_page)}}}'
    ).encode()


def search_query(text: str) -> str:
    """The query the env searches for ``search[<text>]`` (lower-cased, whitespace collapsed).

    Example:
        >>> search_query("  Red  MUG, under 30 dollars ")
        'red mug, under 30 dollars'
    """
    parsed = parse_action(canonical_action(f"search[{text}]"))
    if parsed is None or parsed[0] != "search":
        raise ValueError(f"webshop: {text!r} is not a searchable query")
    return parsed[1]


def parse_action(action: str) -> tuple[str, str] | None:
    r"""``(name, argument)`` of ``name[argument]`` as the original's ``parse_action`` (or ``None``).

    The original runs ``re.match(r'(.+)\[(.+)\]', action)``: both groups greedy, within the first
    line, trailing text ignored. That is the last ``[`` that has a ``]`` at least two characters
    after it, and the last ``]``; found here in linear time (the regex backtracks quadratically on
    input such as ``"[" * 100000``).

    Example:
        >>> parse_action("click[buy now]"), parse_action("search[red mug] please")
        (('click', 'buy now'), ('search', 'red mug'))
        >>> parse_action("search[a[b]c]"), parse_action("search[]")
        (('search[a', 'b]c'), None)
    """
    line = action.split("\n", 1)[0]
    close = line.rfind("]")
    opening = line.rfind("[", 1, max(close - 1, 0))
    if close < 0 or opening < 1:
        return None
    return line[:opening], line[opening + 1 : close]


class WebShopEnv(TextAgentEnv[str]):
    """WebShop, text mode: find and buy the product an instruction describes.

    Args:
        split: ``"test"`` (the first 500 goals) or ``"train"`` (the rest).
        max_steps: step limit (15).
        render_mode: ``"ansi"`` or ``None``.
        data_dir: the data folder (default ``$WEBSHOP_DATA``).
        catalogue: ``"1k"`` (the standard setting) or ``"full"``.
        human_goals: human instead of synthetic instructions.
        num_products: keep only the first N products (the original's ``num_products``).
        cache_dir: where the search index is cached (default ``~/.cache/agentbench-rl``).
        option_rule: ``"original"`` (default, every published number) or ``"values"``, which
            compares option values and so lets every exact purchase score 1 (see the card).

    Example:
        >>> env = WebShopEnv(split="test")  # doctest: +SKIP
        >>> obs, info = env.reset(options={"task_id": "test-00000"})  # doctest: +SKIP
        >>> obs[:40]  # doctest: +SKIP
        'WebShop [SEP] Instruction: [SEP] Find me '
    """

    env_name: ClassVar[str] = "webshop"
    prompt_instruction: ClassVar[str] = (
        "You shop on a web store. Buy the product that matches the instruction."
    )
    default_max_steps: ClassVar[int] = 15

    def __init__(
        self,
        split: str = "test",
        max_steps: int | None = None,
        render_mode: str | None = None,
        data_dir: str | Path | None = None,
        catalogue: CatalogueName = "1k",
        human_goals: bool = False,
        num_products: int | None = None,
        cache_dir: str | Path | None = None,
        option_rule: str = "original",
    ) -> None:
        super().__init__(split=split, max_steps=max_steps, render_mode=render_mode)
        require_extras()
        if option_rule not in OPTION_RULES:
            raise ValueError(f"webshop: option_rule '{option_rule}' (choose from {OPTION_RULES})")
        self.option_rule = option_rule
        if num_products is not None and num_products < 1:
            raise ValueError(f"webshop: num_products must be >= 1, got {num_products}")
        self.world: World = load_world(
            resolve_data_dir(data_dir),
            Setting(catalogue, bool(human_goals), num_products),
            Path(cache_dir).expanduser() if cache_dir is not None else None,
        )
        self.observation_space = text_space()
        self._expert = Expert(self.world)
        self._goal: Goal = _NO_GOAL  # until reset() loads a task
        self._goal_digest = ""
        self._reset_session()

    # ------------------------------------------------------------------ splits
    @classmethod
    def splits(cls) -> Sequence[str]:
        """``train`` and ``test``."""
        return SPLITS

    @classmethod
    def task_ids(cls, split: str) -> list[str]:
        """Task ids of a split of the standard setting: ``test-00000`` .. ``test-00499`` and
        ``train-00500`` .. ``train-06909``."""
        return [row[0] for row in cls._manifest_split(split)]

    @classmethod
    def split_checksum(cls, split: str) -> str:
        """Checksum of a split of the standard setting (from the shipped manifest)."""
        cls._manifest_split(split)
        checksum: str = shipped_manifest()["checksums"][split]
        return checksum

    @classmethod
    def task_categories(cls, split: str) -> Mapping[str, str]:
        """The goal product's top-level category for every task of a split of the standard
        setting, from the shipped manifest (so no data are needed); other settings build their
        own goals and are not on the leaderboards.

        Example:
            >>> categories = WebShopEnv.task_categories("test")
            >>> len(categories), categories["test-00000"]
            (500, 'garden')
        """
        return {row[0]: row[2] for row in cls._manifest_split(split)}

    @classmethod
    def _manifest_split(cls, split: str) -> list[list[str]]:
        """The shipped manifest's (task id, goal hash, category) rows of a split."""
        if split not in SPLITS:
            raise ValueError(f"webshop: unknown split '{split}' (choose from train, test)")
        rows: list[list[str]] = shipped_manifest()["splits"][split]
        return rows

    def checksum(self) -> str:
        """Checksum of this env's split in its own setting (the standard one's unless the data,
        goals or ``num_products`` differ)."""
        return self.world.checksums[self.split]

    def split_task_ids(self) -> list[str]:
        """Task ids of this env's split in its own setting."""
        return [row[0] for row in self.world.splits[self.split]]

    def has_task(self, task_id: str) -> bool:
        """Whether ``task_id`` is exactly an id of this env's split in its own setting."""
        if getattr(self, "_task_set", None) is None:
            self._task_set = frozenset(self.split_task_ids())
        return task_id in self._task_set

    @classmethod
    def expected_return(cls, success: bool, score: float, steps: int) -> float:
        """The purchase's score, the only reward of an episode (0 without a purchase)."""
        return score

    def _sample_task_id(self) -> str:
        ids = self.split_task_ids()
        if not ids:
            raise ValueError(f"webshop: split '{self.split}' has no goals in this setting")
        return ids[int(self.np_random.integers(len(ids)))]

    # ------------------------------------------------------------------ session
    def _reset_session(self) -> None:
        self._keywords: str | None = None
        self._results: tuple[str, ...] = ()
        self._page_num = 1
        self._asin: str | None = None
        self._options: dict[str, str] = {}
        self._purchase: RewardInfo | None = None
        instruction = self._goal.instruction_text
        self._show(
            self.world.pages.get_or(("search", instruction), lambda: search_page(instruction))
        )

    def _show(self, page: Page) -> None:
        self._page = page
        self._hashes: tuple[str, str] | None = None

    def _load_task(self, task_id: str) -> None:
        index = parse_task_id(task_id)
        if index >= len(self.world.goals):
            raise ValueError(
                f"webshop: task id '{task_id}' is past the last goal "
                f"({len(self.world.goals)} goals in this setting)"
            )
        self._goal = self.world.goals[index]
        self._goal_digest = self._goal.digest()
        self._reset_session()

    @property
    def goal(self) -> Goal:
        """The current session's goal."""
        return self._goal

    @property
    def page(self) -> Page:
        """The page shown now (its text and its clickables)."""
        return self._page

    # ------------------------------------------------------------------ actions
    def canonicalize(self, raw: str | bytes) -> str:
        """The canonical action of a raw model output (see :func:`canonical_action`)."""
        return canonical_action(raw)

    def _apply(self, action: str) -> Transition:
        parsed = parse_action(action)
        if parsed is None:
            return Transition(reward=0.0, valid=False)
        name, argument = parsed
        if name == "search":
            self._search(argument)
            return Transition(reward=0.0, valid=True)
        if name == "click" and argument in self._page.clickables and argument != SEARCH_BUTTON:
            return Transition(reward=self._click(argument), valid=True)
        return Transition(reward=0.0, valid=False)

    def _search(self, query: str) -> None:
        self._keywords = query
        index = self.world.index
        self._results = self.world.searches.get_or(query, lambda: tuple(index.search(query)))
        self._show_results(1)

    def _show_results(self, page_num: int) -> None:
        # As the original's ``search_results``: leaving a product forgets it and its options.
        self._page_num, self._asin, self._options = page_num, None, {}
        start = (page_num - 1) * PRODUCT_WINDOW
        window = tuple(self._results[start : start + PRODUCT_WINDOW])
        instruction, total = self._goal.instruction_text, len(self._results)

        def render() -> Page:
            shown = [self.world.catalogue.by_asin[asin] for asin in window]
            return results_page(instruction, shown, page_num, total)

        self._show(
            self.world.pages.get_or(("results", instruction, window, page_num, total), render)
        )

    def _show_item(self) -> None:
        product = self.world.catalogue.by_asin[self._asin or ""]
        instruction = self._goal.instruction_text
        key = ("item", instruction, product.asin)
        self._show(self.world.pages.get_or(key, lambda: item_page(instruction, product)))

    def _click(self, name: str) -> float:
        """Follow a click, in the order the original's ``SimServer.receive`` checks names."""
        kind = self._page.kind
        if name == BUY_NOW:
            return self._buy()
        if name == BACK_TO_SEARCH:
            self._reset_session()
        elif name == NEXT_PAGE and kind == "results":
            self._show_results(self._page_num + 1)
        elif name == PREV_PAGE and kind == "results":
            self._show_results(self._page_num - 1)
        elif name == PREV_PAGE and kind in SUB_PAGES.values():
            self._show_item()
        elif name == PREV_PAGE and kind == "item":
            self._show_results(self._page_num)
        elif name in SUB_PAGES:
            product = self.world.catalogue.by_asin[self._asin or ""]
            instruction = self._goal.instruction_text
            key = (name, instruction, product.asin)
            self._show(self.world.pages.get_or(key, lambda: sub_page(name, instruction, product)))
        else:
            clickable = self._page.clickables[name]
            if clickable.kind == "product":
                self._asin = name.upper()
            elif clickable.option_name is not None and clickable.value is not None:
                self._options[clickable.option_name] = clickable.value
            self._show_item()
        return 0.0

    def _buy(self) -> float:
        asin = self._asin or ""
        self._purchase = get_reward(
            self.world.catalogue.by_asin[asin],
            self._goal,
            self.world.catalogue.prices[asin],
            self._options,
            self.world.nouns,
            self.option_rule,
        )
        self._show(done_page(asin, self._options, self._purchase.score))
        return self._purchase.score

    def ended_without_win(self) -> bool:
        """``Buy Now`` ends the episode whatever the score."""
        return self._purchase is not None

    # ------------------------------------------------------------------ what the base reports
    def _observation(self) -> str:
        return self._page.text

    def _hash_pair(self) -> tuple[str, str]:
        if self._hashes is None:
            page, options = self._page, self._options
            where = (self._goal_digest, self._keywords, self._page_num, self._asin)
            key = (page.text, tuple(sorted(options.items())), *where)
            state = self.world.state_hashes.get_or(
                key, lambda: stable_hash(session_state_bytes(page, options, *where))
            )
            self._hashes = (page.text_hash, state)
        return self._hashes

    def _obs_hash(self) -> str:
        return self._hash_pair()[0]

    def _state_hash(self) -> str:
        return self._hash_pair()[1]

    def admissible_actions(self) -> list[str]:
        """``search[...]`` on the search page, then a ``click[...]`` for every clickable."""
        return list(self._page.actions)

    def user_choices(self) -> list[str]:
        """What a user can do: search the instruction on the search page, else click a clickable.

        The ``random`` baseline draws uniformly from these: on the search page its only choice is
        ``search[<instruction>]`` (the search box is the page's only input), elsewhere every
        clickable of the page (buttons, product links, option values) is equally likely.
        """
        if self._page.has_search_bar:
            return [f"search[{search_query(self._goal.instruction_text)}]"]
        return [action for action in self.admissible_actions() if action != SEARCH_ACTION]

    def won(self) -> bool:
        """Bought, with a score of 1."""
        return self._purchase is not None and self._purchase.score == 1.0

    def score(self) -> float:
        """The purchase's score (0 before buying)."""
        return self._purchase.score if self._purchase is not None else 0.0

    def category(self) -> str:
        """The goal product's top-level category (``fashion``, ``beauty``, ``garden``, ...)."""
        return self._goal.category

    def expert_action(self) -> str:
        """The oracle expert's next action (see :mod:`agentbench_rl.envs.webshop.expert`)."""
        return self._expert.act(
            ShopState(
                page=self._page,
                goal=self._goal,
                results=self._results,
                page_num=self._page_num,
                asin=self._asin,
                options=self._options,
                steps_left=self.max_steps - self.steps,
            )
        )

    def _info(self) -> StepInfo:
        info = super()._info()
        info["user_choices"] = self.user_choices()  # what choose mode picks from (prompting)
        if self._purchase is not None:
            info["reward_info"] = self._purchase.as_dict()
        return info
