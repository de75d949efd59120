"""WebShop anchor extractors, selectable by name: the hashable state key used for step-level credit grouping."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

from agentbench_crbc.anchors import AnchorRegistry

if TYPE_CHECKING:
    from .env import WebShopEnv

__all__ = ["ANCHOR_EXTRACTORS", "get_anchor_extractor", "register_anchor_extractor"]



def _page(env: WebShopEnv) -> Hashable:
    """The formatted page the agent sees (the paper's anchor: equal observations are one state)."""
    return env.page.text


def _state(env: WebShopEnv) -> Hashable:
    """The canonical page state ``(page kind, asin, keywords, page number, sub page, sorted options)``.

    It ignores the session id, so rollouts of one group that reach the same page share the anchor.
    """
    return env.page_state


#: name -> extractor ``fn(env) -> hashable``; add your own with :func:`register_anchor_extractor`.
ANCHOR_EXTRACTORS = AnchorRegistry("WebShop", {"page": _page, "state": _state})
register_anchor_extractor = ANCHOR_EXTRACTORS.register
get_anchor_extractor = ANCHOR_EXTRACTORS.extractor
