"""The docs quote the default's measured numbers as its committed result holds them: every "before -> after RL"
number of the default (`abc train --credit crbc`, the ``crbc`` cell of ``benchmarks/results/default.jsonl``) in
README.md and docs/*.md is that file's, seed for seed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "default.jsonl"
DEFAULT_CELL = "crbc"  # update_ablation.py's cell of the default (README: "the default's seeds")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: the default's table rows: "| held-out success, T = 0.4: before -> after RL | 21.5% -> 36.7% | ..."
_T04 = re.compile(r"^\| held-out success, T = 0\.4: before -> after RL \|(.*)$", re.M)
_GAIN = re.compile(r"^\| \*\*gain of RL, T = 0\.4 \(95% interval\)\*\* \|(.*)$", re.M)
#: a seed table: "| seed | 0 | 1 | ..." then "|---|...", then "| before -> after RL | 21.5 -> 36.7% | ..."
_SEEDS = re.compile(r"^\| seed \|(.*)\n\|[-| ]+\n\| before -> after RL \|(.*)$", re.M)
_PAIR = re.compile(r"(\d+\.\d)%? -> (\d+\.\d)%")
_POINTS = re.compile(r"([+-]\d+\.\d) points")


def _committed() -> dict[int, tuple[float, float, float]]:
    """seed -> (before, after, gain) in points at T = 0.4, rounded as the docs print them."""
    out = {}
    for line in RESULT.read_text().splitlines():
        row = json.loads(line)
        if row["cell"] != DEFAULT_CELL:
            continue
        before, after = row["before"], row["after"]
        assert before.keys() == after.keys()  # the same held-out levels before and after
        b = 100 * sum(before.values()) / len(before)
        a = 100 * sum(after.values()) / len(after)
        out[int(row["seed"])] = (round(b, 1), round(a, 1), round(a - b, 1))
    return out


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def test_the_committed_result_has_the_default_seeds() -> None:
    assert set(_committed()) >= {0, 1, 2, 3, 4, 5, 6}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_a_doc_quotes_the_defaults_numbers_as_committed(doc: Path) -> None:
    text, runs = doc.read_text(encoding="utf-8"), _committed()
    pairs = {(b, a) for b, a, _ in runs.values()}
    gains = {g for *_, g in runs.values()}
    for row in _T04.findall(text):
        for cell in _cells(row):
            m = _PAIR.search(cell)
            assert m, f"{doc.name}: unreadable cell {cell!r}"
            got = (float(m[1]), float(m[2]))
            assert got in pairs, f"{doc.name}: the default's T = 0.4 before -> after {got} is in no committed run " \
                                 f"of {DEFAULT_CELL} ({sorted(pairs)})"
    for row in _GAIN.findall(text):
        for cell in _cells(row):
            m = _POINTS.search(cell)
            assert m and float(m[1]) in gains, f"{doc.name}: the default's gain {cell!r} is in no committed run"
    for header, values in _SEEDS.findall(text):
        seeds = [int(re.match(r"\d+", c)[0]) for c in _cells(header)]
        for seed, cell in zip(seeds, _cells(values), strict=True):
            m = _PAIR.search(cell)
            assert m and seed in runs, f"{doc.name}: seed {seed}: {cell!r}"
            assert (float(m[1]), float(m[2])) == runs[seed][:2], \
                f"{doc.name}: seed {seed} quoted {cell!r}, committed {runs[seed][:2]}"


def test_the_check_catches_a_stale_quote(tmp_path: Path) -> None:
    """An earlier default's table (T = 0.4: 21.5% -> 37.3%) is in no committed run of the default: caught."""
    assert (21.5, 37.3) not in {(b, a) for b, a, _ in _committed().values()}
    assert (21.5, 36.7) not in {(b, a) for b, a, _ in _committed().values()}  # the default before the savings
    m = _T04.search("| held-out success, T = 0.4: before -> after RL | 21.5% -> 37.3% | 21.1% -> 46.9% |\n")
    assert m and [_PAIR.search(c).groups() for c in _cells(m[1])] == [("21.5", "37.3"), ("21.1", "46.9")]
