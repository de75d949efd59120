"""Concurrent `abc leaderboard add` on one store keeps every record; board.csv cells cannot run as formulas."""

from __future__ import annotations

import csv
import multiprocessing as mp
from pathlib import Path

from agentbench_crbc.cli import main
from agentbench_crbc.leaderboard.aggregate import build_boards
from agentbench_crbc.leaderboard.records import read_records, write_records
from agentbench_crbc.leaderboard.report import csv_safe, summary_csv

from .helpers import rec


def _add(store: str, src: str, go: object) -> None:
    go.wait()  # type: ignore[attr-defined]
    raise SystemExit(main(["leaderboard", "add", src, "--records", store]))


def test_parallel_adds_lose_no_record(tmp_path):
    store = tmp_path / "records.jsonl"
    write_records(store, [rec(seed=100)])
    srcs = []
    for i in range(10):
        srcs.append(tmp_path / f"run{i}.jsonl")
        write_records(srcs[-1], [rec(seed=i)])
    ctx = mp.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=_add, args=(str(store), str(s), go)) for s in srcs]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 10
    assert sorted(r.seed for r in read_records(store)) == [*range(10), 100]


def test_csv_cells_starting_like_a_formula_are_escaped(tmp_path):
    evil = rec(model="=HYPERLINK(\"http://x\")", method="-crbc")
    assert csv_safe("@SUM(A1)") == "'@SUM(A1)" and csv_safe("+1") == "'+1" and csv_safe("crbc") == "crbc"
    assert csv_safe(-0.5) == -0.5
    rows = list(csv.DictReader(summary_csv(build_boards([evil])).splitlines()))
    assert rows and all(r["model"] == "'=HYPERLINK(\"http://x\")" and r["method"] == "'-crbc" for r in rows)
    assert all(not v.startswith(("=", "+", "@")) for r in rows for v in r.values())
    write_records(tmp_path / "r.jsonl", [evil])
    assert main(["leaderboard", "render", "--records", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "o")]) == 0
    text = Path(tmp_path / "o" / "board.csv").read_text()
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text
