"""WebShop's pages in the original's "simple" text mode, and what can be clicked on them.

The original renders HTML templates and turns them into text with BeautifulSoup: every visible
text node, stripped, joined with `` [SEP] `` (``convert_html_to_text(simple=True)``); the
clickables are the ``btn`` buttons and product links (their text, lower-cased) and the option
radios (their value), in page order (``get_available_actions``). We build the same text and
clickables directly from the templates' visible text, so no HTML is rendered:

- search: ``WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search``
- results: ``Instruction: [SEP] <instruction> [SEP] Back to Search [SEP] Page 1 (Total results:
  50) [SEP] Next > [SEP] <ASIN> [SEP] <title> [SEP] <price> ...`` (``< Prev`` from page 2 on;
  ``Next >`` is always there, as in the original)
- item: ``... [SEP] Back to Search [SEP] < Prev [SEP] <option name> [SEP] <value> ... [SEP]
  <title> [SEP] Price: <price> [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP]
  Reviews [SEP] Buy Now``
- description / features / reviews: ``... [SEP] Back to Search [SEP] < Prev [SEP] <text>``
- done: the original's "Thank you for shopping with us!" page with the score.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Literal

from agentbench_rl.core.actions import normalize_text
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.webshop.data import RATING, Product

SEP = " [SEP] "
#: Results per page (the original's ``PRODUCT_WINDOW``).
PRODUCT_WINDOW = 10
BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
BUY_NOW = "buy now"
SEARCH_BUTTON = "search"
#: How admissible actions show that a search is possible (the original's ``has_search_bar``).
SEARCH_ACTION = "search[...]"
#: Sub-page button (lower-cased) -> page kind (the original's ``ACTION_TO_TEMPLATE``; the
#: ``Attributes`` page is only shown with ``show_attrs``, which the text env leaves off).
PageKind = Literal["search", "results", "item", "description", "features", "reviews", "done"]
SUB_PAGES: dict[str, PageKind] = {
    "description": "description",
    "features": "features",
    "reviews": "reviews",
}
ClickKind = Literal["button", "product", "option"]
_ASCII_SPACES = frozenset(" \n\t\x0c\r")


@dataclass(frozen=True)
class Clickable:
    """What a click name stands for on a page.

    Attributes:
        kind: a button, a product link (results page) or an option radio (item page).
        option_name: the option a radio sets.
        value: the value a radio sets, as the catalogue spells it (its click name has runs of
            whitespace, such as a no-break space, collapsed to one space, as every action has).
    """

    kind: ClickKind
    option_name: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class Page:
    """One rendered page.

    Attributes:
        kind: which page it is.
        text: the observation (`` [SEP] ``-joined visible text).
        clickables: click name -> what it is, in the original's order.
        has_search_bar: whether the page has the search box (only the search page).
    """

    kind: PageKind
    text: str
    clickables: Mapping[str, Clickable]
    has_search_bar: bool = False

    #: Worked out once per page (a world keeps its pages; group members and replays show them
    #: again): the text as a JSON string, as the state hash writes it; its observation hash;
    #: the admissible actions (``search[...]`` on the search page, then a ``click[...]`` per
    #: clickable).
    text_json: str = field(init=False, repr=False, compare=False)
    text_hash: str = field(init=False, repr=False, compare=False)
    actions: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        clicks = tuple(f"click[{name}]" for name in self.clickables if name != SEARCH_BUTTON)
        object.__setattr__(self, "text_json", encode_basestring(self.text))
        object.__setattr__(self, "text_hash", stable_hash(self.text))
        object.__setattr__(
            self, "actions", (SEARCH_ACTION, *clicks) if self.has_search_bar else clicks
        )


def text_node(text: str) -> list[str]:
    """The segment a visible text node gives, as BeautifulSoup and ``t.strip()`` make it.

    BeautifulSoup turns a node of ASCII whitespace into ``"\\n"`` (if it has a newline, and the
    original drops it) or ``" "`` (an empty segment); other nodes are stripped.

    Example:
        >>> text_node("  Price: $5 "), text_node("\\n  "), text_node(" "), text_node("")
        (['Price: $5'], [], [''], [])
    """
    if not text:
        return []
    if all(char in _ASCII_SPACES for char in text):
        return [] if "\n" in text else [""]
    return [text.strip()]


def _instruction(instruction: str) -> list[str]:
    return ["Instruction:", *text_node(instruction)]


def _buttons(*names: str) -> dict[str, Clickable]:
    return {name: Clickable("button") for name in names}


def search_page(instruction: str) -> Page:
    """The start page (``search_page.html``).

    Example:
        >>> search_page("i want a mug").text
        'WebShop [SEP] Instruction: [SEP] i want a mug [SEP] Search'
    """
    segments = ["WebShop", *_instruction(instruction), "Search"]
    return Page("search", SEP.join(segments), _buttons(SEARCH_BUTTON), has_search_bar=True)


def results_page(instruction: str, products: Sequence[Product], page: int, total: int) -> Page:
    """A page of search results (``results_page.html``): ``products`` are the ones shown.

    Example:
        >>> search = results_page("i want a mug", [], page=2, total=0)
        >>> search.text.split(SEP)[2:]
        ['Back to Search', 'Page 2 (Total results: 0)', '< Prev', 'Next >']
        >>> list(search.clickables)
        ['back to search', '< prev', 'next >']
    """
    segments = [
        *_instruction(instruction),
        "Back to Search",
        f"Page {page} (Total results: {total})",
    ]
    buttons = [BACK_TO_SEARCH]
    if page > 1:
        segments.append("< Prev")
        buttons.append(PREV_PAGE)
    segments.append("Next >")
    buttons.append(NEXT_PAGE)
    clickables = _buttons(*buttons)
    for product in products:
        segments += [*text_node(product.asin), *text_node(product.name)]
        segments += text_node(product.price_tag)
        clickables[product.asin.lower()] = Clickable("product")
    return Page("results", SEP.join(segments), clickables)


def item_page(instruction: str, product: Product) -> Page:
    """A product's page (``item_page.html``) with its option radios.

    Example:
        >>> from agentbench_rl.envs.webshop.data import clean_product
        >>> mug = clean_product({"asin": "B0X", "name": "Mug", "pricing": "$5",
        ...     "customization_options": {"Color": [{"value": "Red"}]}}, {}, None)
        >>> page = item_page("i want a mug", mug)
        >>> page.text.split(SEP)[2:9]
        ['Back to Search', '< Prev', 'color', 'red', 'Mug', 'Price: $5.0', 'Rating: N.A.']
        >>> list(page.clickables)
        ['back to search', '< prev', 'description', 'features', 'reviews', 'buy now', 'red']
    """
    segments = [*_instruction(instruction), "Back to Search", "< Prev"]
    for option_name, values in product.options.items():
        segments += text_node(option_name)
        for value in values:
            segments += text_node(value)
    segments += text_node(product.name)
    segments += [f"Price: {product.price_tag}", f"Rating: {RATING}"]
    segments += ["Description", "Features", "Reviews", "Buy Now"]
    clickables = _buttons(BACK_TO_SEARCH, PREV_PAGE, *SUB_PAGES, BUY_NOW)
    # Radios come after the buttons; a value equal to an earlier name takes its place (a dict).
    for option_name, values in product.options.items():
        for value in values:
            clickables[normalize_text(value)] = Clickable("option", option_name, value)
    return Page("item", SEP.join(segments), clickables)


def sub_page(button: str, instruction: str, product: Product) -> Page:
    """The page behind a product's ``description``, ``features`` or ``reviews`` button (reviews
    are never loaded, so that page lists none, as in the original's text env).

    Example:
        >>> from agentbench_rl.envs.webshop.data import clean_product
        >>> mug = clean_product({"asin": "B0X", "small_description": ["Big", ""]}, {}, None)
        >>> sub_page("features", "i want a mug", mug).text
        'Instruction: [SEP] i want a mug [SEP] Back to Search [SEP] < Prev [SEP] Big [SEP] '
    """
    segments = [*_instruction(instruction), "Back to Search", "< Prev"]
    if button == "description":
        segments += text_node(product.description)
    elif button == "features":
        for bullet in product.bullet_points:
            segments += text_node(f" {bullet}")
    return Page(SUB_PAGES[button], SEP.join(segments), _buttons(BACK_TO_SEARCH, PREV_PAGE))


def _tojson(options: Mapping[str, str]) -> str:
    # Flask's ``tojson`` filter: sorted keys, ASCII, and <, >, & and ' escaped for HTML.
    text = json.dumps(dict(options), sort_keys=True, ensure_ascii=True)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(char, escape)
    return text


def done_page(asin: str, options: Mapping[str, str], score: float) -> Page:
    """The page after ``Buy Now`` (``done_page.html`` as the text env fills it: only the asin,
    the options and the score are given, the rest shows ``None`` or nothing).

    Example:
        >>> done_page("B0X", {"color": "red"}, 0.5).text.split(SEP)[-4:]
        ['Your score (min 0.0, max 1.0)', '0.5', 'Reward Details', 'None']
    """
    segments = ["Thank you for shopping with us!", "Your code:", "None"]
    segments += ["(Paste it in your MTurk interface.)", "Purchased", "asin", *text_node(asin)]
    segments += ["options", _tojson(options)]
    for label in ("attrs", "category", "query", "product category"):
        segments += [label, "None"]
    segments += ["Target", "asin", "options", "attrs", "price upper", "instuction text"]
    segments += ["category", "product category", "query", "Goal", "None", "Reward"]
    segments += ["Your score (min 0.0, max 1.0)", str(score), "Reward Details", "None"]
    return Page("done", SEP.join(segments), {})
