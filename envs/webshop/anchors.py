"""WebShop anchor extractors, selectable by name: the hashable state key used for step-level credit grouping."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from agentbench_crbc.errors import DuplicateNameError, UnknownNameError

if TYPE_CHECKING:
    from .env import WebShopEnv

__all__ = ["ANCHOR_EXTRACTORS", "get_anchor_extractor", "register_anchor_extractor"]

AnchorExtractor = Callable[["WebShopEnv"], Hashable]


def _page(env: WebShopEnv) -> Hashable:
    """The formatted page the agent sees (the paper's anchor: equal observations are one state)."""
    return env.page.text


def _state(env: WebShopEnv) -> Hashable:
    """The canonical page state ``(page kind, asin, keywords, page number, sub page, sorted options)``.

    It ignores the session id, so rollouts of one group that reach the same page share the anchor.
    """
    return env.page_state


#: name -> extractor ``fn(env) -> hashable``; add your own with :func:`register_anchor_extractor`.
ANCHOR_EXTRACTORS: dict[str, AnchorExtractor] = {"page": _page, "state": _state}


def register_anchor_extractor(name: str, fn: AnchorExtractor) -> None:
    """Make ``fn(env) -> hashable`` selectable as ``gymnasium.make("abc/WebShop-v0", anchor=name)``."""
    if name in ANCHOR_EXTRACTORS:
        raise DuplicateNameError(f"a WebShop anchor extractor named {name!r} exists; pick another name")
    ANCHOR_EXTRACTORS[name] = fn


def get_anchor_extractor(name: str) -> AnchorExtractor:
    """The extractor registered as ``name``."""
    try:
        return ANCHOR_EXTRACTORS[name]
    except KeyError:
        raise UnknownNameError(f"unknown WebShop anchor {name!r}; choose one of "
                               f"{', '.join(sorted(ANCHOR_EXTRACTORS))}") from None
