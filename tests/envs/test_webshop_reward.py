"""WebShop's reward on hand-built products, each score worked out by hand from the original's
``get_reward``:

    score = (attribute matches + option matches + [price <= cap])
            / (goal attributes + goal options + 1) * r_type

Titles are given "nouns" by splitting on spaces, so the type factor is hand-checkable too (the
spaCy pipeline itself is exercised in ``test_webshop_env.py``).
"""

from __future__ import annotations

import os

import pytest

from agentbench_rl.envs.webshop.data import clean_product
from agentbench_rl.envs.webshop.goals import Goal
from agentbench_rl.envs.webshop.reward import (
    get_reward,
    normalize_color,
    option_matches,
    token_set_ratio,
    type_reward,
)
from agentbench_rl.envs.webshop.world import require_extras

TEE = clean_product(
    {
        "asin": "B0TEE",
        "name": "Organic Cotton Crew Tee",
        "full_description": "A soft tee for everyday wear.",
        "small_description": ["Machine wash cold"],
        "pricing": "$15.99",
        "query": "T-Shirts ",
        "category": "fashion",
        "product_category": "Clothing › Women › Tops › T-Shirts",
        "customization_options": {
            "Color": [{"value": "Navy Blue"}, {"value": "Heather Grey"}],
            "Size": [{"value": "Small"}, {"value": "Large"}],
        },
    },
    {"B0TEE": {"attributes": ["organic cotton", "short sleeve", "machine wash"]}},
    None,
)
TOTE = clean_product(
    {
        "asin": "B0TOTE",
        "name": "Cotton Canvas Tote Bag",
        "full_description": "Sturdy bag.",
        "small_description": "Holds a lot",
        "pricing": "$12",
        "query": "tote bags",
        "category": "fashion",
        "product_category": "Clothing › Luggage › Totes",
    },
    {"B0TOTE": {"attributes": ["canvas"]}},
    None,
)
MUG = clean_product(
    {
        "asin": "B0MUG",
        "name": "Ceramic Coffee Mug",
        "pricing": "$9",
        "query": "mugs",
        "product_category": "Home & Kitchen › Kitchen & Dining › Mugs",
    },
    {},
    None,
)
GOAL = Goal(
    asin="B0TEE",
    instruction_text="i want an organic cotton short sleeve tee",
    attributes=("organic cotton", "short sleeve"),
    goal_options={"color": "navy blue", "size": "large"},
    price_upper=20.0,
    query="t-shirts",
    category="fashion",
    product_category="Clothing › Women › Tops › T-Shirts",
    name="Organic Cotton Crew Tee",
)


@pytest.fixture(autouse=True, scope="module")
def _webshop_extra() -> None:
    """Skip without the ``webshop`` extra; on CI it must be installed, so fail there."""
    try:
        require_extras()
    except ModuleNotFoundError as missing:
        if os.environ.get("CI"):
            pytest.fail(str(missing))
        pytest.skip(str(missing))


def words(title: str) -> list[str]:
    """Every word of a title counts as a noun here."""
    return title.lower().split()


def test_full_match_scores_one() -> None:
    # Attributes: both are in the tee's attribute list (fuzzy 100) -> 2.
    # Options: "navy blue" normalises to "blue" (COLOR_SET order), which is a token of the goal
    # pair ('color', 'navy blue') -> match; "large" is a token of ('size', 'large') -> 2.
    # Price 15.99 <= 20 -> 1. Type: same query -> 1.0. (2 + 2 + 1) / (2 + 2 + 1) = 1.
    info = get_reward(TEE, GOAL, 15.99, {"color": "navy blue", "size": "large"}, words)
    assert info.score == 1.0
    assert (info.attribute_matches, info.option_matches, info.price_ok) == (2, 2, True)
    assert info.title_score == 1.0


def test_one_attribute_missing() -> None:
    # "moisture wicking" is in no attribute (no shared token, ratio far below 86) and is not a
    # substring of title, bullets or description -> 2 of 3. (2 + 2 + 1) / (3 + 2 + 1) = 5/6.
    goal = Goal(**{**GOAL.__dict__, "attributes": (*GOAL.attributes, "moisture wicking")})
    info = get_reward(TEE, goal, 15.99, {"color": "navy blue", "size": "large"}, words)
    assert info.attribute_matches == 2
    assert info.score == pytest.approx(5 / 6)


def test_wrong_option() -> None:
    # "heather grey" normalises to "grey" ("grey" comes before "heather" in COLOR_SET), which
    # shares no token with ('color', 'navy blue') and ratio("grey", ...) < 86 -> only the size
    # matches. (2 + 1 + 1) / 5 = 0.8.
    info = get_reward(TEE, GOAL, 15.99, {"color": "heather grey", "size": "large"}, words)
    assert info.option_matches == 1
    assert info.score == pytest.approx(0.8)


def test_no_option_chosen() -> None:
    # Nothing clicked: 0 option matches. (2 + 0 + 1) / 5 = 0.6.
    assert get_reward(TEE, GOAL, 15.99, {}, words).score == pytest.approx(0.6)


def test_price_above_cap() -> None:
    # 25 > 20: the price term is 0. (2 + 2 + 0) / 5 = 0.8.
    info = get_reward(TEE, GOAL, 25.0, {"color": "navy blue", "size": "large"}, words)
    assert info.price_ok is False
    assert info.score == pytest.approx(0.8)


def test_wrong_type_scores_zero() -> None:
    # Mug vs tee: query differs, the breadcrumbs share no level, and no title noun is shared:
    # title_score = 0 -> r_type = 0 -> score 0 whatever the rest.
    info = get_reward(MUG, GOAL, 9.0, {}, words)
    assert (info.query_match, info.category_match, info.title_score) == (False, False, 0.0)
    assert info.r_type == 0.0 and info.score == 0.0


def test_half_type_factor() -> None:
    # Goal title of 6 nouns, the tote shares only "cotton": title_score = 1/6 (not > 0.2, not
    # < 0.1); no query match; one shared breadcrumb level ("Clothing") is fewer than 2 ->
    # r_type = 0.5. Attributes 0 ("organic cotton", "short sleeve" are nowhere in the tote),
    # options 0 (none chosen), price 12 <= 20 -> (0 + 0 + 1) / 5 * 0.5 = 0.1.
    goal = Goal(**{**GOAL.__dict__, "name": "Organic Cotton Crew Neck Tee Shirt"})
    kind = type_reward(TOTE, goal, words)
    assert kind.title_score == pytest.approx(1 / 6)
    assert (kind.query_match, kind.category_match, kind.r_type) == (False, False, 0.5)
    assert get_reward(TOTE, goal, 12.0, {}, words).score == pytest.approx(0.1)


def test_tenth_type_factor() -> None:
    # 11 goal nouns, one shared: title_score = 1/11 < 0.1 -> r_type = 0.1 even though the query
    # matches (the 0.1 rule comes after the match rule).
    goal = Goal(**{**GOAL.__dict__, "name": "cotton a b c d e f g h i j"})
    kind = type_reward(TEE, goal, words)
    assert kind.query_match and kind.r_type == 0.1


def test_title_without_nouns_counts_one_fifth() -> None:
    # No goal nouns: title_score = 0.2 (not > 0.2), so only the query match keeps r_type at 1.
    assert type_reward(TEE, GOAL, lambda title: []).r_type == 1.0
    assert type_reward(MUG, GOAL, lambda title: []).r_type == 0.5


def test_attribute_found_in_text_not_in_list() -> None:
    # "crew" is in no attribute but is a substring of the lower-cased title -> it matches.
    # "wear" is a substring of the description ("everyday wear") -> it matches too.
    goal = Goal(**{**GOAL.__dict__, "attributes": ("crew", "wear", "waterproof")})
    assert get_reward(TEE, goal, 15.99, {}, words).attribute_matches == 2


def test_colour_normalisation_quirk_of_the_original() -> None:
    # The original hands synthetic goal options over as (name, value) pairs; normalize_color
    # compares a pair's whole elements, but a purchased value by substring. "rectangular"
    # contains "tan", so the purchase reads "tan", the goal "('item shape', 'rectangular')":
    # no shared token, no match, even for the goal's own value.
    assert normalize_color("rectangular") == "tan"
    assert normalize_color(("item shape", "rectangular")) == ("item shape", "rectangular")
    assert option_matches(["rectangular"], [("item shape", "rectangular")]) == 0
    # A value that is exactly a colour normalises on both sides and matches.
    assert option_matches(["black"], [("color", "black")]) == 1


def test_human_goal_options_are_plain_values() -> None:
    # Human goals keep their options as a list of values; (1 + 1 + 1) / (1 + 1 + 1) = 1.
    goal = Goal(**{**GOAL.__dict__, "attributes": ("organic cotton",), "goal_options": ("large",)})
    assert get_reward(TEE, goal, 15.99, {"size": "large"}, words).score == 1.0


def test_token_set_ratio_is_thefuzz() -> None:
    # thefuzz drops code points 128-255 before comparing: "café" reads "caf".
    assert token_set_ratio("café", "caf") == 100
    # Punctuation is whitespace, case is ignored, and a token subset scores 100.
    assert token_set_ratio("Gluten-Free!", "gluten free") == 100
    assert token_set_ratio("x-large", "large") == 100
    # Disjoint tokens: plain ratio of "large x" vs "large size" style texts stays below 86.
    assert token_set_ratio("small", ("size", "large")) <= 85
