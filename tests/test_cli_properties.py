"""Adversarial properties of the CLI's file inputs (#24): whatever a credit records file, a leaderboard records
file, a tabular MDP file or a training TOML file holds, ``abc`` exits 0 or 2, prints no traceback, and on exit 2
changes no file. Bounded examples, in process (``agentbench_crbc.cli.main``), so it runs with the default tests."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbench_crbc.cli import main

from ._abc_run import run_fresh
from .credit.toy import toy
from .leaderboard.helpers import rec

EXAMPLES = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Values a hostile file puts where a good one has something else.
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([10**400, -(10**400), 2**63, -1, 0, 1]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -1e308, 5e-324, 1e154]),
    st.text(max_size=20), st.sampled_from(["", "\ud800", "\0", "x" * 200_000, "NaN", "inf", "1e999"]),
)
VALUES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                                          max_size=4), max_leaves=12)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _mutate(doc: Any, path: list[int], value: Any) -> Any:
    """``doc`` with the node that ``path`` picks (indices into its dict keys / list items) replaced by ``value``."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    if isinstance(doc, dict):
        keys = list(doc)
        k = keys[path[0] % len(keys)]
        return {**doc, k: _mutate(doc[k], path[1:], value)}
    i = path[0] % len(doc)
    return [*doc[:i], _mutate(doc[i], path[1:], value), *doc[i + 1:]]


def _dumps(doc: Any) -> str:
    def fix(x: Any) -> Any:  # JSON has no NaN; surrogates go out as escapes
        if isinstance(x, float) and not math.isfinite(x):
            return str(x)
        if isinstance(x, dict):
            return {str(k): fix(v) for k, v in x.items()}
        if isinstance(x, list):
            return [fix(v) for v in x]
        return x

    return json.dumps(fix(doc))


@st.composite
def hostile_text(draw: Any, base: Any, *, lines: bool) -> bytes:
    """A file derived from ``base`` (a JSON document, or a list of JSONL records when ``lines``): one node replaced,
    a key dropped, deep nesting, cut short, bad bytes, or noise."""
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "deep", "truncate", "bytes", "noise"]))
    docs = base if lines else [base]
    if kind == "mutate":
        i = draw(st.integers(0, len(docs) - 1))
        path = draw(st.lists(st.integers(0, 50), max_size=4))
        docs = [*docs[:i], _mutate(docs[i], path, draw(VALUES)), *docs[i + 1:]]
        text = "\n".join(_dumps(d) for d in docs) if lines else _dumps(docs[0])
    else:
        text = "\n".join(_dumps(d) for d in docs) if lines else _dumps(docs[0])
        if kind == "deep":
            text = text.replace("true", _deep(draw(st.sampled_from([100, 5000, 200_000]))), 1)
        elif kind == "truncate":
            text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
        elif kind == "noise":
            text = draw(st.text(max_size=200))
    data = text.encode("utf-8", errors="surrogatepass")
    if kind == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return data + b"\n"


def _check(argv_of: Any, data: bytes, name: str, setup: Any = None) -> None:
    """Run ``abc`` on ``data`` saved as ``name`` in a fresh folder; exit 0 or 2, no traceback, no change on 2."""

    def prepare(root: Path) -> None:
        (root / name).write_bytes(data)
        if setup is not None:
            setup(root)

    rc, text, changed = run_fresh(argv_of, prepare)
    assert rc in (0, 2), (rc, text[-2000:])
    assert "Traceback" not in text
    if rc == 2:
        assert text.strip() and len(text.strip().splitlines()) == 1, text[-2000:]
        assert not changed, text


@EXAMPLES
@given(hostile_text(toy(), lines=True))
def test_abc_credit_on_hostile_records(data):
    _check(lambda d: ["credit", "crbc", str(d / "r.jsonl"), "-o", str(d / "out.jsonl"), "-q"], data, "r.jsonl")


def _store(root: Path) -> None:
    (root / "store.jsonl").write_text(json.dumps(rec(method="kept").to_dict()) + "\n")


@EXAMPLES
@given(hostile_text([rec().to_dict(), rec(subtask="pick").to_dict()], lines=True))
def test_abc_leaderboard_add_on_hostile_records(data):
    _check(lambda d: ["leaderboard", "add", str(d / "eval.jsonl"), "--records", str(d / "store.jsonl")], data,
           "eval.jsonl", setup=_store)


MDP = {"horizon": 6, "start": {"s0": 1.0}, "success": ["goal"], "failure": ["pit"],
       "states": {"s0": {"anchor": "s0", "actions": {"left": {"policy": 0.5, "next": {"s1": 1.0}},
                                                    "right": {"policy": 0.5, "next": {"s0": 0.3, "goal": 0.7}}}},
                  "s1": {"actions": {"jump": {"policy": 1.0, "next": {"pit": 0.5, "s0": 0.5}}}}}}


@EXAMPLES
@given(hostile_text(MDP, lines=False))
def test_abc_bench_fidelity_on_hostile_mdp_files(data):
    _check(lambda d: ["bench", "fidelity", "--mdp", str(d / "mdp.json"), "--exact", str(d / "exact.json")], data,
           "mdp.json")


TOML = """updates = 3
seed = 1
[model]
name = "tiny"
tiny_hidden = 64
lora_targets = ["q_proj", "v_proj"]
[env]
id = "abc/SokobanText-v0"
max_steps = 4
[credit]
name = "crbc"
[credit.options]
w_step = 5.0
[optim]
lr = 1e-5
[eval]
episodes = 4
"""

TOML_VALUES = st.one_of(
    st.sampled_from(['""', '"\\u0000"', "-1", "0", "1e999", "nan", "inf", "1" + "0" * 400, "true", "[1, 2]",
                     "[" * 3000 + "]" * 3000, "{a = 1}", '"/tmp"', '"' + "x" * 100_000 + '"', "[[[]]]", "1979-05-27",
                     '"CartPole-v1"', '"../../etc"', "{}", '"none"']),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=12).map(json.dumps),
)


@st.composite
def hostile_toml(draw: Any) -> bytes:
    lines = TOML.splitlines()
    kind = draw(st.sampled_from(["value", "value", "value", "key", "bytes", "truncate"]))
    if kind in ("value", "key"):
        i = draw(st.sampled_from([k for k, ln in enumerate(lines) if " = " in ln]))
        key, _, _ = lines[i].partition(" = ")
        if kind == "value":
            lines[i] = f"{key} = {draw(TOML_VALUES)}"
        else:
            lines[i] = f"{draw(st.sampled_from(['nope', 'preset', '_x', 'a.b.c', 'options']))} = {draw(TOML_VALUES)}"
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass") + b"\n"
    if kind == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
    elif kind == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    return data


@EXAMPLES
@given(hostile_toml())
def test_abc_train_on_hostile_config_files(data):
    _check(lambda d: ["train", "--config", str(d / "c.toml"), "--set", f"out_dir={d / 'runs'}", "--print-config"],
           data, "c.toml")


# -- #31: --set and -O values, engine answers, plugin failures ------------------------------------------------------

#: What a hostile command line puts after ``KEY=``.
SET_VALUES = st.one_of(
    st.sampled_from(["1" + "0" * 400, "-" + "9" * 5000, "nan", "inf", "-inf", "1e999", "NaN", "Infinity", "", "null",
                     "true", "[]", "{}", '{"a": [1, {"b": null}]}', "[" * 3000 + "]" * 3000, "\0", "x" * 100_000,
                     "1e-400", "-0", "2**63", '"/etc/passwd"', "\u2028", "0x10", "1_000"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats().map(repr),
    st.text(max_size=12),
)
SET_KEYS = st.sampled_from(["updates", "seed", "optim.lr", "rollout.groups", "rollout.group_size", "eval.episodes",
                            "env.max_steps", "env.kwargs.size", "env.kwargs.max_steps", "env.kwargs.nope",
                            "credit.options.beta", "credit.options.depth", "model.name", "sft.steps", "threads",
                            "nope", "env", "optim", "credit.name", "rollout.engine", "out_dir.x"])


@EXAMPLES
@given(SET_KEYS, SET_VALUES)
def test_abc_train_on_hostile_set_values(key, value):
    _check(lambda d: ["train", "--set", f"out_dir={d / 'runs'}", "--set", f"{key}={value}", "--print-config"],
           b"", "unused")


@EXAMPLES
@given(st.sampled_from(["beta", "depth", "sigma_min", "w_step", "nope", ""]), SET_VALUES)
def test_abc_credit_on_hostile_option_values(key, value):
    _check(lambda d: ["credit", "crbc", str(d / "r.jsonl"), "-O", f"{key}={value}", "-o", str(d / "out.jsonl"),
                      "-q"], "".join(json.dumps(r) + "\n" for r in toy()).encode(), "r.jsonl")


# A fake engine answering each bad shape: ``bad_act:MODE`` (a text policy) and ``bad_gen:MODE`` (a token engine).
BAD_ANSWERS = {"raise": lambda n: 1 / 0, "few": lambda n: ["x"] * (n - 1), "none": lambda n: None,
               "generator": lambda n: (a for a in ["x"] * n), "extra": lambda n: ["x"] * (n + 1),
               "dict": lambda n: {i: "x" for i in range(n)}, "string": lambda n: "x" * n,
               "exit": lambda n: sys.exit(7)}  # #40 item 11: an engine's SystemExit ends no run silently
BAD_COMPLETIONS = {"oov": [10**9], "negative": [-1], "float": [1.5], "bool": [True], "text_ids": "abc",
                   "nested": [[1]]}
#: Log-probs no sampled token has (#40 item 11): each went into the records unflagged.
BAD_LOGPROBS = {"lp_posinf": [math.inf, 0.0], "lp_positive": [0.5, -0.1], "lp_missing": [], "lp_few": [-0.1],
                "lp_nan": [math.nan, 0.0], "lp_str": ["-0.1", 0.0], "lp_neginf": [-math.inf, 0.0]}


class _BadAct:
    from agentbench_crbc.rollout.episodes.base import EngineCapabilities

    capabilities = EngineCapabilities(acts=True)

    def __init__(self, mode):
        self.mode = mode

    def act(self, observations, infos, steps, sampling):
        if self.mode == "notstr":
            return [None] * len(observations)
        return BAD_ANSWERS[self.mode](len(observations))


class _BadGen:
    _tok = None

    def __init__(self, mode):
        from agentbench_crbc.rollout.engines.models import tiny_tokenizer
        from agentbench_crbc.rollout.episodes.base import EngineCapabilities

        if _BadGen._tok is None:
            _BadGen._tok = tiny_tokenizer()
        self.tokenizer, self.mode = _BadGen._tok, mode
        self.capabilities = EngineCapabilities(tokenizer=self.tokenizer)

    def generate(self, prompt_ids, sampling, images=None):
        from agentbench_crbc.rollout.episodes.base import Completion

        if self.mode in BAD_ANSWERS:
            return BAD_ANSWERS[self.mode](len(prompt_ids))
        if self.mode == "not_completion":
            return [("ids", [1])] * len(prompt_ids)
        if self.mode == "memory":
            raise MemoryError
        if self.mode in BAD_LOGPROBS:
            return [Completion((1, 2), BAD_LOGPROBS[self.mode], "stop", "") for _ in prompt_ids]
        ids = BAD_COMPLETIONS[self.mode]
        return [Completion(ids, [0.0] * len(ids), "stop", "") for _ in prompt_ids]

    def update_weights(self, state):
        pass

    def sleep(self):
        pass

    def wake_up(self):
        pass


class _BadEngines:
    from agentbench_crbc import hookimpl

    @hookimpl
    def abc_register_rollout_engines(self, register):
        register.add("bad_act", lambda request: _BadAct(request.spec))
        register.add("bad_gen", lambda request: _BadGen(request.spec))


@pytest.fixture(scope="module")
def bad_engines():
    from agentbench_crbc.host import Host, get_plugin_manager, reset_host

    pm = get_plugin_manager()
    pm.register(_BadEngines(), name="bad-engines")
    reset_host(Host(pm))
    yield
    reset_host(None)


@pytest.mark.parametrize("policy", [*(f"bad_act:{m}" for m in [*BAD_ANSWERS, "notstr"]),
                                    *(f"bad_gen:{m}" for m in [*BAD_ANSWERS, *BAD_COMPLETIONS, *BAD_LOGPROBS,
                                                              "not_completion"])])
def test_abc_rollout_on_each_bad_engine_answer(bad_engines, policy):
    name = policy.split(":")[0]
    argv = ["rollout", "--env", "sokoban", "--policy", policy, "--groups", "1", "--group-size", "2", "--workers",
            "0", "--max-steps", "2", "--max-tokens", "4"]
    with tempfile.TemporaryDirectory() as tmp:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([*argv, "-o", str(Path(tmp) / "out.jsonl")])
        text = err.getvalue()
        assert rc == 2 and "Traceback" not in text, text
        (line,) = text.strip().splitlines()
        assert line.startswith("abc rollout: error: rollout engine _Bad") and ".test_cli_properties" in line, line
        assert name.replace("bad_", "") in ("act", "gen") and not any(Path(tmp).iterdir())


def test_abc_rollout_when_the_engine_runs_out_of_memory(bad_engines):
    # #40 item 11: a MemoryError was a traceback; it is one line naming what to lower, exit 1 (a failed computation)
    argv = ["rollout", "--env", "sokoban", "--policy", "bad_gen:memory", "--groups", "1", "--group-size", "2",
            "--workers", "0", "--max-steps", "2", "--max-tokens", "4"]
    with tempfile.TemporaryDirectory() as tmp:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main([*argv, "-o", str(Path(tmp) / "out.jsonl")])
        (line,) = err.getvalue().strip().splitlines()
        assert rc == 1 and line.startswith("abc rollout: error: out of memory; lower the sizes") and not any(
            Path(tmp).iterdir())


# A fake distribution for each way a plugin can be broken; every `abc` command but the plugin's keeps working.
_FAMILY = """
from agentbench_crbc import hookimpl
from agentbench_crbc.family import EnvFamily, EnvId

def boom(sub):
    raise RuntimeError("commands exploded")

def takes_train(sub):
    sub.add_parser("train", help="mine now")

@hookimpl
def abc_register_env_families(register):
    register.add(EnvFamily(name={name!r}, label="X", ids=(EnvId({id!r}, "math:floor", 5),), default_id={id!r},
                           commands={commands!r}))
"""
_CREDIT = """
from agentbench_crbc import hookimpl

@hookimpl
def abc_register_credit_assigners(register):
    register.add({name!r}, lambda group: [[42.0] * len(t.steps) for t in group.trajectories])
"""
_ENGINE = """
from agentbench_crbc import hookimpl

@hookimpl
def abc_register_rollout_engines(register):
    register.add({name!r}, lambda request: None)
"""
BROKEN_DISTS = {
    "bad_commands_ref": {"pf_a": _FAMILY.format(name="pfref", id="pf/Ref-v0", commands="no_such_module_pf:register")},
    "commands_raise": {"pf_a": _FAMILY.format(name="pfboom", id="pf/Boom-v0", commands="pf_a:boom")},
    "commands_clash": {"pf_a": _FAMILY.format(name="pfclash", id="pf/Clash-v0", commands="pf_a:takes_train")},
    "duplicate_credit": {"pf_a": _CREDIT.format(name="crbc")},
    "duplicate_engine": {"pf_a": _ENGINE.format(name="hf")},
    "duplicate_family": {"pf_a": _FAMILY.format(name="sokoban", id="pf/Sok-v0", commands=None)},
    "duplicate_id": {"pf_a": _FAMILY.format(name="pfdup", id="abc/Sokoban-v0", commands=None)},
    "gym_id": {"pf_a": _FAMILY.format(name="pfcart", id="CartPole-v1", commands=None)},
    "two_third_parties": {"pf_a": _CREDIT.format(name="pfsame"), "pf_b": _CREDIT.format(name="pfsame")},
}
_PROBE = """
import contextlib, gymnasium, io, sys
from agentbench_crbc.cli import main
for argv in (["--version"], ["--help"]):
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code == 0, (argv, exc.code)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["plugins"]) == 0
broken = sorted({line.split()[1] for line in out.getvalue().splitlines() if line.startswith("broken")})
assert main(["credit", "crbc", sys.argv[1], "-q", "-o", sys.argv[2]]) == 0
from agentbench_crbc.credit import read_jsonl
assert all(s != 42.0 for r in read_jsonl(sys.argv[2]) for s in r["advantages"])
assert gymnasium.spec("CartPole-v1").entry_point.startswith("gymnasium.")
print("BROKEN", *broken)
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BROKEN_DISTS))
def test_a_broken_plugin_is_listed_and_every_other_command_works(kind, tmp_path):
    import os
    import subprocess
    import sys

    from .credit.test_plugin_trust import make_dist

    modules = BROKEN_DISTS[kind]
    site = make_dist(tmp_path / "site", f"pf-{kind.replace('_', '-')}", modules, {m: m for m in modules})
    records = tmp_path / "toy.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", _PROBE, str(records), str(tmp_path / "out.jsonl")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("BROKEN")]
    assert line.split()[1:] == sorted(modules), (line, res.stderr)
    assert all(ln.startswith("abc: plugin ") for ln in res.stderr.strip().splitlines()), res.stderr


def _odd_paths(root: Path) -> None:
    (root / "afile").write_text("kept\n")
    (root / "adir").mkdir()
    (root / "mdp.json").write_text(json.dumps(MDP))
    (root / "store.jsonl").write_text(json.dumps(rec(method="kept").to_dict()) + "\n")


ODD_OUTPUTS = ["afile/x", "adir", "/proc/version", "afile/deeper/x", "x" * 300]
PATH_COMMANDS = {
    "add": lambda d, out: ["leaderboard", "add", str(d / "eval.jsonl"), "--records", out],
    "import-reported": lambda d, out: ["leaderboard", "import-reported", str(REPORTED_CSV), "--records", out],
    "render": lambda d, out: ["leaderboard", "render", "--records", str(d / "store.jsonl"), "--out", out,
                              "--no-figures", "--reps", "50"],
    "bench-exact": lambda d, out: ["bench", "fidelity", "--mdp", str(d / "mdp.json"), "--exact", out],
    "credit": lambda d, out: ["credit", "crbc", str(d / "eval.jsonl"), "-o", out],
}
REPORTED_CSV = Path(__file__).resolve().parents[1] / "leaderboards" / "crbc_paper_reported.csv"


@pytest.mark.parametrize("out", ODD_OUTPUTS)
@pytest.mark.parametrize("command", list(PATH_COMMANDS))
def test_odd_output_paths_are_one_line_and_change_nothing(command, out):
    data = ("".join(json.dumps(r) + "\n" for r in toy()) if command == "credit"
            else json.dumps(rec().to_dict()) + "\n").encode()

    def argv(d):
        return PATH_COMMANDS[command](d, out if out.startswith("/") else str(d / out))

    _check(argv, data, "eval.jsonl", setup=_odd_paths)
