"""Synthetic goals built the way WebShop builds them, and the fixed train/test split (test = goal indices 0-499).

For every product with an instruction, one goal per combination of its option values:
``"<instruction> with <name>: <value>, and <name>: <value>, and price lower than <P> dollars"``, where ``P`` is the
larger of two draws from the first four multiples of 10 above the product's price. Goals are then shuffled with
seed 233 (as WebShop does) so that the index of a goal is stable; the first 500 are the test split.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from agentbench_crbc.errors import ConfigError

__all__ = ["PRICE_RANGE", "SPLITS", "TEST_GOALS", "build_goals", "goal_index", "split_indices"]

PRICE_RANGE = tuple(10.0 * i for i in range(1, 100))
TEST_GOALS = 500
SPLITS = ("train", "test", "all")


def build_goals(
    products: Sequence[Mapping[str, Any]], prices: Mapping[str, float], seed: int = 0
) -> list[dict[str, Any]]:
    """WebShop's synthetic goals for ``products``, de-duplicated by instruction text and shuffled (seed 233).

    :param products: catalogue products (need ``instruction_text``, ``instruction_attributes``, ``options``).
    :param prices: asin -> selling price.
    :param seed: seed of the price-limit draws.
    """
    rng = random.Random(f"webshop-goals-{seed}")
    goals: list[dict[str, Any]] = []
    seen: set[str] = set()
    counts: dict[str, int] = defaultdict(int)
    for product in products:
        if not product.get("instruction_text") or not product.get("instruction_attributes"):
            continue
        asin = product["asin"]
        above = [p for p in PRICE_RANGE if p > prices[asin]][:4]
        if len(above) >= 2:
            price_upper = sorted(rng.sample(above, 2))[1]
            price_text = f", and price lower than {price_upper:.2f} dollars"
        else:
            price_upper, price_text = 1000000.0, ""
        names = sorted(product["options"])
        for combo in itertools.product(*(product["options"][n] for n in names)):
            goal_options = dict(zip(names, combo, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = f" with {option_text}" if option_text else ""
            text = f"{product['instruction_text']}{option_text}{price_text}"
            if text in seen:
                continue
            seen.add(text)
            goals.append(
                {
                    "asin": asin,
                    "category": product["category"],
                    "query": product["query"],
                    "name": product["Title"],
                    "product_category": product["product_category"],
                    "instruction_text": text,
                    "attributes": list(product["instruction_attributes"]),
                    "price_upper": price_upper,
                    "goal_options": goal_options,
                }
            )
            for att in product["instruction_attributes"]:
                counts[att] += 1
    for goal in goals:
        goal["weight"] = sum(1.0 / counts[a] for a in goal["attributes"]) / len(goal["attributes"])
    random.Random(233).shuffle(goals)
    return goals


def split_indices(split: str, n_goals: int) -> range:
    """Goal indices of ``split``: ``test`` = 0-499, ``train`` = 500 onwards, ``all`` = every goal."""
    if split not in SPLITS:
        raise ConfigError(f"split={split!r}; choose one of {', '.join(SPLITS)}")
    if n_goals <= TEST_GOALS and split != "test" and split != "all":
        raise ConfigError(f"only {n_goals} goals: the train split starts at goal {TEST_GOALS}; use split='test' "
                          f"or 'all', or a larger catalogue")
    if split == "test":
        return range(min(TEST_GOALS, n_goals))
    if split == "train":
        return range(TEST_GOALS, n_goals)
    return range(n_goals)


def goal_index(split: str, seed: int, n_goals: int) -> int:
    """The goal a ``reset(seed=seed)`` plays: the ``seed``-th goal of the split (wrapping around)."""
    indices = split_indices(split, n_goals)
    return indices[seed % len(indices)]
