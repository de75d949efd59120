"""Sokoban anchor extractors, selectable by name: the hashable state key for step-level credit grouping."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from typing import TYPE_CHECKING

from agentbench_crbc.anchors import AnchorRegistry

if TYPE_CHECKING:
    from .env import SokobanEnv

__all__ = ["ANCHOR_EXTRACTORS", "get_anchor_extractor", "register_anchor_extractor"]



def _state(env: SokobanEnv) -> Hashable:
    """Player and sorted box cells (row-major indices): equal exactly when the positions are equal."""
    return (env.player, tuple(sorted(env.boxes)))


def _pixels(env: SokobanEnv) -> Hashable:
    """A BLAKE2b digest of the RGB frame (the paper's anchor for the visual task); stable across processes."""
    return hashlib.blake2b(env.rgb_frame().tobytes(), digest_size=16).hexdigest()


def _text(env: SokobanEnv) -> Hashable:
    """The text grid itself."""
    return env.text


#: name -> extractor ``fn(env) -> hashable``; add your own with :func:`register_anchor_extractor`.
ANCHOR_EXTRACTORS = AnchorRegistry("Sokoban", {"state": _state, "pixels": _pixels, "text": _text})
register_anchor_extractor = ANCHOR_EXTRACTORS.register
get_anchor_extractor = ANCHOR_EXTRACTORS.extractor
