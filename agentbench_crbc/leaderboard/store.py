"""Where leaderboard records live: the checkout's committed store (else the shipped reported rows) under a user's own
store, the only one ``abc leaderboard add`` writes by default."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import RecordError
from ..io import resolved
from .records import RunRecord, read_records, record_key

__all__ = ["CHECKOUT_STORE", "REPORTED_DATA", "check_shipped", "default_records", "default_store", "user_store"]

#: The committed store of a source checkout, relative to the working folder (the repository root).
CHECKOUT_STORE = Path("leaderboards") / "records.jsonl"
#: The paper's reported rows, shipped in the package (``abc leaderboard show`` works after ``pip install``).
REPORTED_DATA = Path(__file__).resolve().parent / "data" / "reported.jsonl"


def user_store() -> Path:
    """A user's own store: ``$XDG_DATA_HOME/agentbench-crbc/records.jsonl`` (``~/.local/share/...`` when
    ``XDG_DATA_HOME`` is unset or not absolute, as the XDG base-directory spec says)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "agentbench-crbc" / "records.jsonl"


def default_store() -> Path:
    """Where ``add`` and ``import-reported`` write without ``--records``: always :func:`user_store`, in a checkout
    too (the committed ``leaderboards/records.jsonl`` changes only when asked by name, ``--records``)."""
    return user_store()


def default_records() -> tuple[list[RunRecord], str]:
    """What ``show`` and ``render`` read without ``--records``, and a description of it: the checkout's committed
    store (else the shipped reported rows), with the user's store on top (a user's row of a committed or shipped
    row's key must equal it: those rows are never replaced silently)."""
    base = CHECKOUT_STORE if CHECKOUT_STORE.is_file() else REPORTED_DATA
    rows = {record_key(r): r for r in read_records(base)}
    name = str(CHECKOUT_STORE) if base == CHECKOUT_STORE else "the shipped reported rows"
    mine = user_store()
    for r in read_records(mine, missing_ok=True):
        shipped = rows.get(record_key(r))
        if shipped is not None and shipped != r:
            raise RecordError(f"{mine}: a row for {r.env}/{r.model}/{r.method}/{r.subtask} has the key of a row of "
                              f"{name} and other numbers; those rows are not replaced silently: remove the row, or "
                              "read your rows alone with --records")
        rows[record_key(r)] = r
    return list(rows.values()), (f"{name} and {mine}" if mine.is_file() else name)


def check_shipped(store: str | Path, records: Sequence[RunRecord], origin: str) -> None:
    """Refuse, before anything is written, a record for the user's store (which ``show`` reads with the shipped
    reported rows, or in a checkout with its committed store) that has such a row's key and other numbers: every
    later ``show`` would fail on it."""
    if resolved(Path(store)) != resolved(user_store()):
        return
    bases = [(REPORTED_DATA, "a shipped paper row", "the paper's rows")]
    if CHECKOUT_STORE.is_file():  # show in this checkout reads the committed store under the user's
        bases.append((CHECKOUT_STORE, f"a row of {CHECKOUT_STORE}", "committed rows"))
    for base, what, whose in bases:
        rows = {record_key(r): r for r in read_records(base)}
        for r in records:
            mine = rows.get(record_key(r))
            if mine is not None and mine != r:
                raise RecordError(f"{origin}: a row for {r.env}/{r.model}/{r.method}/{r.subtask} (update "
                                  f"{r.update}) has the key of {what} and other numbers; {whose} are never "
                                  "replaced (drop the row, or keep your rows in their own store with --records)")
