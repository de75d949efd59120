"""The benchmark statistics (agentbench_crbc.bench.stats): curve metrics, the failure rule and per-method summaries on
worked examples with hand-computed numbers, the one bootstrap's draws pinned to a fixed seed, and properties."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.bench import stats as S
from agentbench_crbc.bench.summary import summarise, summary_markdown

ROOT = Path(__file__).resolve().parents[2]
CURVE = [[0, 0.1], [10, 0.3], [20, 0.3], [30, 0.5]]


def test_auc_and_threshold_worked_example() -> None:
    # trapezoids: 10 x (0.1 + 0.3) / 2 + 10 x (0.3 + 0.3) / 2 + 10 x (0.3 + 0.5) / 2 = 2 + 3 + 4 = 9; / 30 updates
    assert S.auc(CURVE) == pytest.approx(0.3)
    assert S.auc(list(reversed(CURVE))) == pytest.approx(0.3)  # order of the validations does not matter
    assert S.auc([[60, 0.42]]) == pytest.approx(0.42)  # one validation: that value
    assert S.updates_to_threshold(CURVE, 0.3) == 10  # the first validation at or above
    assert S.updates_to_threshold(CURVE, 0.31) == 30
    assert S.updates_to_threshold(CURVE, 0.1) == 0
    assert S.updates_to_threshold(CURVE, 0.6) is None  # never reached: censored
    with pytest.raises(ValueError, match="at least one validation"):
        S.auc([])


def test_failure_rule_worked_example() -> None:
    # median of 0.30, 0.24, 0.06, 0.27, 0.09 is 0.24: a run fails below 0.08
    assert S.failure_cutoff([0.30, 0.24, 0.06, 0.27, 0.09]) == pytest.approx(0.08)
    assert S.failed_runs([0.30, 0.24, 0.06, 0.27, 0.09]) == [False, False, True, False, False]
    # a cell whose median run did not gain: nothing learned, every run failed
    assert S.failed_runs([0.0, -0.1, 0.05]) == [True, True, True]


def test_wilson_trimmed_mean_and_bootstrap_worked_examples() -> None:
    # 1 of 5: centre (0.2 + z^2/10) / (1 + z^2/5) = 0.3303, half z / (1 + z^2/5) sqrt(0.032 + z^2/100) = 0.2941
    lo, hi = S.wilson_interval(1, 5)
    assert (lo, hi) == pytest.approx((0.036224, 0.624465), abs=1e-6)
    assert S.wilson_interval(0, 5)[0] == 0.0 and S.wilson_interval(5, 5)[1] == 1.0
    assert S.trimmed_mean([0, 1, 2, 3, 100]) == pytest.approx(2.0)  # int(0.2 x 5) = 1 cut from each end
    # two seeds 0 and 1: a replicate's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4, so the 95% interval is [0, 1]
    assert S.mean_interval([0.0, 1.0]) == (0.0, 1.0)


def test_the_bootstrap_draws_are_pinned_to_the_seed() -> None:
    """The indices come from ``default_rng(seed)`` in one fixed order: changing it would move every committed
    interval, so it is spelled out here independently."""
    x = np.array([0.1, 0.4, 0.35, 0.8, 0.2, 0.55])
    rng = np.random.default_rng(11)
    means = x[rng.integers(0, x.size, size=(4000, x.size))].mean(axis=1)
    assert S.stratified_bootstrap_ci([x], statistic=np.mean, reps=4000, seed=11) == tuple(
        float(v) for v in np.percentile(means, [2.5, 97.5]))
    d = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    rng = np.random.default_rng(5)
    pick_s = rng.integers(0, 2, size=(300, 2))
    pick_l = rng.integers(0, 3, size=(300, 2, 3))
    want = d[pick_s[:, :, None], pick_l].mean(axis=(1, 2))
    assert np.array_equal(S.two_stage_means(d, reps=300, rng=np.random.default_rng(5)), want)
    rng = np.random.default_rng(5)  # per replicate: clusters, then each picked cluster's items, in turn
    loop = []
    for _ in range(50):
        pick = rng.integers(0, 2, 2)
        loop.append(np.mean([d[i][rng.integers(0, 3, 3)].mean() for i in pick]))
    assert np.array_equal(S.two_stage_means(d, reps=50, rng=np.random.default_rng(5), batched=False), loop)


def _runs(rows):
    return [S.RunStats(seed=s, before=0.2, final=f, auc=a, to_threshold=t, budget=30) for s, f, a, t in rows]


def test_method_summary_worked_example() -> None:
    runs = {"a": _runs([(0, 0.50, 0.35, 10), (1, 0.44, 0.30, 20), (2, 0.26, 0.22, None)]),
            "b": _runs([(0, 0.40, 0.30, 20), (1, 0.50, 0.32, 10), (2, 0.45, 0.30, 20)])}
    out = S.summarise_methods(runs, reference="b")
    a, b = out["a"], out["b"]
    # gains 0.30, 0.24, 0.06 | 0.20, 0.30, 0.25: the cell's median (0.24 + 0.25) / 2 = 0.245, cutoff 0.0817
    assert [r.failed for r in a.runs] == [False, False, True] and b.failures == 0
    assert (a.failures, a.failure_rate) == (1, pytest.approx(1 / 3))
    # the censored seed enters at its budget, 30: (10 + 20 + 30) / 3
    assert a.to_threshold.mean == pytest.approx(20.0) and a.censored == 1 and b.censored == 0
    assert b.to_threshold.mean == pytest.approx(50 / 3)
    # final a - b per seed: +0.10, -0.06, -0.19, mean -0.05; with 3 seeds the 95% interval is [min, max] (1/27 each)
    assert a.final.mean == pytest.approx(0.40) and a.final.vs.mean == pytest.approx(-0.05)
    assert a.final.vs.boot_ci == pytest.approx((-0.19, 0.10))
    assert a.auc.vs.mean == pytest.approx((0.05 - 0.02 - 0.08) / 3)
    assert a.failure_vs.mean == pytest.approx(1 / 3) and b.final.vs is None and b.failure_vs is None
    # three seeds: int(0.2 x 3) = 0 cut, so the trimmed mean is the mean
    assert (a.final_median, a.final_trimmed) == (pytest.approx(0.44), pytest.approx(0.40))


def test_run_stats_reads_a_result_line() -> None:
    row = {"seed": 3, "before": {"1": 0.0, "2": 0.5}, "after": {"1": 1.0, "2": 0.5}, "curve": CURVE}
    r = S.run_stats(row, threshold=0.3)
    assert (r.before, r.final, r.gain, r.auc, r.to_threshold, r.budget) == (0.25, 0.75, 0.5, pytest.approx(0.3), 10,
                                                                           30)
    two = S.run_stats({**row, "curve": [[0, 0.25], [60, 0.75]]})  # before and after only: no curve to speak of
    assert two.auc is None and two.to_threshold is None and two.budget is None


def _bench_row(label, seed, kind, curve):
    return {"mode": "quick", "env": "sokoban", "seed": seed, "label": label, "kind": kind, "seconds": 10.0,
            "rl_seconds": 9.0, "rl_samples": 50, "sft_samples": 0, "train_success": [0.1],
            "evals": {str(u): {"t0.4": v, "greedy": v} for u, v in curve}}


def test_abc_bench_summary_prints_the_curve_table() -> None:
    rows = []
    for s in range(3):
        rows += [_bench_row("warmstart", s, "warm", [[0, 0.1]]),
                 _bench_row("crbc", s, "rl", [[0, 0.1], [10, 0.3], [20, 0.3], [30, 0.5]]),
                 _bench_row("grpo", s, "rl", [[0, 0.1], [10, 0.1], [20, 0.3], [30, 0.5 - 0.1 * s]])]
    summary = summarise(rows, updates=30)
    crbc = summary["curves"]["methods"]["crbc"]
    assert summary["curves"]["reference"] == "grpo"  # the summary's first comparison partner that ran
    assert crbc["auc"]["mean"] == pytest.approx(0.3) and crbc["to_threshold"]["mean"] == pytest.approx(30.0)
    # grpo: AUC (1 + 2 + 4 - s / 2) / 30; crbc - grpo = 9 / 30 - that = (2 + s / 2) / 30 per seed: mean 2.5 / 30
    assert crbc["auc"]["vs"]["mean"] == pytest.approx(2.5 / 30)
    md = summary_markdown(summary)
    assert "| crbc | 0,1,2 | 50.0 (50.0 .. 50.0) | +10.0 (+0.0 .. +20.0) |" in md
    assert "| 30.0 (30.0 .. 30.0) (0) |" in md  # crbc reaches 40% at its last validation
    assert "| 30.0 (30.0 .. 30.0) (1) |" in md  # grpo seed 2 never does (0.3): censored, entered at the budget, 30
    # gains 0.4 x 3 (crbc), 0.4, 0.3, 0.2 (grpo): median 0.4, cutoff 0.133
    assert "Failed runs (gain of RL below 0.33 x the median gain of all 6 runs, +13.3 points): none." in md


def _script():
    spec = importlib.util.spec_from_file_location("grid_report", ROOT / "benchmarks" / "grid_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_grid_report_prints_the_curve_table_for_rows_with_curves() -> None:
    g = _script()
    levels = [str(i) for i in range(4)]
    rows = {m: {s: {"seed": s, "before": dict.fromkeys(levels, 0.25), "after": dict.fromkeys(levels, after),
                    "curve": [[0, 0.25], [10, mid], [20, after]]} for s in range(2)}
            for m, mid, after in (("grpo", 0.25, 0.5), ("crbc", 0.5, 0.5))}
    text = g.curves_table(rows, "grpo", 0.4)
    # AUC grpo (0.25 + 0.25) / 4 + (0.25 + 0.5) / 4 = 0.3125, crbc 0.4375: +12.5 points on both seeds
    assert "| crbc | 0,1 | 50.0 (50.0 .. 50.0) | +0.0 (+0.0 .. +0.0) | 50.0 / 50.0 | 43.8 (43.8 .. 43.8) | " \
           "+12.5 (+12.5 .. +12.5) | 10.0 (10.0 .. 10.0) (0) | -10.0 (-10.0 .. -10.0) |" in text
    assert "Failed runs (gain of RL below 0.33 x the median gain of all 4 runs, +8.3 points): none." in text


finite = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 500), min_size=1, max_size=12, unique=True), finite)
def test_auc_of_a_constant_curve_is_the_constant(updates: list[int], c: float) -> None:
    assert S.auc([[u, c] for u in updates]) == pytest.approx(c)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), finite, finite), min_size=1, max_size=12,
                unique_by=lambda t: t[0]))
def test_auc_is_monotone_in_the_curve_and_lies_within_it(points: list[tuple[int, float, float]]) -> None:
    low = [[u, min(x, y)] for u, x, y in points]
    high = [[u, max(x, y)] for u, x, y in points]
    assert S.auc(low) <= S.auc(high) + 1e-12
    assert min(v for _, v in low) - 1e-12 <= S.auc(low) <= max(v for _, v in low) + 1e-12


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(finite, finite, st.one_of(st.none(), st.integers(0, 30))), min_size=1, max_size=6))
def test_the_paired_difference_of_identical_methods_is_zero(rows: list[tuple[float, float, int | None]]) -> None:
    same = [S.RunStats(seed=i, before=b, final=f, auc=f, to_threshold=t, budget=30) for i, (b, f, t) in enumerate(rows)]
    out = S.summarise_methods({"a": same, "b": list(same)}, reference="b")
    for est in (out["a"].final, out["a"].auc, out["a"].to_threshold, out["a"].gain):
        assert est.vs.mean == 0.0 and est.vs.boot_ci == (0.0, 0.0)
    assert out["a"].failure_vs.mean == 0.0 and out["a"].failures == out["b"].failures
    assert not math.isnan(out["a"].final.ci[0])
