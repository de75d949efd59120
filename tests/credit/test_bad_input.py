"""`abc credit` on hostile input: one line and exit 2, never a traceback; numpy rewards; stdin; huge rewards;
explain's coverage equals the brute-force search it replaced."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.cli import main
from agentbench_crbc.credit import assign
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.closure import closure
from agentbench_crbc.errors import RecordError
from agentbench_crbc.plugins import crbc

from .toy import toy

GOOD = json.dumps(toy()[0])


def _line(**change: object) -> str:
    return json.dumps({**toy()[0], **change})


HOSTILE = {
    "lone surrogate": ('{"group": "\\ud800", "steps": [{"anchor": "A", "action": "a"}], "success": true}',
                       "lone surrogate"),
    "400-digit reward": (_line(reward=10 ** 400), "an integer of 401 digits"),
    "5000-digit reward": ('{"group": "g", "reward": ' + "9" * 5000 + ', "steps": [], "success": true}',
                          "not valid JSON"),
    "400-digit step reward": (_line(steps=[{"anchor": "A", "action": "a", "reward": 10 ** 400}]),
                              "steps[0]: 'reward' must be a finite number"),
    "deep anchor": ('{"group": "g", "steps": [{"anchor": ' + "[" * 100000 + "]" * 100000 +
                    ', "action": "a"}], "success": true}', "nested too deeply"),
    "huge reward": (_line(reward=1e154), "below 1e+150 in size"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_records_are_one_line_and_exit_2(case, tmp_path, capsys):
    text, expected = HOSTILE[case]
    path = tmp_path / "r.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    assert main(["credit", "grpo", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"abc credit: error: {path}:1") and expected in err and err.count("\n") == 1, err


@pytest.mark.parametrize("value", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_an_extra_field_strict_json_cannot_hold_is_one_line_and_nothing_written(value, tmp_path, capsys):
    # #54 item 1: these came out as Infinity/NaN with exit 0, which strict JSON readers refuse
    path, out = tmp_path / "r.jsonl", tmp_path / "out.jsonl"
    path.write_text(GOOD + "\n" + GOOD[:-1] + f', "meta": {{"v": [{value}]}}}}\n', encoding="utf-8")
    out.write_text("before\n")
    assert main(["credit", "grpo", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"abc credit: error: {path}: record 2: field meta.v[0]: ") and err.count("\n") == 1, err
    assert out.read_text() == "before\n"


@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_unwritable_output_is_one_line_and_exit_2(where, tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text(GOOD + "\n")
    (tmp_path / "file").write_text("")
    out = tmp_path if where == "directory" else tmp_path / "file" / "out.jsonl"
    assert main(["credit", "grpo", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"abc credit: error: -o {out}: cannot write there") and err.count("\n") == 1


def test_dash_reads_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(json.dumps(r) + "\n" for r in toy())))
    assert main(["credit", "grpo", "-"]) == 0
    firsts = [json.loads(line)["advantages"][0] for line in capsys.readouterr().out.splitlines()]
    assert firsts == pytest.approx([0.866, -0.866, 0.866, -0.866], abs=1e-3)


def test_numpy_rewards_through_the_python_api_equal_python_floats():
    plain = toy(reward=10.0)
    numpy = [{**r, "reward": np.float64(r["reward"]),
              "steps": [{**s, "reward": np.float32(0.5)} for s in r["steps"]]} for r in plain]
    want = assign("gigpo", [{**r, "steps": [{**s, "reward": 0.5} for s in r["steps"]]} for r in plain])
    assert [a.tolist() for a in assign("gigpo", numpy)] == [a.tolist() for a in want]
    ints = [{**r, "reward": np.int64(r["reward"])} for r in plain]
    assert [a.tolist() for a in assign("grpo", ints)] == [a.tolist() for a in assign("grpo", plain)]


def test_rewards_large_enough_to_overflow_the_std_are_rejected_not_zeroed():
    recs = toy()
    recs[0]["reward"] = 1e154
    with pytest.raises(RecordError, match=r"record 1: 'reward' must be a finite number below 1e\+150"):
        assign("grpo", recs)
    recs[0]["reward"] = 1e149  # the largest accepted size still gives the best trajectory positive credit
    assert assign("grpo", recs)[0][0] > 0


def _coverage_by_search(batch, c, idx, depths):
    """The breadth-first search per (anchor, action) that explain used before (quadratic; the reference)."""
    steps = np.flatnonzero(np.isin(batch.step_traj, idx))
    succ, trajs_of_state, trajs_of_sa, next_of_sa = {}, {}, {}, {}
    S = batch.n_states
    for k in steps.tolist():
        s, x, sa, i = int(batch.step_state[k]), int(batch.step_next[k]), int(c.step_sa[k]), int(batch.step_traj[k])
        trajs_of_state.setdefault(s, set()).add(i)
        trajs_of_sa.setdefault(sa, set()).add(i)
        if x < S:
            succ.setdefault(s, set()).add(x)
            next_of_sa.setdefault(sa, set()).add(x)
    out = {}
    eligible = [k for k in steps.tolist() if c.gate[batch.step_state[k]]]
    for K in depths:
        total = 0
        for k in eligible:
            sa = int(c.step_sa[k])
            seen = set(trajs_of_sa[sa])
            frontier, visited, hops = set(next_of_sa.get(sa, ())), set(), 0
            while frontier and (K is None or hops < K):
                visited |= frontier
                for s in frontier:
                    seen |= trajs_of_state[s]
                frontier = {y for s in frontier for y in succ.get(s, ())} - visited
                hops += 1
            total += len(seen)
        out["inf" if K is None else str(K)] = total / len(eligible) if eligible else 0.0
    return out


trajectory = st.tuples(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2)), min_size=1, max_size=12),
                       st.booleans())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(trajectory, min_size=1, max_size=6), min_size=1, max_size=3))
def test_explain_coverage_equals_the_search_it_replaced(groups):
    records = [{"group": f"g{g}", "success": ok, "steps": [{"anchor": a, "action": f"a{b}"} for a, b in steps]}
               for g, trajs in enumerate(groups) for steps, ok in trajs]
    batch = StepBatch.from_records(records)
    c = closure(batch, sigma_min=1e-9)
    depths = (0, 1, 2, 3, None)
    for idx in batch.group_trajectories():
        assert crbc._coverage(batch, c, idx, depths) == pytest.approx(_coverage_by_search(batch, c, idx, depths))
