"""The product catalogue: a seeded generator shaped like WebShop's data, and a loader for the real WebShop files.

A product is a dict with WebShop's keys after ``load_products``: ``asin``, ``name``, ``Title``, ``category``,
``query``, ``product_category`` (``A › B › C``), ``Description``, ``BulletPoints``, ``Reviews``, ``Rating``,
``pricing``, ``Price``, ``options`` (name -> values), ``Attributes``, ``instruction_text`` and
``instruction_attributes`` (what WebShop's synthetic goals are built from).
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import Any

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.io import read_json, read_text

__all__ = [
    "CATEGORIES",
    "Catalogue",
    "generate_products",
    "get_catalogue",
    "load_real_products",
    "product_prices",
]

_BRANDS = (
    "Aurora", "Lumen", "Northwind", "Kestrel", "Velora", "Brightfield", "Oakline", "Solenne", "Tidewell",
    "Marrow", "Fenwick", "Calyx", "Harbor", "Ember", "Juniper", "Halcyon", "Quillon", "Redfern", "Sable",
    "Tamsin", "Umbra", "Vantage", "Wexley", "Yarrow", "Zephyr", "Brisa", "Cobalt", "Dunmore", "Elara",
    "Fable", "Glimmer", "Hollis", "Ivorie", "Jasper", "Kinetic", "Larkspur", "Mistral", "Nimbus", "Orla",
    "Pellucid"
)
_INTROS = ("i am looking for", "i need", "i want", "find me", "i'm looking for", "get me")
_REVIEW_TITLES = ("Great value", "Works as described", "Pretty good", "Love it", "Would buy again", "Decent")
_REVIEW_BODIES = (
    "Arrived quickly and does exactly what I needed.",
    "Good quality for the price, I would recommend it.",
    "Nice product overall, a little smaller than expected.",
    "Exactly as pictured and the quality is solid.",
    "It does the job, nothing fancy but reliable.",
)


def _types() -> dict[str, Any]:
    return json.loads(read_text(resources.files(__package__).joinpath("product_types.json")))


CATEGORIES: tuple[str, ...] = ("beauty", "electronics", "fashion", "food", "furniture")


def _asin(rng: random.Random, taken: set[str]) -> str:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _title_case(text: str) -> str:
    return " ".join(w if w[:1].isdigit() else w[:1].upper() + w[1:] for w in text.split())


def _join_attrs(attrs: Sequence[str]) -> str:
    return attrs[0] if len(attrs) == 1 else ", ".join(attrs[:-1]) + " and " + attrs[-1]


#: The most products the generator makes: about 0.1 ms and 10 kB each, so 100,000 build in about 10 s and 1 GB
#: (WebShop's small catalogue has 1,000; 10**9 grew until the process was killed).
MAX_GENERATED_PRODUCTS = 100_000


def generate_products(n_products: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """``n_products`` deterministic products over five categories and thirty product types.

    :param n_products: how many products (at least 30, one per type; at most :data:`MAX_GENERATED_PRODUCTS`).
    :param seed: generator seed; the same seed gives the same catalogue on every machine.
    """
    if isinstance(n_products, bool) or not isinstance(n_products, int):
        raise ConfigError(f"n_products={str(n_products)[:40]}: give a whole number of products")
    if n_products < 30:
        raise ConfigError(f"n_products={n_products}: the generator needs at least 30 (one per product type)")
    if n_products > MAX_GENERATED_PRODUCTS:
        raise ConfigError(f"n_products={str(n_products)[:40]}: the generator makes at most "
                          f"{MAX_GENERATED_PRODUCTS} products (WebShop's real catalogue loads with items_path)")
    rng = random.Random(f"webshop-catalogue-{seed}")
    spec = _types()
    kinds = [(cat, spec[cat]["root"], t) for cat in CATEGORIES for t in spec[cat]["types"]]
    taken: set[str] = set()
    products = []
    for i in range(n_products):
        category, root, t = kinds[i % len(kinds)]
        noun = t["noun"]
        attrs = rng.sample(t["attributes"], rng.randint(4, 6))
        brand = rng.choice(_BRANDS)
        title = f"{brand} {_title_case(noun)} - " + ", ".join(_title_case(a) for a in attrs[:3])
        options = {}
        for name, pool in t["options"].items():
            k = rng.randint(2, min(4, len(pool)))
            picked = set(rng.sample(pool, k))
            options[name] = [v for v in pool if v in picked]
        lo, hi = t["price"]
        if rng.random() < 0.2:
            a = round(rng.uniform(lo, hi), 2)
            pricing = [a, round(a * rng.uniform(1.1, 1.6), 2)]
            price_tag = f"${pricing[0]:.2f} to ${pricing[1]:.2f}"
        else:
            pricing = [round(rng.uniform(lo, hi), 2)]
            price_tag = f"${pricing[0]:.2f}"
        reviews: list[dict[str, Any]] = [
            {"title": rng.choice(_REVIEW_TITLES), "score": rng.randint(3, 5), "body": rng.choice(_REVIEW_BODIES)}
            for _ in range(rng.randint(1, 3))
        ]
        goal_attrs = rng.sample(attrs, rng.randint(1, min(3, len(attrs))))
        products.append(
            {
                "asin": _asin(rng, taken),
                "name": title,
                "Title": title,
                "category": category,
                "query": noun,
                "product_category": " › ".join([root, *t["path"].split(" › ")]),
                "Description": (
                    f"The {brand} {noun} is {_join_attrs(attrs)}. "
                    f"Made for everyday use, backed by a {rng.choice((30, 60, 90))}-day guarantee."
                ),
                "BulletPoints": [f"{_title_case(a)}: designed to be {a}." for a in attrs],
                "Reviews": reviews,
                "Rating": f"{sum(r['score'] for r in reviews) / len(reviews):.1f}",
                "pricing": pricing,
                "Price": price_tag,
                "options": options,
                "option_to_image": {},
                "Attributes": attrs,
                "instruction_text": f"{rng.choice(_INTROS)} {_join_attrs(goal_attrs)} {noun}",
                "instruction_attributes": goal_attrs,
                "MainImage": f"img/{category}.svg",
            }
        )
    order = list(range(n_products))
    rng.shuffle(order)
    return [products[i] for i in order]


def _parse_pricing(raw: Any) -> tuple[list[float], str]:
    if not raw:
        return [100.0], "$100.0"
    try:
        pricing = [float(Decimal(re.sub(r"[^\d.]", "", p))) for p in str(raw).split("$")[1:]]
    except InvalidOperation:
        pricing = []
    if not pricing:
        return [100.0], "$100.0"
    if len(pricing) == 1:
        return pricing, f"${pricing[0]}"
    return pricing[:2], f"${pricing[0]} to ${pricing[1]}"


def load_real_products(
    items_path: str | Path, attributes_path: str | Path, reviews_path: str | Path | None = None
) -> list[dict[str, Any]]:
    """Products from WebShop's own files, cleaned as WebShop's ``load_products`` cleans them.

    :param items_path: ``items_shuffle_1000.json`` (or the 12k/all-product file): a list of scraped products.
    :param attributes_path: ``items_ins_v2_1000.json``: asin -> attributes, instruction, instruction_attributes.
    :param reviews_path: optional ``reviews.json``; without it products have no reviews and rating ``N.A.``.
    """
    for p in (items_path, attributes_path):
        if not Path(p).is_file():
            raise ConfigError(f"WebShop data file {p} not found; pass the path of items_shuffle_1000.json and "
                              f"items_ins_v2_1000.json (or omit both to use the generated catalogue)")
    raw = read_json(items_path, error=ConfigError)
    attributes = read_json(attributes_path, error=ConfigError)
    reviews: dict[str, Any] = {}
    if reviews_path is not None:
        reviews = {r["asin"]: r for r in read_json(reviews_path, error=ConfigError)}
    products, seen = [], set()
    for p in raw:
        asin = str(p.get("asin", ""))
        if asin in ("", "nan") or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        pricing, price_tag = _parse_pricing(p.get("pricing"))
        options: dict[str, list[str]] = {}
        for name, contents in (p.get("customization_options") or {}).items():
            if contents:
                options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        small = p.get("small_description") or []
        review = reviews.get(asin, {})
        attr = attributes.get(asin, {})
        products.append(
            {
                "asin": asin,
                "name": p["name"],
                "Title": p["name"],
                "category": p.get("category", ""),
                "query": str(p.get("query", "")).lower().strip(),
                "product_category": p.get("product_category", ""),
                "Description": p.get("full_description") or "",
                "BulletPoints": small if isinstance(small, list) else [small],
                "Reviews": [
                    {"title": r.get("title", ""), "score": r.get("score", r.get("stars", 0)),
                     "body": r.get("body", r.get("review", ""))}
                    for r in review.get("reviews", [])
                ],
                "Rating": review.get("average_rating", "N.A."),
                "pricing": pricing,
                "Price": price_tag,
                "options": options,
                "option_to_image": {},
                "Attributes": attr.get("attributes") or ["DUMMY_ATTR"],
                "instruction_text": attr.get("instruction"),
                "instruction_attributes": attr.get("instruction_attributes"),
                "MainImage": f"img/{p.get('category', 'beauty')}.svg",
            }
        )
    return products


def product_prices(products: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, float]:
    """The price each product sells at: its price, or a seeded draw inside its price range (WebShop's rule)."""
    rng = random.Random(f"webshop-prices-{seed}")
    prices = {}
    for p in products:
        pricing = p["pricing"]
        prices[p["asin"]] = float(pricing[0]) if len(pricing) == 1 else rng.uniform(*pricing[:2])
    return prices


@dataclass(frozen=True, eq=False)
class Catalogue:
    """Products, their prices and the goals built from them (shared, read-only, one per process and source)."""

    products: tuple[dict[str, Any], ...]
    by_asin: Mapping[str, dict[str, Any]]
    prices: Mapping[str, float]
    goals: tuple[dict[str, Any], ...]
    source: str

    @property
    def n_test_goals(self) -> int:
        from .goals import TEST_GOALS

        return min(TEST_GOALS, len(self.goals))


_CACHE: dict[tuple[Any, ...], Catalogue] = {}
_LOCK = threading.Lock()


def get_catalogue(
    n_products: int = 1000,
    seed: int = 0,
    items_path: str | Path | None = None,
    attributes_path: str | Path | None = None,
    reviews_path: str | Path | None = None,
) -> Catalogue:
    """The process-wide catalogue for these settings (built once, then shared by every env and server).

    :param n_products: generated products (ignored when real files are given).
    :param seed: catalogue seed (products, prices, goal price limits).
    :param items_path: WebShop's ``items_shuffle_1000.json``; with ``attributes_path`` it replaces the generator.
    """
    from .goals import build_goals

    if (items_path is None) != (attributes_path is None):
        raise ConfigError("give both items_path and attributes_path (WebShop's items_shuffle_1000.json and "
                          "items_ins_v2_1000.json), or neither")
    key = (n_products, seed, str(items_path), str(attributes_path), str(reviews_path))
    with _LOCK:
        if key not in _CACHE:
            if items_path is not None and attributes_path is not None:
                products = load_real_products(items_path, attributes_path, reviews_path)
                source = f"webshop:{Path(items_path).name}"
            else:
                products = generate_products(n_products, seed)
                source = f"generated:n={n_products},seed={seed}"
            prices = product_prices(products, seed)
            goals = build_goals(products, prices, seed)
            _CACHE[key] = Catalogue(
                products=tuple(products),
                by_asin={p["asin"]: p for p in products},
                prices=prices,
                goals=tuple(goals),
                source=source,
            )
        return _CACHE[key]
