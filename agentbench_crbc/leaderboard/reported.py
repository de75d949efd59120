"""Import published results (the CRBC paper's Tables 1 and 3) as ``source="reported"`` leaderboard records."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import re
from pathlib import Path

from ..errors import RecordError
from ..io import read_text, text_lines
from .records import RunRecord

__all__ = ["CRBC_PAPER_CITATION", "METHOD_KEYS", "model_scale", "read_reported_csv"]

#: The citation every row of ``crbc_paper_reported.csv`` carries.
CRBC_PAPER_CITATION = "Ren et al., Cross-Rollout Bellman Closure, arXiv 2609.35082, Tables 1 and 3"

#: Paper method names -> leaderboard method keys (credit methods use their registered plugin names).
METHOD_KEYS = {
    "GPT-4o": "gpt-4o",
    "Gemini-2.5-Pro": "gemini-2.5-pro",
    "Qwen2.5": "prompt",
    "Qwen2.5-VL": "prompt",
    "ReAct": "react",
    "Reflexion": "reflexion",
    "PPO": "ppo",
    "RLOO": "rloo",
    "GRPO": "grpo",
    "GiGPO": "gigpo",
    "GraphGPO": "graphgpo",
    "HGPO": "hgpo",
    "CRBC": "crbc",
}

#: Updates behind the paper's RL rows (150 updates, the CRBC paper's training setting); prompting rows are update 0.
PAPER_UPDATES = 150

_SCALE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?[BM])(?![A-Za-z])")
_COLUMNS = ("env", "model", "type", "method", "subtask", "metric", "mean", "std", "seeds")


def model_scale(model: str) -> str:
    """The parameter-count label in a model name (``Qwen2.5-VL-3B-Instruct`` -> ``3B``), else ``api``."""
    m = _SCALE.search(model)
    return m.group(1) if m else "api"


def _float(text: str, where: str, name: str) -> float | None:
    if text.strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise RecordError(f"{where}: {name} {text!r} is not a number") from None


def read_reported_csv(path: str | Path, *, citation: str = CRBC_PAPER_CITATION, date: str | None = None,
                      version: str | None = None) -> list[RunRecord]:
    """Records from a reported-results CSV (``#`` comment lines, then ``env,model,type,method,subtask,metric,
    mean,std,seeds``; metric ``success_pct`` or ``score``); the two metrics of one row merge into one record.

    :param citation: stored on every record.
    :param date: import date stamped on the rows (default today).
    """
    from .. import __version__

    path = Path(path)
    lines = text_lines(read_text(path, error=RecordError))  # "\n" only, as csv reads it (not U+2028 and kin)
    numbered = [(i, line) for i, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise RecordError(f"{path}: no rows")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(line for _, line in numbered))))
    except csv.Error as exc:  # e.g. a field over csv's 131,072-character limit
        raise RecordError(f"{path}: not a readable CSV ({exc})") from None
    if len(rows) != len(numbered):
        raise RecordError(f"{path}: a quoted field spans lines; each row must be one line")
    reader = iter(rows)
    header = next(reader)
    if tuple(h.strip() for h in header) != _COLUMNS:
        raise RecordError(f"{path}:{numbered[0][0]}: header must be {','.join(_COLUMNS)}, got {','.join(header)}")
    merged: dict[tuple[str, ...], dict] = {}
    for (lineno, _), row in zip(numbered[1:], reader, strict=True):
        where = f"{path}:{lineno}"
        if len(row) != len(_COLUMNS):
            raise RecordError(f"{where}: expected {len(_COLUMNS)} columns, got {len(row)}")
        env, model, kind, method, subtask, metric, mean_t, std_t, seeds_t = (c.strip() for c in row)
        mean = _float(mean_t, where, "mean")
        std = _float(std_t, where, "std")
        if mean is None:
            raise RecordError(f"{where}: mean is empty")
        seeds = None
        if seeds_t:
            try:
                seeds = int(seeds_t)
            except ValueError:
                raise RecordError(f"{where}: seeds {seeds_t!r} is not an integer") from None
        if method not in METHOD_KEYS:
            raise RecordError(f"{where}: unknown method {method!r}; known: {', '.join(METHOD_KEYS)}")
        key = (env, model, kind, METHOD_KEYS[method], subtask)
        row_data = merged.setdefault(key, {"where": where, "n_seeds": seeds})
        if metric == "success_pct":
            fields = ("success", "success_std", 100.0)
        elif metric == "score":
            fields = ("score", "score_std", 1.0)
        else:
            raise RecordError(f"{where}: metric {metric!r} must be success_pct or score")
        if fields[0] in row_data:
            raise RecordError(f"{where}: duplicate {metric} for {', '.join(key)} (first at {row_data['where']})")
        row_data[fields[0]] = round(mean / fields[2], 10)  # 82.81 / 100 -> 0.8281, not 0.8281000000000001
        row_data[fields[1]] = None if std is None else round(std / fields[2], 10)
    today = date or _dt.date.today().isoformat()
    out = []
    for (env, model, kind, method, subtask), d in merged.items():
        try:
            out.append(RunRecord(
                env=env, subtask=subtask, model=model, model_scale=model_scale(model), method=method, seed=None,
                update=PAPER_UPDATES if kind == "rl" else 0, success=d.get("success"), score=d.get("score"),
                n_episodes=None, config_hash=None, package_version=version or __version__, date=today,
                source="reported", citation=citation, kind=kind, success_std=d.get("success_std"),
                score_std=d.get("score_std"), n_seeds=d["n_seeds"]))
        except RecordError as exc:
            raise RecordError(f"{d['where']}: {exc}") from None
    return out
