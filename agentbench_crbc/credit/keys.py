"""Step keys: the one identity of an anchor (``canonical_anchor``, used in process and for JSON Lines alike) and
dense ids for composite step keys (pairs of ids), shared by the methods that group steps by histories."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from ..io import json_text

__all__ = ["canonical_anchor", "intern_pairs"]

_JSON_SCALARS = (int, float, bool, type(None))


def _plain(x: Any) -> Any:
    """numpy scalars and arrays as the Python values they hold (``json.dumps``'s ``default`` hook)."""
    if isinstance(x, (np.generic, np.ndarray)):
        return x.tolist() if isinstance(x, np.ndarray) else x.item()
    raise TypeError(f"Object of type {type(x).__name__} is not JSON serializable")


def canonical_anchor(anchor: Any) -> Hashable:
    """The identity of an anchor, the same whether it comes from a rollout in process or from a JSON Lines record:
    strings as they are, anything else as its canonical JSON text (``("json", text)``).

    ``[1, 2]`` and ``(1, 2)`` give one key, ``[1, 2]`` and ``[2, 1]`` two, and ``"[1,2]"`` (a string) a third.
    Anchors compare as JSON does: numpy scalars and arrays (anywhere inside) count as the Python values they hold, so
    ``np.int64(1)`` and ``1`` are one anchor, while ``True`` and ``1``, ``1.0`` and ``1``, ``-0.0`` and ``0.0``,
    ``np.float64(2.0)`` and ``2`` or ``np.False_`` and ``0`` stay two (JSON writes them differently), in the trainer
    as in ``abc credit``. A hashable that is not JSON (only possible in process) is its own key.
    """
    if type(anchor) is str:
        return anchor
    if isinstance(anchor, (np.generic, np.ndarray)):
        anchor = _plain(anchor)
        if type(anchor) is str:
            return anchor
    if isinstance(anchor, (list, dict, tuple, *_JSON_SCALARS)):
        try:
            text = json_text(anchor, sort_keys=True, separators=(",", ":"), default=_plain)
        except ValueError as exc:  # json_text's one line: a NaN, a type JSON has no form for, too deep
            raise ValueError(f"anchor is not plain JSON ({exc})") from None
        return ("json", text)
    if isinstance(anchor, Hashable):
        return anchor
    raise ValueError(f"anchor of type {type(anchor).__name__} is neither JSON nor hashable")


def intern_pairs(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids ``0..n-1`` of the pairs (left, right) of non-negative ints (``left`` may be -1), and n."""
    span = int(right.max()) + 1 if len(right) else 1
    uniq, ids = np.unique((left.astype(np.int64) + 1) * span + right, return_inverse=True)
    return ids.astype(np.int64, copy=False), len(uniq)
