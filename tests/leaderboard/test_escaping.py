"""Boards render record and plugin text inert, per format (#40 items 7 and 8): no live HTML, image or link in
``show``, ``board.md`` or the fidelity tables, no formula in their CSV; ``add`` never lets a row pass for the
paper's."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.leaderboard.records import RunRecord, read_records
from agentbench_crbc.leaderboard.store import REPORTED_DATA
from agentbench_crbc.textsafe import csv_safe, md_code, md_text

from .helpers import rec

HOSTILE = ["<script>alert(1)</script>", "![x](http://evil.example/p.png)", "[x](javascript:alert(1))",
           "a|b", "**best**", "`code`", "__init__", "x\\[y](javascript:z)"]

#: Markdown that is live: a raw tag, an image or link whose bracket is not escaped, an unescaped cell bar.
_LIVE = re.compile(r"<[a-zA-Z/]|(?<!\\)!?(?<!\\)\[[^\]]*(?<!\\)\]\(")


def _prose(md: str) -> str:
    """``md`` without its code spans (shown literally) and its own figure lines (a local PNG file name)."""
    lines = [ln for ln in md.splitlines() if not re.fullmatch(r"!\[[^\]]*\]\([A-Za-z0-9._%-]+\.png\)", ln)]
    return "\n".join(re.sub(r"(`+).*?\1", "", ln) for ln in lines)


def _write(path: Path, records: list[RunRecord]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def test_md_text_leaves_no_link_image_tag_or_cell():
    for text in HOSTILE:
        out = md_text(text)
        assert not _LIVE.search(out), out
        assert "|" not in out.replace("\\|", "")
        assert "**" not in out.replace("\\*", "")
    assert md_text("crbc_depth0 (n=3) 1.5B-Instruct") == "crbc_depth0 (n=3) 1.5B-Instruct"  # plain text stays
    assert md_text("a\nb") == "a b"
    assert md_code("x ` y") == "``x ` y``" and md_code("plain") == "`plain`"
    assert csv_safe("=HYPERLINK(1)") == "'=HYPERLINK(1)" and csv_safe("crbc") == "crbc"


@pytest.mark.parametrize("text", HOSTILE)
def test_show_escapes_record_text_in_headings_and_cells(tmp_path, capsys, text):
    store = _write(tmp_path / "records.jsonl", [
        dataclasses.replace(rec("crbc", s), model_scale=text, model=text) for s in range(2)])
    assert main(["leaderboard", "show", "--records", str(store), "--reps", "50"]) == 0
    out = capsys.readouterr().out
    heading = out.splitlines()[0]
    assert heading.startswith("## ALFWorld · ") and not _LIVE.search(heading), heading
    assert not _LIVE.search(out), out
    body = [ln for ln in out.splitlines() if ln.startswith("| CRBC")]
    cells = [re.split(r"(?<!\\)\|", ln) for ln in body]
    assert cells and all(len(c) == 8 and c[2] == f" {md_text(text)} " for c in cells), body  # no extra cell
    assert all("**" not in c[2].replace("\\*", "") and "`" not in c[2].replace("\\`", "") for c in cells)


def test_show_and_board_md_escape_a_reported_row_citation_and_scale(tmp_path, capsys):
    shipped = read_records(REPORTED_DATA)[0]
    forged = dataclasses.replace(shipped, citation="[paper](javascript:alert(1)) ![i](http://e/x.png)",
                                 model_scale="<img src=x onerror=alert(1)>")
    store = _write(tmp_path / "records.jsonl", [forged])
    assert main(["leaderboard", "show", "--records", str(store), "--reps", "50"]) == 0
    out = capsys.readouterr().out
    assert not _LIVE.search(out), out
    assert "&lt;img" in out
    pytest.importorskip("pandas")
    assert main(["leaderboard", "render", "--records", str(store), "--out", str(tmp_path / "b"), "--no-figures",
                 "--reps", "50"]) == 0
    md = (tmp_path / "b" / "board.md").read_text()
    assert not _LIVE.search(_prose(md)), md
    assert "<img" not in (tmp_path / "b" / "board.html").read_text().split("<body>")[1].replace(
        '<p><img src="figures/', "")


def _fidelity_rows(family: str, method: str):
    from agentbench_crbc.bench.metrics import METRICS, Estimate
    from agentbench_crbc.bench.rows import FidelityRow

    e = Estimate(0.5, 0.4, 0.6, np.zeros(3))
    metrics = {m: e for m in METRICS}
    return [FidelityRow(family, family + "-setting", 8, method, metrics, e, {"success_rate": 0.5, "steps": 10})]


@pytest.mark.parametrize("name", ["=HYPERLINK(\"http://evil\",\"x\")", "<img src=x onerror=alert(1)>",
                                  "+cmd|' /C calc'!A0", "@SUM(A1)", "-2+3", "[x](javascript:alert(1))"])
def test_fidelity_tables_escape_third_party_names(tmp_path, name):
    from agentbench_crbc.bench.learn import LearnConfig
    from agentbench_crbc.bench.report import write_report

    write_report(tmp_path, _fidelity_rows(name, name), {}, LearnConfig(updates=1, seeds=1, eval_every=1),
                 command=f"abc bench fidelity --family {name}", elapsed=1.0)
    rows = list(csv.reader(io.StringIO((tmp_path / "fidelity.csv").read_text())))
    for cell in (rows[1][0], rows[1][1], rows[1][3]):
        assert not cell.startswith(("=", "+", "-", "@")), cell
    assert rows[1][4] == "0.5"  # numbers stay numbers
    md = (tmp_path / "fidelity.md").read_text()
    assert not _LIVE.search(_prose(md)), md
    assert md_code(f"abc bench fidelity --family {name}") in md


def test_add_refuses_a_reported_row_and_a_paper_row_copy(tmp_path, capsys):
    shipped = read_records(REPORTED_DATA)[0]
    store = _write(tmp_path / "store.jsonl", [rec("crbc", 0)])
    before = store.read_bytes()
    copy = {**shipped.to_dict(), "run": "x", "success": 0.01}  # made-up numbers passing for the paper's
    src = tmp_path / "run" / "eval" / "records.jsonl"
    src.parent.mkdir(parents=True)
    src.write_text(json.dumps(copy) + "\n")
    assert main(["leaderboard", "add", str(tmp_path / "run"), "--records", str(store)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "reported row has none" in line and f"{src}:1" in line
    src.write_text(json.dumps({**shipped.to_dict(), "model": "my-model"}) + "\n")  # a reported row of one's own
    assert main(["leaderboard", "add", str(tmp_path / "run"), "--records", str(store)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "only measured records are added" in line and "import-reported" in line
    assert store.read_bytes() == before


def test_a_row_colliding_with_a_shipped_row_is_refused_and_show_keeps_working(elsewhere, capsys, monkeypatch):
    shipped = read_records(REPORTED_DATA)[0]
    src = elsewhere / "run" / "eval" / "records.jsonl"
    src.parent.mkdir(parents=True)
    src.write_text(json.dumps({**shipped.to_dict(), "success": 0.01}) + "\n")
    assert main(["leaderboard", "add", str(elsewhere / "run")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "shipped paper row" in line and str(src) in line
    store = elsewhere / "data" / "agentbench-crbc" / "records.jsonl"
    assert not store.exists()
    assert main(["leaderboard", "show", "--reps", "50"]) == 0  # every later show still works
    capsys.readouterr()
    # import-reported of changed paper numbers into the user store: refused the same way
    from agentbench_crbc.leaderboard import reported

    monkeypatch.setattr(reported, "read_reported_csv",
                        lambda *a, **k: [dataclasses.replace(shipped, success=0.01)])
    assert main(["leaderboard", "import-reported", str(src)]) == 2
    assert "shipped paper row" in capsys.readouterr().err and not store.exists()
    assert main(["leaderboard", "show", "--reps", "50"]) == 0


def test_in_a_checkout_a_row_colliding_with_a_committed_row_is_refused_and_show_keeps_working(elsewhere, capsys):
    # show in a checkout reads leaderboards/records.jsonl under the user's store: a user row with a committed row's
    # key and other numbers made every later show fail there
    committed = rec("crbc", 0)
    _write(elsewhere / "cwd" / "leaderboards" / "records.jsonl", [committed])
    src = _write(elsewhere / "run" / "eval" / "records.jsonl", [dataclasses.replace(committed, success=0.99)])
    assert main(["leaderboard", "add", str(elsewhere / "run")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a row of leaderboards/records.jsonl and other numbers" in line and str(src) in line
    assert not (elsewhere / "data" / "agentbench-crbc" / "records.jsonl").exists()
    assert main(["leaderboard", "show", "--reps", "50"]) == 0
    capsys.readouterr()
    _write(src, [committed])  # the same row is no collision
    assert main(["leaderboard", "add", str(elsewhere / "run")]) == 0
    assert main(["leaderboard", "show", "--reps", "50"]) == 0
