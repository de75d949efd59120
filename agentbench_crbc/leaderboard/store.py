"""Where leaderboard records live: the checkout's store, or the shipped reported rows plus a user's own store."""

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
    """Where ``add`` and ``import-reported`` write without ``--records``: the checkout's store when the working
    folder has one, else :func:`user_store`."""
    return CHECKOUT_STORE if CHECKOUT_STORE.is_file() else user_store()


def default_records() -> tuple[list[RunRecord], str]:
    """What ``show`` and ``render`` read without ``--records``, and a description of it: the checkout's store, else
    the shipped reported rows with the user's store on top (a user's row of a shipped row's key must equal it: the
    paper's numbers are never replaced silently)."""
    if CHECKOUT_STORE.is_file():
        return read_records(CHECKOUT_STORE), str(CHECKOUT_STORE)
    rows = {record_key(r): r for r in read_records(REPORTED_DATA)}
    mine = user_store()
    for r in read_records(mine, missing_ok=True):
        shipped = rows.get(record_key(r))
        if shipped is not None and shipped != r:
            raise RecordError(f"{mine}: a row for {r.env}/{r.model}/{r.method}/{r.subtask} has the key of a shipped "
                              "reported row and other numbers; the paper's rows are not replaced silently: remove "
                              "the row, or read your rows alone with --records")
        rows[record_key(r)] = r
    where = f"the shipped reported rows and {mine}" if mine.is_file() else "the shipped reported rows"
    return list(rows.values()), where


def check_shipped(store: str | Path, records: Sequence[RunRecord], origin: str) -> None:
    """Refuse, before anything is written, a record for the user's store (which ``show`` reads with the shipped
    reported rows) that has a shipped row's key and other numbers: every later ``show`` would fail on it."""
    if resolved(Path(store)) != resolved(user_store()):
        return
    shipped = {record_key(r): r for r in read_records(REPORTED_DATA)}
    for r in records:
        mine = shipped.get(record_key(r))
        if mine is not None and mine != r:
            raise RecordError(f"{origin}: a row for {r.env}/{r.model}/{r.method}/{r.subtask} (update {r.update}) "
                              "has the key of a shipped paper row and other numbers; the paper's rows are never "
                              "replaced (drop the row, or keep your rows in their own store with --records)")
