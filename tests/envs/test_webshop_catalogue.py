"""The seeded catalogue, WebShop-style synthetic goals, the fixed splits and the real-data loader."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("bm25s")

from agentbench_crbc.envs.webshop.catalogue import (
    CATEGORIES,
    generate_products,
    get_catalogue,
    load_real_products,
)
from agentbench_crbc.envs.webshop.goals import TEST_GOALS, goal_index, split_indices
from agentbench_crbc.envs.webshop.search import get_index
from agentbench_crbc.errors import ConfigError


def test_generator_is_deterministic_and_large_enough():
    a, b = generate_products(1000, seed=0), generate_products(1000, seed=0)
    assert a == b
    assert a != generate_products(1000, seed=1)
    assert len({p["asin"] for p in a}) == 1000
    assert Counter(p["category"] for p in a).keys() == set(CATEGORIES)
    assert min(Counter(p["category"] for p in a).values()) >= 190  # 30 product types round-robin
    for p in a[:50]:
        assert set(p["instruction_attributes"]) <= set(p["Attributes"])
        assert p["options"] and all(p["options"].values())
        assert p["Price"].startswith("$") and 0 < p["pricing"][0] < 500
        assert len(p["product_category"].split(" › ")) >= 3


def test_goals_are_built_like_webshop_synthetic_goals():
    cat = get_catalogue()
    assert len(cat.goals) > 5000
    goal = cat.goals[0]
    product = cat.by_asin[goal["asin"]]
    opts = ", and ".join(f"{k}: {v}" for k, v in sorted(goal["goal_options"].items()))
    assert goal["instruction_text"] == (
        f"{product['instruction_text']} with {opts}, and price lower than {goal['price_upper']:.2f} dollars"
    )
    # the price limit is one of the first four multiples of 10 above the price, never the smallest
    above = [10.0 * i for i in range(1, 100) if 10.0 * i > cat.prices[goal["asin"]]][:4]
    assert goal["price_upper"] in above[1:]
    # every combination of the product's option values is a goal
    n_combos = 1
    for values in product["options"].values():
        n_combos *= len(values)
    assert sum(g["asin"] == goal["asin"] for g in cat.goals) == n_combos
    assert len({g["instruction_text"] for g in cat.goals}) == len(cat.goals)


def test_splits_are_fixed_and_disjoint():
    cat = get_catalogue()
    n = len(cat.goals)
    test, train = split_indices("test", n), split_indices("train", n)
    assert test == range(0, TEST_GOALS) and train == range(TEST_GOALS, n)
    assert not set(test) & set(train)
    test_texts = {cat.goals[i]["instruction_text"] for i in test}
    assert not test_texts & {cat.goals[i]["instruction_text"] for i in train}
    assert {goal_index("train", s, n) for s in range(2000)} <= set(train)
    assert {goal_index("test", s, n) for s in range(2000)} == set(test)
    assert goal_index("test", 7, n) == 7 and goal_index("train", 0, n) == TEST_GOALS
    with pytest.raises(ConfigError, match="split="):
        split_indices("validation", n)


def test_search_finds_a_product_by_its_title():
    cat = get_catalogue()
    index = get_index(cat)
    assert get_index(cat) is index  # one shared index per process
    product = cat.products[17]
    hits = index.search(product["Title"].lower().split())
    assert hits[0] == product["asin"] and len(hits) == 50
    assert index.search(["zzzzqqq"]) == []


def _write_real_files(tmp_path):
    items = [
        {"asin": "B07TEST001", "name": "Café Crème Body Lotion, Paraben Free – 8 oz", "category": "beauty",
         "query": "Body Lotion ", "product_category": "Beauty & Personal Care › Skin Care › Body",
         "full_description": "A rich lotion.", "small_description": ["Moisturizing", "Paraben free"],
         "pricing": "$12.99", "images": ["x.jpg"],
         "customization_options": {"Size": [{"value": "8 oz", "image": None}, {"value": "16 oz/2 pack"}],
                                   "Scent": None}},
        {"asin": "B07TEST002", "name": "Desk Lamp", "category": "furniture", "query": "lamp",
         "product_category": "Home & Kitchen › Furniture › Lamps", "full_description": "",
         "small_description": "Bright", "pricing": "$20.00 - $30.00", "images": [],
         "customization_options": {}},
        {"asin": "nan", "name": "broken", "category": "x", "query": "", "product_category": "",
         "small_description": [], "customization_options": {}},
    ]
    attrs = {"B07TEST001": {"attributes": ["paraben free", "dry skin"], "instruction": "i need a paraben free lotion",
                            "instruction_attributes": ["paraben free"]},
             "B07TEST002": {"attributes": ["led"], "instruction": None, "instruction_attributes": None}}
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(items), "utf-8")
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(attrs), "utf-8")
    return tmp_path / "items_shuffle_1000.json", tmp_path / "items_ins_v2_1000.json"


def test_real_webshop_files_load_as_webshop_cleans_them(tmp_path):
    items, attrs = _write_real_files(tmp_path)
    products = load_real_products(items, attrs)
    assert [p["asin"] for p in products] == ["B07TEST001", "B07TEST002"]
    lotion, lamp = products
    assert lotion["options"] == {"size": ["8 oz", "16 oz | 2 pack"]}  # None options dropped, "/" -> " | "
    assert lotion["query"] == "body lotion" and lotion["pricing"] == [12.99] and lotion["Price"] == "$12.99"
    assert lamp["pricing"] == [20.0, 30.0] and lamp["BulletPoints"] == ["Bright"]
    cat = get_catalogue(items_path=items, attributes_path=attrs)
    assert [g["instruction_text"].split(" with ")[0] for g in cat.goals] == ["i need a paraben free lotion"] * 2
    with pytest.raises(ConfigError, match="both"):
        get_catalogue(items_path=items)


def test_the_generated_catalogue_size_is_bounded_before_any_work():
    # #40 item 10 (every size bounded before work): n_products=10**9 grew until the process was killed, in
    # `abc serve --env webshop --set n_products=...` (at start-up) as in abc rollout and abc train
    import time

    from agentbench_crbc.envs.webshop.catalogue import MAX_GENERATED_PRODUCTS

    t0 = time.perf_counter()
    for bad in (10**9, MAX_GENERATED_PRODUCTS + 1, 10**400):
        with pytest.raises(ConfigError, match="the generator makes at most"):
            generate_products(bad)
    for bad in (1e3, True, "1000"):
        with pytest.raises(ConfigError, match="give a whole number of products"):
            generate_products(bad)  # type: ignore[arg-type]
    assert time.perf_counter() - t0 < 5


def test_abc_serve_and_rollout_refuse_a_huge_catalogue_in_one_line(capsys, monkeypatch, tmp_path):
    import agentbench_crbc.rollout.hosting.serve as serve_mod
    from agentbench_crbc.cli import main

    def started(*a, **k):
        raise AssertionError("abc serve started")

    monkeypatch.setattr(serve_mod, "serve", started)
    monkeypatch.delenv("ABC_SERVE_TOKEN", raising=False)
    assert main(["serve", "--env", "webshop", "--set", "n_products=1000000000"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("abc serve: error: --set: ") and "the generator makes at most" in line
    out = tmp_path / "out.jsonl"
    assert main(["rollout", "--env", "webshop", "--policy", "random", "--groups", "1", "--group-size", "1",
                 "--workers", "0", "--set", "n_products=1000000000", "-o", str(out)]) == 2
    assert "the generator makes at most" in capsys.readouterr().err and not out.exists()
