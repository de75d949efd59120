"""``abc leaderboard``: show, render, add RUN_DIR (duplicates and malformed refused, exit 2), import-reported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.leaderboard.records import read_records, write_records

from .helpers import PAPER_CSV, rec, two_method_run


def write_run(run_dir: Path, records: list, name: str = "eval/records.jsonl") -> Path:
    path = run_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def test_import_reported_then_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "records.jsonl"
    assert main(["leaderboard", "import-reported", str(PAPER_CSV), "--records", str(store)]) == 0
    assert "imported 173 reported record(s)" in capsys.readouterr().out
    assert len(read_records(store)) == 173
    assert main(["leaderboard", "show", "--env", "alfworld", "--model-scale", "1.5B", "--method", "crbc",
                 "--method", "gigpo", "--records", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## ALFWorld · 1.5B · reported\n\n| Method | Model | Type | Updates | pick | clean | cool | "
                          "look | heat | pick2 | All |")
    assert "| CRBC† | Qwen2.5-1.5B-Instruct | rl | 150 | **100.0 ± 0.0 (n=3)** |" in out
    assert "| GiGPO† |" in out and "GRPO" not in out and "7B" not in out
    assert "† reported, not measured here: Ren et al." in out
    # importing again is refused (exit 2, one line), --replace overwrites
    assert main(["leaderboard", "import-reported", str(PAPER_CSV), "--records", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "duplicate record" in err[0] and f"already in {store}:1" in err[0]
    assert main(["leaderboard", "import-reported", str(PAPER_CSV), "--records", str(store), "--replace"]) == 0


def test_add_run_dir_then_duplicate_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "records.jsonl"
    run = tmp_path / "runs" / "alfworld__crbc__tiny__0"
    write_run(run, two_method_run())
    assert main(["leaderboard", "add", str(run), "--records", str(store)]) == 0
    assert f"added 36 record(s) from {run / 'eval' / 'records.jsonl'}" in capsys.readouterr().out
    before = store.read_bytes()
    assert main(["leaderboard", "add", str(run), "--records", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"abc leaderboard: error: {run / 'eval' / 'records.jsonl'}:1: duplicate record (env=alfworld, "
                   "subtask=pick, model=tiny-qwen2, model_scale=tiny-1M, method=crbc, seed=0, update=0), already in "
                   f"{store}:1; it was added before (pass --replace to overwrite)"]
    assert store.read_bytes() == before
    assert main(["leaderboard", "show", "--records", str(store), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("env,model_scale,method,model,source,kind,update,metric,subtask,mean")


def test_add_refuses_malformed_record_naming_file_and_line(tmp_path: Path) -> None:
    store = tmp_path / "records.jsonl"
    write_records(store, [rec(seed=9)])
    before = store.read_bytes()
    path = write_run(tmp_path / "run", [rec(seed=0), rec(seed=1)])
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"success": 0.5', '"success": 50')
    path.write_text("\n".join(lines) + "\n")
    res = subprocess.run([sys.executable, "-m", "agentbench_crbc", "leaderboard", "add", str(tmp_path / "run"),
                          "--records", str(store)], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"abc leaderboard: error: {path}:2: success must be a fraction in "
                                               "[0, 1], got 50 (divide a percentage by 100)"]
    assert store.read_bytes() == before


def test_malformed_store_refused_by_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "records.jsonl"
    write_records(store, [rec(seed=0), rec(seed=1)])
    store.write_text(store.read_text() + store.read_text().splitlines()[0] + "\n")
    assert main(["leaderboard", "show", "--records", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"abc leaderboard: error: {store}:3: duplicate record")
    assert err[0].endswith("already at line 1; remove one of them")


def test_missing_inputs_exit_2_with_a_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", "add", str(tmp_path), "--records", str(tmp_path / "r.jsonl")]) == 2
    assert f"{tmp_path / 'eval' / 'records.jsonl'}: no such file; a run folder holds" in capsys.readouterr().err
    flat = write_run(tmp_path / "flat", [rec()], name="eval.jsonl")  # the flat layout is found too
    assert main(["leaderboard", "add", str(tmp_path / "flat"), "--records", str(tmp_path / "r.jsonl")]) == 0
    assert f"from {flat}" in capsys.readouterr().out
    (tmp_path / "r.jsonl").unlink()
    assert main(["leaderboard", "show", "--records", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl: no such file; pass another --records" in capsys.readouterr().err
    write_records(tmp_path / "r.jsonl", [rec()])
    assert main(["leaderboard", "show", "--env", "webshop", "--records", str(tmp_path / "r.jsonl")]) == 2
    assert "no records match env=webshop" in capsys.readouterr().err


def test_render_writes_the_board(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "records.jsonl"
    write_records(store, two_method_run())
    out = tmp_path / "board"
    assert main(["leaderboard", "render", "--records", str(store), "--out", str(out), "--reps", "500"]) == 0
    printed = capsys.readouterr().out.split()
    assert str(out / "board.md") in printed and str(out / "figures" / "alfworld_tiny-1M_curves.png") in printed
    assert "| CRBC | tiny-qwen2 |" in (out / "board.md").read_text()


def test_add_own_run_beside_shipped_rows_with_same_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user's run of the defaults (same env, method, model, seed, update as a shipped row) is its own record:
    the run folder's name is part of the key, and the board counts it as a second sample."""
    import dataclasses

    store = tmp_path / "records.jsonl"
    write_records(store, [rec("crbc", 0, 10, "all", 0.5)])  # a shipped row: no run name
    run = tmp_path / "runs" / "alfworld__crbc__tiny__0__20261201-120000"
    write_run(run, [dataclasses.replace(rec("crbc", 0, 10, "all", 0.7), run=run.name)])
    assert main(["leaderboard", "add", str(run), "--records", str(store)]) == 0
    assert "added 1 record(s)" in capsys.readouterr().out
    assert [r.run for r in read_records(store)] == [None, run.name]
    assert main(["leaderboard", "show", "--records", str(store)]) == 0
    assert "| **60.0 ± 14.1 (n=2)** |" in capsys.readouterr().out  # mean and sample std of 0.5 and 0.7
    assert main(["leaderboard", "add", str(run), "--records", str(store)]) == 2  # the same run again: refused
    assert f"run={run.name}), already in {store}:2" in capsys.readouterr().err


def _line(field: str, value: str) -> str:
    """One record line with ``field`` replaced by raw JSON text ``value``."""
    data = rec(seed=7).to_dict()
    data[field] = "@@"
    return json.dumps(data).replace('"@@"', value)


@pytest.mark.parametrize(("line", "message"), [
    (_line("success", "0." + "5" * 400), None),  # a long decimal is a float: accepted
    (_line("success", "1" + "0" * 400), r"success must be a finite number or null, got an integer of 401 digits"),
    (_line("update", "1" + "0" * 400), r"update must be an integer >= 0 .* got an integer of 401 digits"),
    (_line("seed", "1" + "0" * 30), r"seed must be an integer in \[0, 2\*\*63 - 1\]"),
    (_line("seed", "-1"), r"seed must be an integer in \[0, 2\*\*63 - 1\] \(as abc train takes it\) or null, got -1"),
    (_line("model", '"a\u2028b"'), r"field 'model' holds a line separator \(U\+2028\)"),
    (_line("model", '"a\u2029b"'), r"field 'model' holds a line separator \(U\+2029\)"),
    (_line("method", '"a\u0085b"'), r"field 'method' holds a control character \(U\+0085\)"),
    (_line("success", "NaN"), r"field 'success' holds NaN, which is not a finite number"),
    (_line("score", "-Infinity"), r"field 'score' holds -Infinity, which is not a finite number"),
    (_line("env", '"' + "a" * 100_000 + '"'), r"field 'env' is 100,000 characters long; at most 200"),
    (_line("subtask", '"' + "b" * 100_000 + '"'), r"field 'subtask' is 100,000 characters long"),
    (_line("model", '"bad\\ud800"'), r"field 'model' holds a lone surrogate"),
    (_line("kind", '"anything"'), r"kind 'anything' must be one of rl, sft, prompting"),
    (_line("method", '"two\\nlines"'), r"field 'method' holds a control character"),
    ("[" * 50_000 + "]" * 50_000, r"JSON nested too deeply"),
    (_line("success", "1" + "0" * 5000), r"Exceeds the limit|digits"),
])
def test_add_refuses_hostile_records_in_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str | None) -> None:
    store = tmp_path / "records.jsonl"
    write_records(store, [rec(seed=1)])
    before = store.read_bytes()
    run = tmp_path / "run" / "eval" / "records.jsonl"
    run.parent.mkdir(parents=True)
    run.write_text(line + "\n")
    code = main(["leaderboard", "add", str(tmp_path / "run"), "--records", str(store)])
    err = capsys.readouterr().err.strip()
    if message is None:
        assert code == 0, err
        return
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err[:500]
    assert re.search(message, err), err[:500]
    assert store.read_bytes() == before


def test_import_reported_refuses_a_huge_field_and_unknown_type(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "records.jsonl"
    head = "env,model,type,method,subtask,metric,mean,std,seeds\n"
    for body, message in (
        ('alfworld,"' + "m" * 140_000 + '",rl,CRBC,pick,success_pct,50,,\n', r"not a readable CSV \(field larger"),
        ("alfworld,qwen,whatever,CRBC,pick,success_pct,50,,\n", r"kind 'whatever' must be one of"),
    ):
        csv_path = tmp_path / "reported.csv"
        csv_path.write_text(head + body)
        assert main(["leaderboard", "import-reported", str(csv_path), "--records", str(store)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and re.search(message, err), err[:300]
        assert not store.exists()
