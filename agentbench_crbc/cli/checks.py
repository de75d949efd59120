"""Bounded command-line numbers: argparse types that refuse a value outside its range before any work starts."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from ..host import Bound

__all__ = ["bounded_float", "bounded_int"]


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in ``[lo, hi]`` (``1e12`` or ``5.0`` are not whole numbers as written)."""
    bound, want = Bound(lo, hi, integer=True), f"an integer in [{lo}, {hi}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number; give {want}") from None
        if not bound.allows(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; give {want}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def bounded_float(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); nan and inf never."""
    bound = Bound(lo, hi, lo_open=lo_open)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number; give {bound}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a finite number; give {bound}")
        if not bound.allows(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; give {bound}")
        return value

    parse.__name__ = "number"
    return parse
