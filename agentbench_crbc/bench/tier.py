"""The rule that picks a benchmark tier from probe cells: dead held-out levels, eligibility, separation per CPU hour.

Written before any probe cell finished (docs/benchmarks.md, "The regime probe"); it never looks at which method
leads, only at how far apart the methods of a cell are, how many held-out levels can carry signal, and the cost:

1. A held-out level is *dead* in a cell when its success after RL, averaged over the cell's seeds, is at or below
   ``LOW`` for every method or at or above ``HIGH`` for every method. A cell is *eligible* when at most
   ``MAX_DEAD`` of its held-out levels are dead and some method's mean gain of RL is at least ``MIN_GAIN``.
2. The *separation* of a cell is the largest absolute mean paired difference in gain of RL (paired by seed) between
   any two of its methods; its *cost* the mean CPU hours of its runs.
3. The tier is the eligible cell with the largest separation per CPU hour; within ``TIE`` of the best, the cheaper.

Rows are result lines of ``benchmarks/update_ablation.py`` (``method``, ``seed``, per-level ``before`` / ``after``
success, ``cpu_s``; older lines without it: ``wall_s``, a one-thread run's wall time beside one other run). numpy
only.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .stats import run_stats

__all__ = ["HIGH", "LOW", "MAX_DEAD", "MIN_GAIN", "TIE", "CellVerdict", "choose_tier", "dead_levels", "judge_cell"]

LOW, HIGH = 0.05, 0.95
MAX_DEAD = 0.10
MIN_GAIN = 0.10
TIE = 0.10


@dataclass(frozen=True)
class CellVerdict:
    """One probe cell judged by the rule."""

    cell: str
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    """Seeds every method of the cell ran (the paired set)."""
    levels: int
    dead: int
    gains: Mapping[str, float]
    """Mean gain of RL per method over the paired seeds (success, 0-1)."""
    separation: float
    """Largest absolute mean paired gain difference between two methods (success, 0-1)."""
    cpu_hours: float
    eligible: bool

    @property
    def per_cpu_hour(self) -> float:
        return self.separation / self.cpu_hours if self.cpu_hours > 0 else 0.0


def _by_method(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, Mapping[str, Any]]]:
    out: dict[str, dict[int, Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("rc") == 0 and "after" in r:
            out.setdefault(str(r["method"]), {})[int(r["seed"])] = r
    return out


def dead_levels(rows: Sequence[Mapping[str, Any]], low: float = LOW, high: float = HIGH) -> tuple[int, int]:
    """``(dead, levels)`` of one cell: levels whose after-RL success, averaged over seeds, is ``<= low`` for every
    method or ``>= high`` for every method (levels keyed by their seed; a level absent from a run is skipped)."""
    per: dict[str, dict[str, list[float]]] = {}
    for method, runs in _by_method(rows).items():
        for r in runs.values():
            for level, s in r["after"].items():
                per.setdefault(level, {}).setdefault(method, []).append(float(s))
    methods = set(_by_method(rows))
    means = [{m: float(np.mean(v)) for m, v in by.items()} for by in per.values() if set(by) == methods]
    dead = sum(all(v <= low for v in m.values()) or all(v >= high for v in m.values()) for m in means)
    return dead, len(means)


def judge_cell(cell: str, rows: Sequence[Mapping[str, Any]]) -> CellVerdict:
    """The rule's numbers for one cell (its result lines, every method and seed)."""
    runs = _by_method(rows)
    methods = tuple(sorted(runs))
    seeds = tuple(sorted(set.intersection(*(set(v) for v in runs.values())))) if runs else ()
    gain = {m: {s: run_stats(runs[m][s]).gain for s in seeds} for m in methods}
    gains = {m: float(np.mean(list(g.values()))) if g else 0.0 for m, g in gain.items()}
    sep = max((abs(float(np.mean([gain[a][s] - gain[b][s] for s in seeds])))
               for a, b in itertools.combinations(methods, 2)), default=0.0) if seeds else 0.0
    cpu = [float(r.get("cpu_s") or r["wall_s"]) for m in methods for r in runs[m].values()
           if r.get("cpu_s") or r.get("wall_s")]
    dead, levels = dead_levels(rows)
    eligible = bool(levels) and dead <= MAX_DEAD * levels and max(gains.values(), default=0.0) >= MIN_GAIN
    return CellVerdict(cell=cell, methods=methods, seeds=seeds, levels=levels, dead=dead, gains=gains,
                       separation=sep, cpu_hours=float(np.mean(cpu)) / 3600.0 if cpu else 0.0, eligible=eligible)


def choose_tier(verdicts: Sequence[CellVerdict], tie: float = TIE) -> CellVerdict | None:
    """The eligible cell with the largest separation per CPU hour (within ``tie`` of the best: the cheapest), or
    None when no cell is eligible."""
    ok = [v for v in verdicts if v.eligible and v.cpu_hours > 0]
    if not ok:
        return None
    best = max(v.per_cpu_hour for v in ok)
    near = [v for v in ok if v.per_cpu_hour >= (1.0 - tie) * best]
    return min(near, key=lambda v: (v.cpu_hours, v.cell))
