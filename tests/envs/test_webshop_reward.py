"""WebShop's reward: (attr + option + price matches) / (n_attr + n_opt + 1) * r_type, with its fuzzy rules."""

from __future__ import annotations

import pytest

pytest.importorskip("rapidfuzz")

from agentbench_crbc.envs.webshop.reward import (
    attribute_reward,
    get_reward,
    normalize_color,
    option_reward,
    type_reward,
)

PRODUCT = {
    "asin": "B000000001",
    "query": "body lotion",
    "product_category": "Beauty & Personal Care › Skin Care › Body › Lotions",
    "name": "Aurora Body Lotion - Paraben Free, Long Lasting",
    "Title": "Aurora Body Lotion - Paraben Free, Long Lasting",
    "BulletPoints": ["Vitamin E: designed to be vitamin e."],
    "Description": "A lotion for dry skin.",
    "Attributes": ["paraben free", "long lasting", "vitamin e", "dry skin"],
}
GOAL = {
    "query": "body lotion",
    "product_category": PRODUCT["product_category"],
    "name": PRODUCT["Title"],
    "attributes": ["paraben free", "dry skin"],
    "goal_options": {"scent": "lavender", "size": "8 fl oz"},
    "price_upper": 30.0,
}


def test_exact_purchase_scores_one():
    info = get_reward(PRODUCT, GOAL, price=12.5, options={"scent": "lavender", "size": "8 fl oz"})
    assert info.reward == 1.0 and info.r_type == 1.0 and info.r_price
    assert (info.n_attr_matches, info.n_option_matches) == (2, 2)


@pytest.mark.parametrize(
    ("price", "options", "expected"),
    [
        (40.0, {"scent": "lavender", "size": "8 fl oz"}, 4 / 5),  # price above the limit: (2 + 2 + 0) / 5
        (12.5, {"scent": "vanilla", "size": "8 fl oz"}, 4 / 5),  # one option wrong
        (12.5, {"scent": "lavender", "size": "12 fl oz"}, 4 / 5),  # size must match exactly
        (12.5, {}, 3 / 5),  # no options chosen: (2 + 0 + 1) / 5
        (99.0, {"scent": "rose"}, 2 / 5),
    ],
)
def test_partial_purchases_follow_the_formula(price, options, expected):
    assert get_reward(PRODUCT, GOAL, price=price, options=options).reward == pytest.approx(expected)


def test_attribute_matching_is_fuzzy_or_textual():
    # token_set_ratio("long lasting", "long-lasting formula") > 85; "dry skin" occurs in the description only
    product = {**PRODUCT, "Attributes": ["long-lasting formula"]}
    assert attribute_reward(product, ["long lasting", "dry skin", "cruelty free"]) == (pytest.approx(2 / 3), 2)


def test_size_is_exact_and_other_options_fuzzy():
    assert option_reward(PRODUCT, ["8 fl oz"], {"size": "8 fl oz"}) == (1.0, 1)
    assert option_reward(PRODUCT, ["8 fl oz"], {"size": "8 fl oz."}) == (0.0, 0)
    assert option_reward(PRODUCT, ["french vanilla scent"], {"scent": "vanilla"}) == (1.0, 1)
    assert option_reward(PRODUCT, [], {"scent": "vanilla"})[0] is None


def test_colors_are_normalised_before_matching():
    assert normalize_color("navy blue heather") == "blue"  # first colour word in alphabetical order
    assert normalize_color("clear") == "clear"
    assert option_reward(PRODUCT, ["dark grey"], {"color": "grey melange"}) == (1.0, 1)


# The goal title's content words are aurora, body, lotion, paraben, lasting (5).
@pytest.mark.parametrize(
    ("change", "r_type"),
    [
        ({}, 1.0),  # same query
        ({"query": "x", "product_category": "A › B", "name": "Aurora Body Lotion Travel"}, 1.0),  # 3/5 > 0.2
        ({"query": "x", "product_category": "A › B", "name": "Kestrel Body Wash Lotion"}, 1.0),  # 2/5
        ({"query": "x", "product_category": "A › B", "name": "Lotion Pump"}, 0.5),  # 1/5 is not > 0.2
        ({"query": "x", "name": "Lotion Pump"}, 1.0),  # ... but two category levels match
        ({"query": "x", "name": "Kestrel Shampoo"}, 0.0),  # no title overlap at all: 0 whatever else matches
    ],
)
def test_type_reward_cases(change, r_type):
    assert type_reward({**PRODUCT, **change}, GOAL)[0] == r_type


def test_type_reward_half_and_tenth():
    goal = {**GOAL, "name": "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"}
    product = {**PRODUCT, "query": "x", "product_category": "A › B"}
    assert type_reward({**product, "name": "alpha beta"}, goal)[0] == 0.5  # 2/11 = 0.18
    assert type_reward({**product, "name": "alpha"}, goal)[0] == 0.1  # 1/11 < 0.1
    assert type_reward({**product, "name": "omega"}, goal)[0] == 0.0
    assert type_reward({**product, "name": "omega"}, {**goal, "name": "the and of"})[3] == 0.2  # no nouns


def test_wrong_type_scales_the_whole_reward():
    product = {**PRODUCT, "query": "x", "product_category": "A › B", "name": "Kestrel Shampoo Bottle"}
    assert get_reward(product, GOAL, price=10.0, options={"scent": "lavender", "size": "8 fl oz"}).reward == 0.0
