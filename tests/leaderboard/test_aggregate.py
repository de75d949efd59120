"""Aggregation with known numbers: mean +- std (ddof=1), IQM, stratified bootstrap CI, boards and curves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.leaderboard.aggregate import (
    Cell,
    build_boards,
    iqm,
    learning_curves,
    mean_std,
    scale_sort_key,
    stratified_bootstrap_ci,
)
from agentbench_crbc.leaderboard.records import RunRecord
from agentbench_crbc.leaderboard.reported import read_reported_csv

from .helpers import PAPER_CSV, rec, two_method_run

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def test_mean_std_is_sample_std_ddof_1() -> None:
    assert mean_std([0.5, 0.7, 0.9]) == Cell(mean=0.7, std=0.2, n=3)  # ddof=0 would give 0.1633
    assert mean_std([0.25]) == Cell(mean=0.25, std=None, n=1)  # one seed: no spread claimed
    with pytest.raises(ValueError):
        mean_std([])


def test_iqm_worked_examples() -> None:
    assert iqm(np.arange(1, 9)) == pytest.approx(4.5)  # 8 values: drop 2 each end -> mean(3, 4, 5, 6)
    assert iqm([0, 0, 1, 1, 1, 1, 100, 100]) == pytest.approx(1.0)  # outliers trimmed; the mean is 25.5
    assert iqm([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]) == pytest.approx(0.5)  # 6 values: drop 1 each end


def test_stratified_bootstrap_resamples_within_tasks() -> None:
    # Task A always 0, task B always 1: every stratified replicate keeps three 0s and three 1s, so the IQM
    # interval collapses on 0.5. A pooled (unstratified) bootstrap would wander.
    lo, hi = stratified_bootstrap_ci([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], reps=2000, seed=3)
    assert (lo, hi) == (0.5, 0.5)
    matrix = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])  # rliable's (runs x tasks) layout: same answer
    assert stratified_bootstrap_ci(matrix, reps=2000, seed=3) == (0.5, 0.5)


def test_bootstrap_ci_is_deterministic_and_contains_the_estimate() -> None:
    rng = np.random.default_rng(0)
    tasks = [rng.uniform(0.2, 0.9, size=5) for _ in range(6)]
    point = iqm(np.concatenate(tasks))
    ci = stratified_bootstrap_ci(tasks, reps=5000, seed=7)
    assert ci == stratified_bootstrap_ci(tasks, reps=5000, seed=7)
    assert ci != stratified_bootstrap_ci(tasks, reps=5000, seed=8)
    assert ci[0] < point < ci[1]
    narrow = stratified_bootstrap_ci(tasks, reps=5000, seed=7, confidence=0.5)
    assert ci[0] <= narrow[0] <= narrow[1] <= ci[1]


def test_bootstrap_mean_interval_matches_normal_theory() -> None:
    # 200 runs of one task, N(0, 1): the 95% interval of the mean is about +-1.96/sqrt(200) = +-0.139 wide.
    x = np.random.default_rng(1).normal(size=200)
    lo, hi = stratified_bootstrap_ci([x], statistic=np.mean, reps=20_000, seed=0)
    assert hi - lo == pytest.approx(2 * 1.96 * x.std(ddof=1) / np.sqrt(200), rel=0.08)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(finite, min_size=1, max_size=6), min_size=1, max_size=5))
def test_iqm_and_interval_lie_within_the_data(tasks: list[list[float]]) -> None:
    pooled = np.concatenate([np.asarray(t) for t in tasks])
    tol = 1e-9 * (1 + np.abs(pooled).max())
    assert pooled.min() - tol <= iqm(pooled) <= pooled.max() + tol
    lo, hi = stratified_bootstrap_ci(tasks, reps=200, seed=0)
    assert pooled.min() - tol <= lo <= hi <= pooled.max() + tol


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=2, max_size=20), st.randoms(use_true_random=False))
def test_aggregates_do_not_depend_on_order(values: list[float], rnd: object) -> None:
    shuffled = list(values)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a, b = mean_std(values), mean_std(shuffled)
    assert a.n == b.n and a.mean == pytest.approx(b.mean, abs=1e-6) and a.std == pytest.approx(b.std, abs=1e-6)
    assert iqm(values) == pytest.approx(iqm(shuffled), abs=1e-6)


def test_board_of_measured_runs_known_numbers() -> None:
    (board,) = build_boards(two_method_run(), env="alfworld", reps=2000)
    assert (board.env, board.model_scale, board.subtasks) == ("alfworld", "tiny-1M", ("pick", "clean", "all"))
    crbc, grpo = board.entries
    assert (crbc.method, crbc.update, crbc.source) == ("crbc", 10, "measured")  # final update, not 0 or 5
    assert crbc.success["pick"] == Cell(mean=0.6, std=0.1, n=3)
    # All = episode-weighted mean of the subtasks per seed: 0.8, 0.75, 0.925
    assert crbc.success["all"].mean == pytest.approx((0.8 + 0.75 + 0.925) / 3)
    assert crbc.success["all"].std == pytest.approx(np.std([0.8, 0.75, 0.925], ddof=1))
    assert grpo.success["all"] == Cell(mean=0.35, std=0.0, n=3)
    # IQM over the 6 (seed, subtask) values 0.5 0.6 0.7 0.9 0.8 1.0: drop 0.5 and 1.0 -> 0.75
    assert crbc.iqm == pytest.approx(0.75)
    assert crbc.ci is not None and crbc.ci[0] <= 0.75 <= crbc.ci[1]
    assert grpo.ci == pytest.approx((0.3, 0.3))  # grpo is identical over seeds: no spread at all
    assert board.best("success", "all") == crbc.success["all"].mean


def test_explicit_all_record_wins_and_missing_seeds_shrink_n() -> None:
    recs = [rec(seed=0, subtask="pick", success=0.2), rec(seed=0, subtask="all", success=0.9),
            rec(seed=1, subtask="all", success=0.7), rec(seed=2, update=5, subtask="all", success=0.1)]
    (board,) = build_boards(recs)
    (entry,) = board.entries
    assert entry.success["all"] == Cell(mean=0.8, std=pytest.approx(np.sqrt(0.02)), n=2)  # seed 2 stopped at 5


def test_filters_and_board_order_of_paper_rows() -> None:
    recs = read_reported_csv(PAPER_CSV)
    boards = build_boards(recs)
    assert [(b.env, b.model_scale) for b in boards] == [
        ("alfworld", "1.5B"), ("alfworld", "7B"), ("alfworld", "api"), ("webshop", "1.5B"), ("webshop", "7B"),
        ("webshop", "api"), ("sokoban", "3B")]
    (alf,) = build_boards(recs, env="ALFWorld", model_scale="7b", methods=["CRBC", "gigpo"])
    assert [e.method for e in alf.entries] == ["gigpo", "crbc"]
    assert alf.entries[1].success["all"] == Cell(0.9688, 0.0156, 3)
    assert alf.entries[1].iqm is None  # reported aggregates have no per-seed values to bootstrap
    assert build_boards(recs, source="measured") == []


def test_learning_curves_from_update_numbers() -> None:
    curves = learning_curves(two_method_run(), env="alfworld")
    assert list(curves) == ["tiny-1M"]
    crbc = next(c for c in curves["tiny-1M"] if c.method == "crbc")
    np.testing.assert_array_equal(crbc.updates, [0, 5, 10])
    np.testing.assert_allclose(crbc.mean, np.array([0.0, 0.5, 1.0]) * (0.8 + 0.75 + 0.925) / 3)
    np.testing.assert_array_equal(crbc.n, [3, 3, 3])
    assert learning_curves(read_reported_csv(PAPER_CSV), env="alfworld") == {}  # reported rows: no curves


def test_scale_order() -> None:
    labels = ["api", "7B", "tiny-1M", "1.5B", "135M", "3B"]
    assert sorted(labels, key=scale_sort_key) == ["tiny-1M", "135M", "1.5B", "3B", "7B", "api"]


def test_scores_near_the_float_limit_show_as_numbers_not_inf(tmp_path, capsys):
    # #31 item 7: sums of 1e308s overflowed to "inf +- inf"
    import json

    from agentbench_crbc.cli import main
    from agentbench_crbc.leaderboard.aggregate import mean_std

    from .helpers import rec

    cell = mean_std([1e308, 1e308, 1e308])
    assert (cell.mean, cell.std, cell.n) == (1e308, 0.0, 3)
    assert mean_std([0.5, 0.7, 0.9]).mean == 0.7  # ordinary values as before
    store = tmp_path / "store.jsonl"
    store.write_text("".join(json.dumps(rec(seed=s, subtask=t, score=1e308, n_episodes=10).to_dict()) + "\n"
                             for s in (0, 1) for t in ("all", "pick")))
    assert main(["leaderboard", "show", "--records", str(store)]) == 0
    out = capsys.readouterr().out
    assert "inf" not in out and "nan" not in out, out


def test_boards_never_mix_budgets_or_revisions_and_references_join_each_rl_board() -> None:
    import dataclasses

    def at(r, budget, revision, kind="rl"):
        return dataclasses.replace(r, budget=budget, revision=revision, kind=kind)

    rows = [at(rec("crbc", s, 60, success=0.6), 60, "aaa") for s in range(2)]
    rows += [at(rec("grpo", s, 30, success=0.4), 30, "aaa") for s in range(2)]
    rows += [at(rec("crbc", s, 60, success=0.2), 60, "bbb") for s in range(2)]  # another trainer revision
    rows += [at(rec("imitation", s, 0, success=0.3), None, "aaa", kind="sft") for s in range(2)]
    boards = build_boards(rows)
    got = {(b.budget, b.revision): sorted(e.method for e in b.entries) for b in boards}
    # the imitation control (no RL updates) stands beside both RL budgets of its revision, not beside bbb's
    assert got == {(30, "aaa"): ["grpo", "imitation"], (60, "aaa"): ["crbc", "imitation"], (60, "bbb"): ["crbc"]}
    assert [b.section for b in boards if b.revision == "bbb"] == ["60 updates, commit bbb, version 0.1.0, "
                                                                  "CPU not recorded"]
    assert build_boards([rec()])[0].section == ("budget not recorded, revision not recorded, version 0.1.0, "
                                                "CPU not recorded")


def test_boards_never_mix_machines_and_the_heading_names_the_cpu_and_isa() -> None:
    """Two CPU types (or one CPU on two kernel ISAs) are two boards, each heading naming its machine; a reference
    row joins only the RL board measured on its own machine."""
    import dataclasses

    from agentbench_crbc.leaderboard.report import board_heading

    xeon, epyc = "Intel(R) Xeon(R) Platinum 8488C, AVX512 kernels", "AMD EPYC 7R13, AVX2 kernels"

    def at(r, machine, kind="rl", budget=60):
        return dataclasses.replace(r, budget=budget, revision="aaa", kind=kind, machine=machine)

    rows = [at(rec("crbc", s, 60, success=0.6), xeon) for s in range(2)]
    rows += [at(rec("grpo", s, 60, success=0.4), epyc) for s in range(2)]
    rows += [at(rec("imitation", s, 0, success=0.3), epyc, kind="sft", budget=None) for s in range(2)]
    boards = build_boards(rows)
    got = {b.machine: sorted(e.method for e in b.entries) for b in boards}
    assert got == {xeon: ["crbc"], epyc: ["grpo", "imitation"]}
    assert sorted(b.section for b in boards) == [f"60 updates, commit aaa, version 0.1.0, on {m}"
                                                 for m in sorted((epyc, xeon))]
    assert all(board_heading(b).endswith(f"on {b.machine}") for b in boards)


def test_code_revision_names_this_checkout_or_the_release() -> None:
    import re

    from agentbench_crbc import __version__
    from agentbench_crbc.revision import code_revision

    assert re.fullmatch(r"[0-9a-f]{12}(\+dirty)?|v" + re.escape(__version__), code_revision())
    assert rec().revision is None  # a hand-built row claims no revision; RunRecord.measured stamps one
    assert RunRecord.measured(env="alfworld", subtask="all", model="m", model_scale="tiny-1M", method="crbc",
                              seed=0, update=1, success=0.5, score=None, n_episodes=2,
                              config_hash="h").revision == code_revision()
