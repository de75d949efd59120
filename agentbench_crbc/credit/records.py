"""Rollout records from JSON Lines (``read_jsonl``) and method options from ``KEY=VALUE`` text (``parse_option``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RecordError
from ..io import json_text, read_text, text_lines
from .batch import validate_record

__all__ = ["parse_option", "read_jsonl"]


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON when it parses (``0.98``, ``true``, ``null``), else kept a string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"option {text!r} must look like KEY=VALUE")
    try:
        parsed: Any = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    if isinstance(parsed, float) and not np.isfinite(parsed):  # json accepts Infinity/NaN
        parsed = value
    return key, parsed


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate rollout records, one JSON object per line (blank lines skipped); ``-`` reads stdin.

    Any problem raises :class:`RecordError` naming the file, the line and what is wrong.
    """
    if str(path) == "-":
        path, text = "<stdin>", sys.stdin.read()
    else:
        text = read_text(path)
    records = []
    for lineno, line in enumerate(text_lines(text), 1):  # "\n" only: U+2028 may sit inside a string
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise RecordError(f"{where}: not valid JSON ({exc})") from None
        except RecursionError:
            raise RecordError(f"{where}: JSON nested too deeply") from None
        if "\\ud" in line.lower():  # an escaped surrogate: must pair up to a valid character
            try:
                json_text(rec, ensure_ascii=False, where=where).encode("utf-8")
            except UnicodeEncodeError:
                raise RecordError(f"{where}: a string holds a lone surrogate escape (\\ud800-\\udfff), which "
                                  "is not valid Unicode") from None
        validate_record(rec, where)
        records.append(rec)
    if not records:
        raise RecordError(f"{path}: no records; the file is empty")
    return records
