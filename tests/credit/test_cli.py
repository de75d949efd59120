"""``abc credit`` and ``abc plugins`` through the real console script: output, options and error exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .test_crbc import FINAL
from .toy import toy

ABC = [sys.executable, "-m", "agentbench_crbc"]


def run(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([*ABC, *args], capture_output=True, text=True, check=check)


@pytest.fixture
def toy_file(tmp_path: Path) -> Path:
    p = tmp_path / "toy.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    return p


def test_credit_reproduces_worked_example(toy_file: Path) -> None:
    res = run("credit", "crbc", str(toy_file), check=True)
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["steps"] for r in lines] == [r["steps"] for r in toy()]  # input carried through, in order
    for rec, want in zip(lines, FINAL, strict=True):
        np.testing.assert_allclose(rec["advantages"], want, atol=1e-4)


def test_options_parse_as_json_and_output_file_is_written(toy_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    run("credit", "crbc", str(toy_file), "--option", "depth=inf", "-O", "w_traj=0", "-O", "w_step=1",
        "-o", str(out), check=True)
    first = json.loads(out.read_text().splitlines()[0])
    assert first["advantages"][0] == pytest.approx(1.1339, abs=1e-4)
    assert not list(tmp_path.glob(".out.jsonl.*"))  # no temp file left behind


@pytest.mark.parametrize(("content", "message"), [
    ('{"group": "g", "steps": [{"anchor": "A", "action": "x"}], "success": true}\n{"group": "g", "steps": []',
     ":2: not valid JSON"),
    ('{"group": "g", "steps": [], "success": true}\n', ":1: 'steps' is empty"),
    ('{"group": "g", "steps": [{"anchor": "A"}], "success": true}\n', ":1: steps[0]: missing required field 'action'"),
    ('\n{"steps": [{"anchor": "A", "action": "x"}], "success": true}\n', ":2: missing required field 'group'"),
    ('{"group": "g", "steps": [{"anchor": "A", "action": "x"}], "success": "yes"}\n', ":1: 'success' must be"),
])
def test_malformed_input_exits_2_with_one_line(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    res = run("credit", "crbc", str(p))
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert str(p) + message in res.stderr and "Traceback" not in res.stderr


def test_unknown_option_method_and_missing_file(toy_file: Path, tmp_path: Path) -> None:
    res = run("credit", "crbc", str(toy_file), "-O", "gama=1")
    assert res.returncode == 2 and "unknown option 'gama'" in res.stderr
    res = run("credit", "gipgo", str(toy_file))
    assert res.returncode == 2 and "installed:" in res.stderr and "crbc" in res.stderr
    res = run("credit", "crbc", str(tmp_path / "nope.jsonl"))
    assert res.returncode == 2 and "no such file" in res.stderr
    out = tmp_path / "keep.jsonl"
    out.write_text("precious\n")
    res = run("credit", "crbc", str(tmp_path / "nope.jsonl"), "-o", str(out))
    assert res.returncode == 2 and out.read_text() == "precious\n"  # nothing half-written


def test_plugins_and_list(toy_file: Path) -> None:
    res = run("plugins", check=True)
    assert any(line.split()[1:3] == ["crbc", "agentbench-crbc"] for line in res.stdout.splitlines())
    assert "gigpo" in run("credit", "--list", check=True).stdout


def test_explain_text_and_json(toy_file: Path) -> None:
    res = run("credit", "crbc", str(toy_file), "--explain", check=True)
    assert "evidence coverage" in res.stdout and "0.4746" in res.stdout
    res = run("credit", "crbc", str(toy_file), "--explain", "--json", check=True)
    group = json.loads(res.stdout)
    assert group["coverage"]["0"] == pytest.approx(1.4)


def test_success_says_what_was_written_and_why_expert_groups_get_no_credit(toy_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    res = run("credit", "crbc", str(toy_file), "-o", str(out), check=True)
    n_steps = sum(len(r["steps"]) for r in toy())
    assert res.stderr == f"abc credit: crbc: 4 trajectories in 1 groups, {n_steps} steps -> {out}\n"
    assert run("credit", "crbc", str(toy_file), "-o", str(out), "--quiet", check=True).stderr == ""
    expert = tmp_path / "expert.jsonl"  # every rollout succeeds the same way: no variance, no step evidence
    expert.write_text("".join(json.dumps({"group": "e", "success": True, "steps": [
        {"anchor": "A", "action": "go"}, {"anchor": "B", "action": "go"}]}) + "\n" for _ in range(3)))
    res = run("credit", "crbc", str(expert), "-o", str(tmp_path / "e.jsonl"), check=True)
    assert res.stderr.endswith("; 1 group(s) with no outcome variance (every rollout ended alike): crbc gave them "
                               "no credit (all zero)\n")
    assert all(a == 0 for line in (tmp_path / "e.jsonl").read_text().splitlines()
               for a in json.loads(line)["advantages"])
    # what the line says comes from the method's output: pcgpo ranks an all-failure group's rollouts by coverage
    failed = tmp_path / "failed.jsonl"
    failed.write_text("".join(json.dumps({"group": "f", "success": False, "steps": [
        {"anchor": a, "action": "go"} for a in "ABC"[:n]]}) + "\n" for n in (1, 2, 3)))
    said = {m: run("credit", m, str(failed), "-o", str(tmp_path / f"{m}.jsonl"), check=True).stderr
            for m in ("pcgpo", "grpo")}
    assert said["pcgpo"].endswith("1 group(s) with no outcome variance (every rollout ended alike): pcgpo gave them "
                                  "step credit nonetheless\n")
    assert said["grpo"].endswith("grpo gave them no credit (all zero)\n")
    text = run("credit", "crbc", str(expert), "--explain", check=True).stdout
    assert "no step credit in this group: every anchor's gate is off" in text
    assert "no step credit" not in run("credit", "crbc", str(toy_file), "--explain", check=True).stdout


def test_dash_output_is_stdout(toy_file: Path, tmp_path: Path) -> None:
    res = run("credit", "crbc", str(toy_file), "-o", "-", "-q", check=True)
    assert len(res.stdout.splitlines()) == 4 and not (Path.cwd() / "-").exists()


def test_a_reader_that_stops_early_is_not_a_success(tmp_path, monkeypatch, capsys):
    # #31 item 7: `abc credit big.jsonl | head -c 10` exited 0, the summary saying all went to stdout
    import io
    import os

    from agentbench_crbc.cli import main

    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in toy()))

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            return os.open(os.devnull, os.O_WRONLY)

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["credit", "crbc", str(src)]) == 141
    err = capsys.readouterr().err
    assert "output is incomplete" in err and "-> stdout" not in err


@pytest.mark.parametrize("dash", [False, True])
def test_a_large_output_cut_by_its_reader_exits_141(tmp_path: Path, dash: bool) -> None:
    # #54 item 10: `abc credit grpo many.jsonl | head -c 10` (~500 KB) exited 0: one large write to a closed pipe
    # succeeded in CPython; written chunk by chunk, the closed pipe is seen
    src = tmp_path / "many.jsonl"
    src.write_text("".join(json.dumps({**r, "group": f"g{g}"}) + "\n" for g in range(600) for r in toy()))
    proc = subprocess.Popen([sys.executable, "-m", "agentbench_crbc", "credit", "grpo", str(src), "-q",
                             *(["-o", "-"] if dash else [])], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()  # the reader stops, as `head -c 10` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141, err
    assert err.strip().splitlines() == ["abc credit: standard output was closed before everything was written; the "
                                        "output is incomplete (write to a file with -o)"]
