"""The learning-benchmark driver's grid (benchmarks/learning.py): every method and CRBC depth, 3 seeds, unique labels."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "bench_learning", Path(__file__).resolve().parents[2] / "benchmarks" / "learning.py")
assert SPEC is not None and SPEC.loader is not None
learning = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = learning  # dataclasses look their module up there
SPEC.loader.exec_module(learning)


def test_quick_plan_covers_every_method_and_depth_with_three_seeds() -> None:
    cells = learning.plan("quick")
    labels = {c.label for c in cells}
    assert labels == {"grpo", "rloo", "gigpo", "graphgpo", "g2po", "gated_bepo", "crbc", "crbc_depth0",
                      "crbc_depth1", "crbc_depth3"}
    assert len(cells) == 10 * 3 and {c.seed for c in cells} == {0, 1, 2} and {c.env for c in cells} == {"sokoban"}
    assert len({(c.env, c.label, c.seed) for c in cells}) == len(cells)  # one leaderboard key per run
    d1 = next(c for c in cells if c.label == "crbc_depth1" and c.seed == 2)
    assert d1.credit == "crbc" and "credit.options.depth=1" in d1.overrides and "seed=2" in d1.overrides
    full = next(c for c in cells if c.label == "crbc")
    assert not any(o.startswith("credit.options.depth") for o in full.overrides)  # the preset's full closure


def test_full_plan_spans_three_envs_and_unknown_method_is_refused() -> None:
    assert {c.env for c in learning.plan("full")} == {"sokoban", "alfworld", "webshop"}
    assert len(learning.plan("full", envs=["sokoban"], methods=["crbc", "grpo"], seeds=[0])) == 2
    with pytest.raises(SystemExit, match="unknown method"):
        learning.plan("quick", methods=["crbc_depth9"])
