"""The JSON form of env answers across machines: tuples, arrays and numpy scalars survive a round trip exactly."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["decode", "encode", "error_line"]

_TUPLE, _ARRAY, _FLOAT = "__tuple__", "__ndarray__", "__float__"


def encode(obj: Any) -> Any:
    """``obj`` as JSON values: a tuple becomes ``{"__tuple__": [...]}``, an array ``{"__ndarray__": [dtype, shape,
    base64]}``, a numpy scalar its Python value, a non-finite float ``{"__float__": "nan"}``; anything else that
    JSON cannot hold becomes its ``repr`` (as the trainer's anchors do)."""
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {_FLOAT: repr(obj)}
    if isinstance(obj, tuple):
        return {_TUPLE: [encode(v) for v in obj]}
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {_ARRAY: [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode("ascii")]}
    if isinstance(obj, np.generic):
        return encode(obj.item())
    return repr(obj)


def decode(obj: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if isinstance(obj, dict):
        if len(obj) == 1:
            if _TUPLE in obj:
                return tuple(decode(v) for v in obj[_TUPLE])
            if _ARRAY in obj:
                dtype, shape, data = obj[_ARRAY]
                return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()
            if _FLOAT in obj:
                return float(obj[_FLOAT])
        return {k: decode(v) for k, v in obj.items()}
    return obj


def error_line(text: str) -> str:
    """The last non-empty line of a traceback (what a remote client is told; frames and paths stay here)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "error"
