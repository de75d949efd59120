"""abc bench credit: the within-group AUC by hand, its bootstrap, Sokoban replay labels against the solver, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.bench.credit_quality import group_auc_counts, label_groups, parse_variant, score_variants
from agentbench_crbc.errors import ConfigError


def test_group_auc_counts_worked_example():
    # optimal steps credit 3 and 1, non-optimal 2, 1, 0: pairs (3>2, 3>1, 3>0, 1<2, 1=1, 1>0) -> 4.5 wins of 6
    wins, pairs = group_auc_counts(np.array([3.0, 1.0, 2.0, 1.0, 0.0]), np.array([1, 1, 0, 0, 0]))
    assert (wins, pairs) == (4.5, 6.0)
    assert group_auc_counts(np.array([1.0, 2.0]), np.array([1, 1])) == (0.0, 0.0)  # no non-optimal step


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.booleans()), min_size=2, max_size=12))
def test_group_auc_counts_matches_pair_count(rows):
    c = np.array([r[0] for r in rows])
    y = np.array([int(r[1]) for r in rows])
    wins, pairs = group_auc_counts(c, y)
    pairs_ = [(a, b) for a, ya in zip(c, y, strict=True) for b, yb in zip(c, y, strict=True) if ya and not yb]
    brute = sum((a > b) + 0.5 * (a == b) for a, b in pairs_)
    assert pairs == y.sum() * (len(y) - y.sum())
    assert wins == pytest.approx(brute)


def test_score_variants_pools_pairs_over_groups_and_pairs_the_bootstrap():
    labels = np.array([1, 0, 0, 1, 1, 0, -1])
    group = np.array([0, 0, 0, 1, 1, 1, 1])
    credits = {"oracle": labels.astype(float), "inverse": -labels.astype(float), "flat": np.zeros(7),
               # group 0: 1 of 2 pairs right; group 1: 2 of 2 -> pooled 3 / 4
               "mixed": np.array([1.0, 2.0, 0.0, 5.0, 4.0, 3.0, 9.0])}
    rows = {r.label: r for r in score_variants(credits, labels, group, 2, reference="flat", reps=400)}
    assert rows["oracle"].auc == 1.0 and rows["inverse"].auc == 0.0 and rows["flat"].auc == 0.5
    assert rows["mixed"].auc == 0.75
    assert rows["oracle"].minus_reference == 0.5 and rows["oracle"].minus_reference_ci95 == (0.5, 0.5)
    lo, hi = rows["mixed"].ci95
    assert 0.5 <= lo <= 0.75 <= hi <= 1.0
    assert rows["flat"].minus_reference is None
    with pytest.raises(ConfigError, match="roll out more groups"):
        score_variants({"x": np.zeros(2)}, np.array([1, 1]), np.array([0, 0]), 1, reference=None)


def test_parse_variant():
    assert parse_variant("crbc w1=crbc:w_step=1,depth='inf'") == ("crbc w1", "crbc", {"w_step": 1, "depth": "inf"})
    assert parse_variant("g=grpo") == ("g", "grpo", {})
    with pytest.raises(ConfigError, match="LABEL=METHOD"):
        parse_variant("crbc")


def test_sokoban_replay_labels_follow_the_solver():
    pytest.importorskip("gymnasium")
    from agentbench_crbc.envs.sokoban.solver import env_optimal_actions, optimal_actions
    from agentbench_crbc.rollout.hosting.workers import EnvRecipe

    spec = EnvRecipe("abc/SokobanText-v0", {"view": "egocentric", "max_moves": 4})
    env = spec.make()
    _, info = env.reset(seed=3)
    level = env.unwrapped.level
    best = sorted(optimal_actions(level))
    worse = sorted(set(info["admissible_actions"]) - set(best))
    assert best and worse
    env.step(best[0])
    after_best = sorted(env_optimal_actions(env))
    env.close()
    # trajectory 1: an optimal move, then an optimal one again; trajectory 2: a non-optimal move first
    step = SimpleNamespace
    groups = [SimpleNamespace(env_id=spec.env_id, seed=3, trajectories=(
        SimpleNamespace(steps=(step(action=best[0]), step(action=after_best[0]))),
        SimpleNamespace(steps=(step(action=worse[0]),))))]
    labels = label_groups(groups, lambda env_id: EnvRecipe(env_id, spec.kwargs).make(), env_optimal_actions)
    first = labels[0][0]
    assert first[0] is True and labels[0][1] == [False]
    # the second state is labelled unless every admissible move is optimal there (then no label)
    assert first[1] in (True, None)


@pytest.mark.slow
def test_cli_scores_every_installed_method_on_trainer_rollouts(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "credit.json"
    res = subprocess.run([sys.executable, "-m", "agentbench_crbc", "bench", "credit", "--groups", "4",
                          "--reps", "50", "--method", "grpo", "--method", "crbc", "-o", str(out)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "constrained answers" in res.stdout and "| crbc |" in res.stdout
    data = json.loads(out.read_text())
    labels = {r["label"] for r in data["rows"]}
    assert labels == {"grpo", "crbc", "crbc w_step 1", "crbc step part only"}
    crbc = next(v for v in data["variants"] if v["label"] == "crbc")
    assert crbc["options"]["w_step"] == 5.0  # the cpu-demo preset's options, as `abc train --credit crbc` runs
    assert all(0.0 <= r["auc"] <= 1.0 for r in data["rows"])


def test_family_without_hook_is_skipped_with_one_line(tmp_path, capsys):
    from agentbench_crbc.bench import credit_quality

    cfg = SimpleNamespace(env=SimpleNamespace(id="abc/ALFWorld-v0", name="alfworld"))
    args = SimpleNamespace()
    assert credit_quality.run(args, lambda method: cfg) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "optimal_actions" in out[0] and "skipped" in out[0]
