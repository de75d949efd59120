"""The CLI property suite for sizes and values (#40 items 10-12): whatever number a size or value flag gets
(``1e12``, ``0``, ``-5``, ``nan``, ``inf``, a huge integer, a small good one), ``abc`` exits 0 or 2, prints no
traceback, and on exit 2 says why in one error line (argparse's usage lines before it) and changes no file.
In process (``agentbench_crbc.cli.main``) with few examples each, so it runs with the default tests on 2 loaded
cores; the values a command accepts are kept small, so an exit 0 is a short real run."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbench_crbc.cli import main

from ._abc_run import run_fresh
from .credit.toy import toy

#: Few examples (each exit 0 is a real run), no deadline; every test stays well inside its timeout at 3x load.
FEW = settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

#: What a hostile command line gives a size or value flag; the good values are small (an exit 0 runs briefly).
HOSTILE = st.one_of(
    st.sampled_from(["1e12", "1000000000000", "1e9", "0", "-5", "-3", "nan", "inf", "-inf", "1e300", "1e7", "",
                     "x", "65537", "1" + "0" * 400, "0x10", "1_0", "2.5", " 1", "-0", "100000", "101"]),
    st.integers(min_value=-3, max_value=2).map(str),
)


def _check(argv_of: Any, setup: Any = None) -> int:
    """Run ``abc`` in a fresh folder: exit 0 or 2, no traceback; on 2 one error line and no file changed."""
    rc, text, changed = run_fresh(argv_of, setup)
    assert rc in (0, 2), (rc, text[-2000:])
    assert "Traceback" not in text, text[-3000:]
    if rc == 2:
        lines = text.strip().splitlines()
        errors = [line for line in lines if line.startswith("abc ") and ": error: " in line]
        assert len(errors) == 1 and errors[0] == lines[-1], text[-2000:]
        assert all(line.startswith(("usage:", " ")) for line in lines[:-1]), text[-2000:]
        assert not changed, text[-2000:]
    return int(rc)


ROLLOUT_FLAGS = st.sampled_from(["--groups", "--group-size", "--max-steps", "--invalid-penalty", "--temperature",
                                 "--top-p", "--max-tokens", "--step-timeout", "--seed", "--sample-seed",
                                 "--workers"])


@pytest.mark.timeout(120)  # measured under 3 s on 2 loaded cores
@FEW
@given(ROLLOUT_FLAGS, HOSTILE)
def test_abc_rollout_on_hostile_sizes_and_values(flag, value):
    base = ["rollout", "--env", "sokoban", "--policy", "expert", "--groups", "1", "--group-size", "2",
            "--max-steps", "2", "--workers", "0", "--quiet"]
    if flag == "--workers" and value not in ("0", "-0"):
        value = "-1" if value.startswith("-") else value  # real worker processes only where refused
    _check(lambda d: [*base, f"{flag}={value}", "-o", str(d / "out.jsonl")])


@pytest.mark.timeout(120)  # measured under 3 s on 2 loaded cores
@FEW
@given(st.sampled_from(["size", "num_boxes", "max_steps", "cell_px", "tiny_scale", "min_moves"]), HOSTILE)
def test_abc_rollout_on_hostile_sokoban_sizes(key, value):
    _check(lambda d: ["rollout", "--env", "sokoban", "--groups", "1", "--group-size", "1", "--max-steps", "2",
                      "--workers", "0", "--quiet", "--set", f"{key}={value}", "-o", str(d / "out.jsonl")])


@pytest.mark.timeout(180)  # measured 8 s on 2 loaded cores
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["--episodes", "--temperature"]), HOSTILE)
def test_abc_eval_on_hostile_sizes_and_values(flag, value):
    # refused values are refused before the model loads; the few accepted ones validate 1-2 levels of the tiny model
    if flag == "--episodes" and value.strip().lstrip("-").isdigit() and int(value) > 2:
        value = str(-int(value))
    _check(lambda d: ["eval", "--model", "tiny", "--env", "sokoban", "--episodes", "1", "--no-greedy",
                      f"{flag}={value}", "--set", "eval.references=false", "--out", str(d / "eval")])


@pytest.mark.timeout(60)  # measured under 2 s on 2 loaded cores
@FEW
@given(HOSTILE)
def test_abc_leaderboard_show_on_hostile_reps(value):
    if value.strip().lstrip("-").isdigit() and int(value) > 200:
        value = str(-int(value))  # an accepted count bootstraps for real: keep it small
    _check(lambda d: ["leaderboard", "show", "--env", "sokoban", "--reps", value])


@pytest.mark.timeout(60)  # measured under 2 s on 2 loaded cores
@FEW
@given(st.sampled_from(["rollout.groups", "rollout.group_size", "eval.episodes", "eval.samples", "sft.pool",
                        "rollout.temperature", "eval.temperature", "env.invalid_penalty", "env.kwargs.size",
                        "env.kwargs.cell_px"]), HOSTILE)
def test_abc_train_on_hostile_sizes(key, value):
    _check(lambda d: ["train", "--set", f"out_dir={d / 'runs'}", "--set", f"{key}={value}", "--print-config"])


SERVE_FLAGS = st.sampled_from(["--port", "--max-sessions", "--idle-timeout", "--max-message-bytes",
                               "--max-observation-bytes", "--step-timeout", "--set size", "--set max_steps",
                               "--set num_boxes", "--set bogus_kw", "--set chromium"])


@pytest.mark.timeout(120)
@FEW
@given(SERVE_FLAGS, HOSTILE)
def test_abc_serve_on_hostile_sizes_and_values(flag, value):
    # #40 item 5: a start-up size or value abc serve takes is one it can serve with (a finite timeout, a level that
    # builds); any other is refused in one line before it listens (the serving loop is a stand-in here)
    import math

    import agentbench_crbc.rollout.hosting.serve as serve_mod

    started: list[Any] = []
    arg = ["--set", f"{flag[6:]}={value}"] if flag.startswith("--set ") else [f"{flag}={value}"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(serve_mod, "serve", lambda *a, **k: started.append(k["limits"]))
        mp.delenv("ABC_SERVE_TOKEN", raising=False)
        rc = _check(lambda d: ["serve", "--env", "sokoban", *arg])
    assert (rc == 0) == bool(started), (flag, value, rc)
    for limits in started:
        assert math.isfinite(limits.step_timeout) and 0 < limits.step_timeout <= 1e6
        assert math.isfinite(limits.idle_timeout) and 0 < limits.idle_timeout <= 1e6


def test_abc_credit_with_standard_output_closed_is_one_line(tmp_path, monkeypatch):
    # #40 item 12: `abc credit ... >&-` was an AttributeError; sys.stdout is None when Python starts that way
    import sys

    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["credit", "crbc", str(path), "-q"]) == 2
    (line,) = err.getvalue().strip().splitlines()
    assert line == ("abc credit: error: standard output is closed (started with >&-), so the result could not be "
                    "written; give -o FILE")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


#: The sizes and values #40 items 10 and 11 found accepted (or a traceback), each refused now before any work.
REFUSED = {
    "rollout --groups 1e12 (as an integer)": (["rollout", "--env", "sokoban", "--groups", "1000000000000"],
                                              "argument --groups: '1000000000000' is out of range"),
    "rollout --group-size 1e9": (["rollout", "--env", "sokoban", "--group-size", "1000000000"],
                                 "argument --group-size"),
    "rollout groups x group size": (["rollout", "--env", "sokoban", "--groups", "300", "--group-size", "300"],
                                    "= 90000 env copies; at most 65536"),
    "rollout --invalid-penalty nan": (["rollout", "--env", "sokoban", "--invalid-penalty", "nan"],
                                      "'nan' is not a finite number"),
    "rollout --invalid-penalty inf": (["rollout", "--env", "sokoban", "--invalid-penalty", "inf"],
                                      "'inf' is not a finite number"),
    "rollout --set size=10001": (["rollout", "--env", "sokoban", "--set", "size=10001"],
                                 "Expect `size` to be an integer in [4, 128]"),
    "eval --episodes 1e12": (["eval", "--model", "tiny", "--env", "sokoban", "--episodes", "1000000000000"],
                             "argument --episodes"),
    "eval --episodes -3": (["eval", "--model", "tiny", "--env", "sokoban", "--episodes", "-3"],
                           "'-3' is out of range; give an integer in [1, 100000]"),
    "eval --episodes 0": (["eval", "--model", "tiny", "--env", "sokoban", "--episodes", "0"], "'0' is out of range"),
    "eval --temperature -1": (["eval", "--model", "tiny", "--env", "sokoban", "--temperature", "-1"],
                              "'-1' is out of range; give a finite number in [0, 100]"),
    "eval --temperature nan": (["eval", "--model", "tiny", "--env", "sokoban", "--temperature", "nan"],
                               "'nan' is not a finite number"),
    "train rollout.groups=1e12": (["train", "--set", "rollout.groups=1000000000000", "--print-config"],
                                  "config key 'rollout.groups': must be an integer in [1, 65536]"),
    "sft sft.batch_size=1e12": (["sft", "--set", "sft.batch_size=1000000000000", "--print-config"],
                                "config key 'sft.batch_size': must be an integer in [1, 65536]"),
    "leaderboard show --reps 1e12": (["leaderboard", "show", "--reps", "1000000000000"], "argument --reps"),
    "leaderboard show --reps 0": (["leaderboard", "show", "--reps", "0"], "'0' is out of range"),
    "leaderboard show --reps -5": (["leaderboard", "show", "--reps", "-5"], "'-5' is out of range"),
    # the same flags of abc bench: --reps 0 / -5 were tracebacks after the rollouts, --groups 1e12 rolled out forever
    "bench credit --reps 0": (["bench", "credit", "--reps", "0"], "argument --reps: '0' is out of range"),
    "bench credit --reps -5": (["bench", "credit", "--reps", "-5"], "argument --reps: '-5' is out of range"),
    "bench credit --groups 1e12 (as an integer)": (["bench", "credit", "--groups", "1000000000000"],
                                                   "argument --groups: '1000000000000' is out of range"),
    "bench credit --group-size 1": (["bench", "credit", "--group-size", "1"], "argument --group-size"),
    "bench credit --groups x --reps": (["bench", "credit", "--groups", "4096", "--reps", "100000"],
                                       "bootstrap weights (at most 1e+08)"),
    "bench fidelity --groups 1e8 (as an integer)": (["bench", "fidelity", "--quick", "--groups", "100000000"],
                                                    "argument --groups: '100000000' is out of range"),
    "bench fidelity --updates -5": (["bench", "fidelity", "--quick", "--updates", "-5"],
                                    "argument --updates: '-5' is out of range"),
    "bench fidelity --updates 1e12 (as an integer)": (["bench", "fidelity", "--quick", "--updates", "1000000000000"],
                                                      "argument --updates"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(REFUSED))
def test_the_sizes_and_values_of_issue_40_are_refused_before_any_work(case, tmp_path, monkeypatch):
    import time

    argv, says = REFUSED[case]
    monkeypatch.chdir(tmp_path)  # anything written would land here
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    assert rc == 2 and "Traceback" not in err.getvalue()
    assert says in err.getvalue().strip().splitlines()[-1], err.getvalue()[-1000:]
    assert time.perf_counter() - t0 < 30 and not any(tmp_path.iterdir())  # no model loaded, no env built
