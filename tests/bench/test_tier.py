"""The tier rule on worked examples: dead levels, separation, eligibility, the choice per CPU hour."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentbench_crbc.bench.tier import CellVerdict, choose_tier, dead_levels, judge_cell

BEFORE = {"l1": 0.0, "l2": 0.0, "l3": 0.0, "l4": 1.0}


def _row(method: str, seed: int, after: dict[str, float], cpu_s: float) -> dict:
    return {"method": method, "seed": seed, "rc": 0, "before": BEFORE, "after": after, "cpu_s": cpu_s}


ROWS = [
    _row("a", 0, {"l1": 1.0, "l2": 0.0, "l3": 0.5, "l4": 1.0}, 3600),
    _row("b", 0, {"l1": 1.0, "l2": 0.0, "l3": 0.0, "l4": 1.0}, 3600),
    _row("a", 1, {"l1": 1.0, "l2": 0.0, "l3": 1.0, "l4": 1.0}, 7200),
    _row("b", 1, {"l1": 1.0, "l2": 0.0, "l3": 0.5, "l4": 1.0}, 3600),
    {"method": "b", "seed": 2, "rc": 1},  # a failed run: no numbers, left out
]


def test_worked_example() -> None:
    # l1 and l4 solved by every method, l2 by none: dead; l3 (a 0.75, b 0.25) carries signal
    assert dead_levels(ROWS) == (3, 4)
    v = judge_cell("x", ROWS)
    assert v.methods == ("a", "b") and v.seeds == (0, 1)
    # gains: a 0.375 and 0.5, b 0.25 and 0.375 (before 0.25)
    assert v.gains["a"] == pytest.approx(0.4375) and v.gains["b"] == pytest.approx(0.3125)
    assert v.separation == pytest.approx(0.125)
    assert v.cpu_hours == pytest.approx(1.25) and v.per_cpu_hour == pytest.approx(0.1)
    assert not v.eligible  # 3 of 4 levels dead


def _verdict(cell: str, sep: float, hours: float, eligible: bool = True) -> CellVerdict:
    return CellVerdict(cell=cell, methods=("a", "b"), seeds=(0,), levels=100, dead=0, gains={"a": 0.2, "b": 0.1},
                       separation=sep, cpu_hours=hours, eligible=eligible)


def test_choice_per_cpu_hour_tie_goes_to_the_cheaper() -> None:
    fast, slow, big = _verdict("fast", 0.05, 0.25), _verdict("slow", 0.20, 1.0), _verdict("big", 0.5, 1.0, False)
    # per CPU hour: fast 0.2, slow 0.2 (a tie), big not eligible
    assert choose_tier([slow, fast, big]).cell == "fast"
    assert choose_tier([_verdict("slow", 0.30, 1.0), fast]).cell == "slow"
    assert choose_tier([big]) is None


@given(st.lists(st.floats(0, 1), min_size=1, max_size=6), st.floats(0, 1))
def test_separation_is_symmetric_in_the_methods(after_a: list[float], shift: float) -> None:
    levels = {f"l{i}": 0.0 for i in range(len(after_a))}
    a = {"method": "a", "seed": 0, "rc": 0, "before": levels, "after": {f"l{i}": v for i, v in enumerate(after_a)},
         "cpu_s": 10.0}
    b = {**a, "method": "b", "after": {k: min(1.0, v * shift) for k, v in a["after"].items()}}
    swapped = [{**a, "method": "b"}, {**b, "method": "a"}]
    assert judge_cell("x", [a, b]).separation == pytest.approx(judge_cell("x", swapped).separation)
