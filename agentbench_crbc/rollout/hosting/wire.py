"""The JSON form of env answers across machines: tuples, arrays and numpy scalars survive a round trip exactly."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import EnvError

__all__ = ["MAX_DEPTH", "decode", "encode", "error_line"]

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


#: Deepest nesting :func:`decode` takes (an env's info is a few levels deep; 900 levels would exhaust the stack).
MAX_DEPTH = 64
#: Most dimensions of a decoded array.
MAX_NDIM = 32
_ARRAY_KINDS = "biufc"  # bool, integer, float, complex: never objects, strings or structured records


def decode(obj: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """The inverse of :func:`encode`; a malformed value (a tuple that is no list, an array whose dtype, shape and
    bytes disagree, a float marker that is no number text, nesting past ``max_depth``) raises
    :class:`~agentbench_crbc.errors.EnvError` saying what is wrong."""
    return _decode(obj, max_depth)


def _decode(obj: Any, depth: int) -> Any:
    if not isinstance(obj, (list, dict)):
        return obj
    if depth <= 0:
        raise EnvError(f"the answer is nested more than {MAX_DEPTH} levels deep")
    if isinstance(obj, list):
        return [_decode(v, depth - 1) for v in obj]
    if len(obj) == 1:
        if _TUPLE in obj:
            items = obj[_TUPLE]
            if not isinstance(items, list):
                raise EnvError(f"{_TUPLE} must hold a list, got {type(items).__name__}")
            return tuple(_decode(v, depth - 1) for v in items)
        if _ARRAY in obj:
            return _array(obj[_ARRAY])
        if _FLOAT in obj:
            text = obj[_FLOAT]
            if not isinstance(text, str) or len(text) > 32:
                raise EnvError(f"{_FLOAT} must hold a number's text such as 'nan', got {type(text).__name__}")
            try:
                return float(text)
            except ValueError:
                raise EnvError(f"{_FLOAT} must hold a number's text such as 'nan', got {text[:32]!r}") from None
    return {k: _decode(v, depth - 1) for k, v in obj.items()}


def _array(spec: Any) -> np.ndarray:
    if not (isinstance(spec, list) and len(spec) == 3):
        raise EnvError(f"{_ARRAY} must hold [dtype, shape, base64 bytes]")
    dtype_s, shape, data = spec
    if not isinstance(dtype_s, str) or len(dtype_s) > 8:
        raise EnvError(f"{_ARRAY}: the dtype must be a short text such as '|u1'")
    try:
        dtype = np.dtype(dtype_s)
    except (TypeError, ValueError):
        raise EnvError(f"{_ARRAY}: {dtype_s!r} is not a numpy dtype") from None
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise EnvError(f"{_ARRAY}: dtype {dtype_s!r} is not a number or bool type")
    if not (isinstance(shape, list) and len(shape) <= MAX_NDIM
            and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40 for n in shape)):
        raise EnvError(f"{_ARRAY}: the shape must be a list of at most {MAX_NDIM} non-negative integers")
    if not isinstance(data, str):
        raise EnvError(f"{_ARRAY}: the bytes must be base64 text")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise EnvError(f"{_ARRAY}: the bytes are not valid base64") from None
    size = math.prod(shape)
    if size * dtype.itemsize != len(raw):
        raise EnvError(f"{_ARRAY}: {len(raw)} bytes do not make an array of shape {tuple(shape)[:MAX_NDIM]} "
                       f"and dtype {dtype_s}")
    try:
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except ValueError as exc:  # e.g. a zero-size array with dimensions numpy cannot index
        raise EnvError(f"{_ARRAY}: {exc}") from None


def error_line(text: str) -> str:
    """The last non-empty line of a traceback (what a remote client is told; frames and paths stay here)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "error"
