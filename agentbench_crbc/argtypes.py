"""Bounded command-line numbers: argparse types that refuse a value outside its range before any work starts."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from .host import Bound

__all__ = ["bounded_float", "bounded_int"]


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def _parser(convert: Callable[[str], float], allows: Callable[[float], bool], want: str, kind: str,
            name: str) -> Callable[[str], Any]:
    """An argparse ``type`` that converts with ``convert`` and refuses what ``allows`` does not, saying ``want``."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {kind}; give {want}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a finite number; give {want}")
        if not allows(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; give {want}")
        return value

    parse.__name__ = name  # argparse names the type in its own messages
    return parse


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in ``[lo, hi]`` (``1e12`` or ``5.0`` are not whole numbers as written)."""
    bound = Bound(lo, hi, integer=True)
    return _parser(int, bound.allows, f"an integer in [{lo}, {hi}]", "a whole number", "integer")


def bounded_float(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); nan and inf never."""
    bound = Bound(lo, hi, lo_open=lo_open)
    return _parser(float, bound.allows, str(bound), "a number", "number")
