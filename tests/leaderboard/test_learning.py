"""The learning benchmark (agentbench_crbc.bench.learning, ``abc bench``): the grid, paired statistics, dry run, a real
run."""

from __future__ import annotations

import dataclasses
import math

import pytest

from agentbench_crbc.bench import learning
from agentbench_crbc.cli import main as abc_main
from agentbench_crbc.errors import UnknownNameError
from agentbench_crbc.host import get_host
from agentbench_crbc.leaderboard.records import read_records

# every credit method the plugin host registered (no second list of names) and CRBC at closure depths 0, 1, 3
ALL = {*get_host().credit.names(), "crbc_depth0", "crbc_depth1", "crbc_depth3"}


def _value(cell, key):
    return next(o.split("=", 1)[1] for o in reversed(cell.overrides) if o.startswith(key + "="))


def test_full_plan_one_warm_start_per_seed_then_every_variant_then_the_control() -> None:
    cells = learning.plan("full")
    assert len(cells) == 3 * (1 + len(ALL) + 1) and {c.seed for c in cells} == {0, 1, 2}
    for seed in (0, 1, 2):
        mine = [c for c in cells if c.seed == seed]
        assert mine[0].kind == "warm" and mine[-1].kind == "control" and mine[-1].label == "imitation"
        assert {c.label for c in mine if c.kind == "rl"} == ALL
    assert len({(c.env, c.seed, c.label) for c in cells}) == len(cells)  # one leaderboard key per run
    rl = [c for c in cells if c.kind == "rl"]
    # the same budget for every method: updates, groups, G, evaluation, warm start from the same model
    for key in ("updates", "rollout.groups", "rollout.group_size", "eval.episodes", "eval.every", "sft.steps"):
        assert len({_value(c, key) for c in rl}) == 1, key
    assert _value(rl[0], "rollout.group_size") == "8" and _value(rl[0], "sft.steps") == "0"
    assert int(_value(rl[0], "eval.episodes")) >= 64 and _value(rl[0], "eval.temperature") == "0.4"
    d1 = next(c for c in cells if c.label == "crbc_depth1" and c.seed == 2)
    assert d1.credit == "crbc" and "credit.options.depth=1" in d1.overrides and "seed=2" in d1.overrides
    full = next(c for c in cells if c.label == "crbc")
    assert not any(o.startswith("credit.options.depth") for o in full.overrides)  # the preset's full closure
    warm = next(c for c in cells if c.kind == "warm")
    assert _value(warm, "sft.max_minutes") == "0" and int(_value(warm, "sft.steps")) > 0  # by steps, not time


def test_every_planned_run_resolves_to_a_valid_config() -> None:
    from agentbench_crbc.trainer.config import check_credit, load_config

    for c in learning.plan("full", seeds=[0]):
        cfg = load_config(env=c.env, credit=c.credit, overrides=c.overrides)
        check_credit(cfg)
        if c.label.startswith("crbc_depth"):
            assert cfg.credit.options["depth"] == int(c.label[-1]) and cfg.credit.options["w_step"] == 5.0


def test_quick_plan_and_method_filter() -> None:
    cells = learning.plan("quick")
    assert [c.label for c in cells] == ["warmstart", "grpo", "gigpo", "crbc", "imitation"]
    assert [c.label for c in learning.plan("full", methods=["crbc", "grpo"], seeds=[1])] == [
        "warmstart", "crbc", "grpo"]  # in the order asked for
    with pytest.raises(UnknownNameError, match=r"^unknown method\(s\) crbc_depth9; choose a variant \(crbc, .*, "
                       r"imitation\) or an installed credit method \(crbc, .*; see `abc plugins`\)$"):
        learning.plan("quick", methods=["crbc_depth9"])
    # an installed method that is not a variant runs by its name, with its default options
    assert [(c.label, c.credit) for c in learning.plan("quick", methods=["hgpo", "progpo"]) if c.kind == "rl"] == [
        ("hgpo", "hgpo"), ("progpo", "progpo")]


def test_paired_stats_worked_example() -> None:
    # crbc 50/60/70 %, grpo 40 % on every seed: differences 10, 20, 30 points
    ps = learning.paired_stats([0.5, 0.6, 0.7], [0.4, 0.4, 0.4])
    assert ps.n == 3 and ps.mean == pytest.approx(0.2) and ps.sd == pytest.approx(0.1)
    assert ps.t == pytest.approx(0.2 / (0.1 / math.sqrt(3)))  # 3.464, df 2
    assert ps.p == pytest.approx(0.07418, abs=1e-4)  # two-sided: not significant at 5%
    assert not ps.significant and (ps.wins, ps.losses) == (3, 0)
    assert ps.t_ci == pytest.approx((0.2 - 4.302653 * 0.1 / math.sqrt(3), 0.2 + 4.302653 * 0.1 / math.sqrt(3)))
    # resampling 3 seeds: P(all three = the smallest) = 1/27 > 2.5 %, so the interval is the whole range
    assert ps.boot_ci == pytest.approx((0.1, 0.3))
    strong = learning.paired_stats([0.50, 0.61, 0.70, 0.58, 0.66], [0.40, 0.50, 0.61, 0.47, 0.55])
    assert strong.significant and strong.p < 0.001 and strong.t_ci[0] > 0
    one = learning.paired_stats([0.5], [0.4])
    assert one.p is None and one.t_ci is None and one.mean == pytest.approx(0.1) and not one.significant
    with pytest.raises(ValueError, match="equally long"):
        learning.paired_stats([0.5, 0.6], [0.4])


def _row(label, seed, kind, final, greedy, train=(0.1, 0.2)):
    update = "0" if kind in ("warm", "control") else "20"
    return {"mode": "full", "env": "sokoban", "seed": seed, "label": label, "kind": kind, "seconds": 100.0,
            "rl_seconds": 90.0, "rl_samples": 5000, "sft_samples": 6400, "train_success": list(train),
            "evals": {update: {"t0.4": final, "greedy": greedy}}}


def test_summary_pairs_by_seed() -> None:
    rows = []
    for s, (w, c, g) in enumerate([(0.30, 0.50, 0.40), (0.32, 0.60, 0.40), (0.28, 0.70, 0.40)]):
        rows += [_row("warmstart", s, "warm", w, w, ()), _row("crbc", s, "rl", c, c, (0.3, 0.5)),
                 _row("grpo", s, "rl", g, g), _row("imitation", s, "control", w + 0.05, w)]
    summary = learning.summarise(rows, updates=20)
    comp = {(c["a"], c["b"], c["metric"]): c for c in summary["comparisons"]}
    c = comp[("crbc", "grpo", "t0.4")]
    assert c["n"] == 3 and c["mean"] == pytest.approx(0.2) and c["p"] == pytest.approx(0.07418, abs=1e-4)
    assert comp[("crbc", "grpo", "train_success_mean")]["mean"] == pytest.approx(0.25)
    assert comp[("imitation", "warmstart", "t0.4")]["mean"] == pytest.approx(0.05)
    assert ("crbc", "gigpo", "t0.4") not in comp  # no gigpo rows: nothing invented
    md = learning.summary_markdown(summary)
    assert "| crbc − grpo | t0.4 | 3 | +20.0 |" in md and "| crbc | 3 | 60.0 ± 10.0 |" in md
    # a method run by name (an installed one that is no variant) is summarised and paired with the control
    rows += [_row("myalgo", s, "rl", 0.45, 0.45) for s in range(3)]
    summary = learning.summarise(rows, updates=20)
    assert list(summary["table"]) == ["warmstart", "crbc", "grpo", "myalgo", "imitation"]  # the host's order
    comp = {(c["a"], c["b"], c["metric"]): c for c in summary["comparisons"]}
    assert comp[("myalgo", "imitation", "t0.4")]["mean"] == pytest.approx(0.45 - 0.35)
    assert ("myalgo", "warmstart", "t0.4") in comp


def test_abc_bench_dry_run_lists_the_runs(capsys) -> None:
    assert abc_main(["bench", "--mode", "full", "--env", "sokoban", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{3 * (len(ALL) + 2)} runs ({3 * len(ALL)} RL, 3 warm starts, 3 controls)" in out
    assert "abc train --env sokoban --credit gated_bepo --model WARM/model" in out
    assert "abc sft --env sokoban --model WARM/model" in out and "crbc_depth3" in out
    # 120 updates: twice the measured RL stage (2 x 380 s) plus its 80 s of setup and validation, idle or shared
    assert "time per run: RL run of 120 updates 14 min (shared: 32 min)" in out
    assert f"shared, for {3 * len(ALL)} RL runs, 3 controls" in out
    # the same ten variants as before the host named them: 8 h 18 min idle, 18 h 17 min shared
    assert abc_main(["bench", "--mode", "full", "--env", "sokoban", "--dry-run", *(a for m in sorted(ALL - {
        "hgpo", "pcgpo", "progpo"}) for a in ("--method", m)), "--method", "imitation"]) == 0
    assert "total: about 8 h 18 min on that idle CPU, 18 h 17 min shared, for 30 RL runs, 3 controls" in (
        capsys.readouterr().out)


def test_estimate_scales_with_the_updates_and_the_warm_steps() -> None:
    cells = [learning.Cell("sokoban", 0, "warmstart", "warm", "crbc", ("updates=0", "sft.steps=500")),
             learning.Cell("sokoban", 0, "grpo", "rl", "grpo", ("updates=60", "sft.steps=0", "updates=30")),
             learning.Cell("sokoban", 0, "imitation", "control", "crbc", ("updates=0",))]
    text = learning.estimate(cells)
    # the last --set wins, as in the trainer: 30 updates = 190 s + 80 s; 500 imitation steps = 389 s x 5/6 + 80 s
    assert "RL run of 30 updates 4 min 30 s (shared: 9 min 2 s)" in text
    assert "warm start of 500 steps 6 min 44 s" in text
    assert "total: about 16 min on that idle CPU, 25 min shared, for 1 RL runs, 1 controls, 1 warm starts" in text


@pytest.mark.slow
def test_a_tiny_benchmark_writes_records_the_leaderboard_accepts(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch", reason="trains a tiny model: needs the train extra (tox -e train runs it)")
    tiny = dataclasses.replace(learning.MODES["quick"], variants=("grpo", "crbc"), warm_steps=2, updates=1,
                               groups=2, group_size=2, eval_episodes=4)
    monkeypatch.setitem(learning.MODES, "tiny", tiny)
    store, board = tmp_path / "records.jsonl", tmp_path / "board"
    extra = ["sft.batch_size=8", "sft.pool=64", "sft.warmup=1", "rollout.max_response_tokens=5", "env.max_steps=4",
             "optim.micro_batch=64", "eval.greedy=false"]
    argv = ["--mode", "tiny", "--out", str(tmp_path / "runs"), "--records", str(store), "--render", str(board),
            *(x for kv in extra for x in ("--set", kv))]
    assert learning.main(argv) == 0
    recs = read_records(store)  # validated on read: the store accepts them
    got = {(r.method, r.update) for r in recs}
    assert got == {("grpo", 0), ("grpo", 1), ("crbc", 0), ("crbc", 1), ("imitation", 0), ("imitation", 1)}
    alls = [r for r in recs if r.subtask == "all"]
    assert {(r.model, r.model_scale, r.source, r.n_episodes) for r in alls} == {("tiny-qwen2", "tiny-1M", "measured",
                                                                                4)}
    # each level's episodes land in its plan-length subtask: the subtasks of one evaluation add up to its 4
    for a in alls:
        parts = [r.n_episodes for r in recs if r.subtask != "all" and (r.method, r.update, r.kind, r.run)
                 == (a.method, a.update, a.kind, a.run)]
        assert not parts or sum(parts) == 4, (a, parts)
    assert {r.kind for r in recs if r.method == "imitation"} == {"sft"}
    assert (board / "board.md").exists() and (board / "learning" / "sokoban_summary.md").exists()
    # every run saved its held-out episodes, so methods are also compared level by level (1 seed x 4 levels)
    assert "| crbc − grpo | t0.4 | 1 x 4 |" in (board / "learning" / "sokoban_summary.md").read_text()
    assert (board / "learning" / "sokoban_train_curves.png").stat().st_size > 0
    # a rerun skips finished runs and adds nothing (no duplicate-record error)
    assert learning.main(argv) == 0 and len(read_records(store)) == len(recs)


def test_paired_levels_worked_example() -> None:
    # 2 seeds x 4 levels; a solves 5 pairs, b 3; discordant: a only 3, b only 1 -> mean +2/8 = +25 points
    a = {0: {"10": 1, "11": 1, "12": 0, "13": 1}, 1: {"10": 1, "11": 0, "12": 1, "13": 0}}
    b = {0: {"10": 1, "11": 0, "12": 0, "13": 0}, 1: {"10": 0, "11": 0, "12": 1, "13": 1}, 2: {"10": 1}}
    pl = learning.paired_levels(a, b)
    assert (pl.n_seeds, pl.n_levels, pl.a_only, pl.b_only) == (2, 4, 3, 1)  # seed 2: only b played it
    assert pl.mean == pytest.approx(0.25)
    assert pl.p == pytest.approx(0.625)  # exact McNemar: 2 * P(Binom(4, 1/2) >= 3) = 2 * 5/16
    assert -1 <= pl.boot_ci[0] <= pl.mean <= pl.boot_ci[1] <= 1
    assert not pl.significant
    same = learning.paired_levels(a, a)
    assert same.mean == 0 and same.boot_ci == (0.0, 0.0) and same.p == 1.0 and not same.significant
    # a large, consistent gain over many levels is detected although per-seed means have only 3 points
    many_a = {s: {str(lv): int(lv % 10 < 6) for lv in range(64)} for s in range(3)}
    many_b = {s: {str(lv): int(lv % 10 < 3) for lv in range(64)} for s in range(3)}
    strong = learning.paired_levels(many_a, many_b)
    assert strong.significant and strong.p < 1e-6 and strong.boot_ci[0] > 0.15
    with pytest.raises(ValueError, match="both sides played"):
        learning.paired_levels({0: {"1": 1}}, {1: {"1": 1}})


def test_summary_pairs_by_level_when_runs_saved_episodes() -> None:
    rows = []
    for s in range(3):
        c = _row("crbc", s, "rl", 0.45 + 0.05 * s, 0.5)  # per-seed means vary, as in real runs
        c["episodes"] = {"20": {"t0.4": {str(lv): int(lv < 32) for lv in range(64)}}}
        g = _row("grpo", s, "rl", 0.25, 0.25)
        g["episodes"] = {"20": {"t0.4": {str(lv): int(lv < 16) for lv in range(64)}}}
        rows += [c, g, _row("warmstart", s, "warm", 0.3 + 0.02 * s, 0.3, ())]  # the warm start saved no episodes
    summary = learning.summarise(rows, updates=20)
    (lc,) = [x for x in summary["level_comparisons"] if (x["a"], x["b"]) == ("crbc", "grpo")]
    assert lc["metric"] == "t0.4" and (lc["n_seeds"], lc["n_levels"]) == (3, 64)
    assert lc["mean"] == pytest.approx(0.25) and (lc["a_only"], lc["b_only"]) == (48, 0) and lc["significant"]
    assert not [x for x in summary["level_comparisons"] if "warmstart" in (x["a"], x["b"])]
    assert "| crbc − grpo | t0.4 | 3 x 64 | +25.0 |" in learning.summary_markdown(summary)
