"""Dense ids for composite step keys (pairs of ids), shared by the methods that group steps by histories."""

from __future__ import annotations

import numpy as np

__all__ = ["intern_pairs"]


def intern_pairs(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids ``0..n-1`` of the pairs (left, right) of non-negative ints (``left`` may be -1), and n."""
    span = int(right.max()) + 1 if len(right) else 1
    uniq, ids = np.unique((left.astype(np.int64) + 1) * span + right, return_inverse=True)
    return ids.astype(np.int64, copy=False), len(uniq)
