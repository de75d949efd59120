"""The one entry to the credit layer: ``assign(method, records, **options)``, used by the trainer and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .batch import StepBatch, validate_record
from .errors import CreditError, RecordError
from .host import CreditMethod, Host, get_host
from .io import read_records_text
from .types import Group

__all__ = ["assign", "assign_batch", "explain", "parse_option", "read_jsonl"]


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
    """Read and validate rollout records, one JSON object per line (blank lines skipped).

    Any problem raises :class:`RecordError` naming the file, the line and what is wrong.
    """
    path = Path(path)
    text = read_records_text(path)
    records = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        validate_record(rec, f"{path}:{lineno}")
        records.append(rec)
    if not records:
        raise RecordError(f"{path}: no records; the file is empty")
    return records


def _run(method: CreditMethod, batch: StepBatch, options: Mapping[str, Any]) -> np.ndarray:
    if method.batched:
        flat = np.asarray(method.fn(batch, **options), dtype=np.float64)
        if flat.shape != (batch.n_steps,):
            raise CreditError(f"{method.name} ({method.plugin}) returned shape {flat.shape}, "
                              f"expected ({batch.n_steps},): one value per step")
    else:
        flat = np.empty(batch.n_steps)
        for group, idx in zip(batch.groups(), batch.group_trajectories(), strict=True):
            arrays = list(method.fn(group, **options))
            if len(arrays) != len(idx):
                raise CreditError(f"{method.name} ({method.plugin}) returned {len(arrays)} arrays for group "
                                  f"{group.task_id!r} of {len(idx)} trajectories")
            for i, arr in zip(idx.tolist(), arrays, strict=True):
                a = np.asarray(arr, dtype=np.float64)
                if a.shape != (int(batch.traj_len[i]),):
                    raise CreditError(f"{method.name} ({method.plugin}) returned shape {a.shape} for a "
                                      f"trajectory of {int(batch.traj_len[i])} steps in group {group.task_id!r}")
                s = int(batch.traj_start[i])
                flat[s:s + len(a)] = a
    if not np.isfinite(flat).all():
        raise CreditError(f"{method.name} ({method.plugin}) produced non-finite credit; please report this input")
    return flat


def assign_batch(method: str, batch: StepBatch, *, host: Host | None = None, **options: Any) -> np.ndarray:
    """Per-step credit (flat, ``batch.n_steps`` floats) of ``method`` on an already-built :class:`StepBatch`."""
    m = (host or get_host()).credit_method(method)
    return _run(m, batch, m.check_options(options))


def assign(method: str, records: Sequence[Mapping[str, Any]] | Sequence[Group], *, host: Host | None = None,
           **options: Any) -> list[np.ndarray]:
    """Credit of every step: one float64 array per trajectory, in input order.

    :param method: a registered credit method name (``abc plugins`` lists them).
    :param records: credit-contract dicts (``group``, ``steps``, ``success``...) or :class:`Group` objects.
    :param options: the method's options, e.g. ``beta=0.98, depth=None`` for ``crbc``.
    """
    m = (host or get_host()).credit_method(method)
    opts = m.check_options(options)
    batch = StepBatch.from_records(records)
    return batch.split(_run(m, batch, opts))


def explain(records: Iterable[Mapping[str, Any]] | Sequence[Group], **options: Any) -> list[Any]:
    """CRBC diagnostics per group (V, Q, sigma, gate, evidence coverage by depth); see ``plugins.crbc.explain``."""
    from agentbench_crbc.plugins import crbc as _crbc

    get_host().credit_method("crbc").check_options(options)
    return _crbc.explain(StepBatch.from_records(records), **options)
