"""WebShop's purchase reward: (matched attributes + matched options + price ok) / (attributes + options + 1) * r_type.

The rules follow WebShop's ``engine/goal.py`` (Yao et al., 2022, Eq. in Sec. 3.1):

* **type** ``r_type``: 1.0 when the product's search query equals the goal's, or at least two of its category-path
  levels match, or more than 20% of the goal title's nouns appear in the product name; 0.5 otherwise; 0.1 when
  the title overlap is below 0.1; 0.0 when it is zero (a goal title without nouns counts as overlap 0.2).
* **attributes**: a goal attribute matches when thefuzz's ``token_set_ratio`` (rapidfuzz with thefuzz's
  preprocessing and rounding) with some product attribute exceeds 85, or when it
  occurs in the title, the bullet points or the description (lower-cased substring).
* **options**: each *purchased* option value is colour-normalised; ``size`` must match a goal option exactly, other
  option names fuzzily (``token_set_ratio`` > 85), else it counts when it occurs in the title, bullets or description.
* **price**: 1 when the price is at most the goal's ``price_upper``.

One documented deviation: WebShop keeps only spaCy NOUN/PROPN tokens of the titles (``en_core_web_lg``, a 500 MB
model that cannot be installed offline). Here the "nouns" are the title's content words: alphabetic tokens of two or
more letters that are not English stop words or common product adjectives. On the exact product both give the same
overlap (1.0); on other products the overlap can differ slightly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentbench_crbc.errors import EnvError

try:
    from rapidfuzz import fuzz
    from rapidfuzz.utils import default_process
except ModuleNotFoundError as exc:  # gym.make("abc/WebShop-v0") without the extra: one line naming it
    raise EnvError("WebShop needs rapidfuzz (its fuzzy reward matching): pip install 'agentbench-crbc[webshop]'") \
        from exc

__all__ = [
    "EXACT_MATCH_OPTIONS",
    "RewardInfo",
    "attribute_reward",
    "get_reward",
    "normalize_color",
    "option_reward",
    "title_nouns",
    "type_reward",
]

EXACT_MATCH_OPTIONS = ("size",)
FUZZY_THRESHOLD = 85

# Colour words, alphabetical: normalize_color returns the first one contained in the text (WebShop's rule).
_COLORS = (
    "beige", "black", "blue", "blush", "bronze", "brown", "burgundy", "camel", "charcoal", "chocolate",
    "coffee", "copper", "coral", "cream", "denim", "gold", "gray", "green", "grey", "ivory", "khaki",
    "lavender", "lilac", "lime", "magenta", "maroon", "mauve", "mint", "mocha", "multicolor", "mustard",
    "natural", "navy", "nude", "olive", "orange", "peach", "pink", "plum", "purple", "red", "rose", "rust",
    "sand", "silver", "tan", "taupe", "teal", "turquoise", "violet", "walnut", "white", "wine", "yellow"
)

_STOP = frozenset(
    (
        "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "best", "by", "can", "de", "for",
        "from", "has", "have", "high", "in", "inch", "into", "is", "it", "its", "la", "made", "new", "no",
        "not", "of", "on", "one", "or", "our", "pack", "per", "piece", "pieces", "plus", "pro", "set", "so",
        "that", "the", "this", "to", "up", "use", "very", "with", "you", "your", "ft", "oz", "fl", "lb",
        "count", "ounce", "ounces", "pound", "pounds", "inches", "mm", "cm", "ml", "x", "xl"
    )
)
_ADJECTIVES = frozenset(
    (
        "black", "white", "red", "blue", "green", "pink", "purple", "grey", "gray", "brown", "gold", "silver",
        "small", "large", "medium", "big", "mini", "long", "short", "light", "dark", "soft", "hard", "easy",
        "natural", "organic", "premium", "portable", "adjustable", "lightweight", "waterproof", "wireless",
        "professional", "classic", "modern", "original", "ultra", "extra", "super", "heavy", "duty", "free"
    )
)
_WORD = re.compile(r"[a-z][a-z']+")


def _similar(a: str, b: str) -> bool:
    """thefuzz's ``token_set_ratio`` (lower-cased, punctuation stripped, rounded to an int) above 85."""
    return round(fuzz.token_set_ratio(a, b, processor=default_process)) > FUZZY_THRESHOLD


def normalize_color(text: str) -> str:
    """The first known colour word contained in ``text``, else ``text`` unchanged (WebShop's ``normalize_color``)."""
    for color in _COLORS:
        if color in text:
            return color
    return text


def title_nouns(title: str) -> list[str]:
    """Content words of a title: the offline stand-in for WebShop's spaCy NOUN/PROPN filter (see module doc)."""
    return [w for w in _WORD.findall(title.lower()) if w not in _STOP and w not in _ADJECTIVES]


@dataclass(frozen=True, slots=True)
class RewardInfo:
    """The parts of one purchase's reward (WebShop's ``verbose`` info)."""

    reward: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    r_att: float
    n_attr_matches: int
    r_option: float | None
    n_option_matches: int
    r_price: bool


def _text_fields(product: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        str(product.get("Title", "")).lower(),
        " ".join(product.get("BulletPoints") or []).lower(),
        str(product.get("Description", "")).lower(),
    )


def type_reward(product: Mapping[str, Any], goal: Mapping[str, Any]) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)`` of buying ``product`` for ``goal``."""
    query_match = product["query"] == goal["query"]
    bought_path = {x.strip() for x in str(product["product_category"]).split("›")}
    goal_path = {x.strip() for x in str(goal["product_category"]).split("›")}
    category_match = len(bought_path & goal_path) >= 2
    bought = set(title_nouns(str(product["name"])))
    desired = title_nouns(str(goal["name"]))
    title_score = 0.2 if not desired else len(bought & set(desired)) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_reward(product: Mapping[str, Any], goal_attributes: Sequence[str]) -> tuple[float, int]:
    """``(fraction, count)`` of goal attributes the product has (fuzzy attribute match, else text substring)."""
    title, bullets, description = _text_fields(product)
    n = 0
    for g_attr in goal_attributes:
        fuzzy = any(_similar(p_attr, g_attr) for p_attr in product.get("Attributes", ()))
        n += fuzzy or g_attr in title or g_attr in bullets or g_attr in description
    return (n / len(goal_attributes) if goal_attributes else 0.0), n


def option_reward(
    product: Mapping[str, Any], goal_options: Sequence[str], bought_options: Mapping[str, str]
) -> tuple[float | None, int]:
    """``(fraction or None, count)`` of purchased option values that match a goal option value."""
    goal_values = [normalize_color(v) for v in goal_options]
    title, bullets, description = _text_fields(product)
    n = 0
    for key, raw in bought_options.items():
        value = normalize_color(raw)
        if key.lower() in EXACT_MATCH_OPTIONS:
            matched = value in goal_values
        else:
            matched = any(_similar(g, value) for g in goal_values)
        if matched or value in title or value in bullets or value in description:
            n += 1
    return (n / len(goal_values) if goal_values else None), n


def get_reward(
    product: Mapping[str, Any], goal: Mapping[str, Any], price: float, options: Mapping[str, str]
) -> RewardInfo:
    """The reward of buying ``product`` at ``price`` with ``options`` for ``goal`` (a WebShop goal dict).

    :param product: the purchased product (keys ``query``, ``product_category``, ``name``, ``Title``,
        ``BulletPoints``, ``Description``, ``Attributes``).
    :param goal: ``query``, ``product_category``, ``name``, ``attributes``, ``goal_options`` (dict or list),
        ``price_upper``.
    :param price: the price paid.
    :param options: the selected options, option name -> value.
    """
    goal_options = goal["goal_options"]
    goal_values = list(goal_options.values()) if isinstance(goal_options, Mapping) else list(goal_options)
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    r_price = bool(price <= goal["price_upper"])
    r_att, n_att = attribute_reward(product, goal["attributes"])
    r_opt, n_opt = option_reward(product, goal_values, options)
    total = (n_att + n_opt + r_price) / (len(goal["attributes"]) + len(goal_values) + 1) * r_type
    return RewardInfo(
        reward=float(total),
        r_type=r_type,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
        r_att=r_att,
        n_attr_matches=n_att,
        r_option=r_opt,
        n_option_matches=n_opt,
        r_price=r_price,
    )
