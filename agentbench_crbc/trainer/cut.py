"""A run its time cap (``max_minutes``) stopped before its planned updates: its records, results and last lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import atomic_write_text, json_text, read_text, text_lines

__all__ = ["cut_lines", "mark_records", "record_row"]


def record_row(line: str, path: Path) -> dict[str, Any]:
    """One row of ``eval/records.jsonl`` as a dict; a damaged row is one line naming the file."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        row = None
    if not isinstance(row, dict):
        raise ConfigError(f"{path}: a line is not a JSON record; repair or move the file and run again")
    return row


def mark_records(run_dir: str | Path, *, budget: int, cut: bool) -> int:
    """Set ``budget`` and ``cut`` on the RL rows of ``run_dir/eval/records.jsonl`` (a cut run's rows carry the updates
    it did, so no board files it beside runs of its planned budget; a resumed run that finished gets its planned
    budget back); returns the rows changed. Imitation and prompting rows (``budget`` null) stay as they are."""
    path = Path(run_dir) / "eval" / "records.jsonl"
    if not path.exists():
        return 0
    rows: list[Any] = []
    changed = 0
    for line in text_lines(read_text(path, error=ConfigError)):
        if not line.strip():
            continue
        row = record_row(line, path)
        if row.get("kind") == "rl" and row.get("budget") is not None and \
                (row.get("budget"), row.get("cut", False)) != (budget, cut):
            row = {**row, "budget": budget, "cut": cut}
            changed += 1
        rows.append(row)
    if changed:
        atomic_write_text(path, "".join(json_text(r) + "\n" for r in rows))
    return changed


def cut_lines(*, done: int, planned: int, minutes: float, run_dir: str | Path) -> list[str]:
    """The summary's last lines for a cut run: that it was cut, where, and how to finish it."""
    return [f"CUT SHORT: the time cap (max_minutes={minutes:g}) stopped RL after update {done} of {planned}; the "
            f"results above are of {done} updates, not {planned} (results.json: \"cut\": true; its leaderboard "
            "records carry budget "
            f"{done} and cut = true).",
            f"  finish it with `abc train --resume {run_dir} --set max_minutes=0`; on a busy machine see README.md "
            "(the CPU default)"]
