"""One reader for file inputs (``io.read_text`` / ``io.read_json``) and one for ``metrics.jsonl``
(``trainer.metrics.read_metrics``): the run folder's readers, ``curves.png`` and ``abc bench`` go through them, and
so does every shipped module (``agentbench_crbc/``, ``plugins/``, ``envs/``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agentbench_crbc.errors import ConfigError, RecordError
from agentbench_crbc.io import read_json
from agentbench_crbc.trainer.metrics import read_metrics
from tests.shipped import shipped_files

PKG = Path(__file__).resolve().parents[1] / "agentbench_crbc"


def test_read_json_names_the_file_and_the_place(tmp_path):
    p = tmp_path / "state.json"
    p.write_text('{"update": 3}')
    assert read_json(p) == {"update": 3}
    p.write_text('{"update": ')
    with pytest.raises(ConfigError, match=r"^state.json: not valid JSON \(line 1 column 12: Expecting value\)$"):
        read_json(p, error=ConfigError, where="state.json")
    with pytest.raises(RecordError, match=r"no such file"):
        read_json(tmp_path / "missing.json")
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(RecordError, match="not UTF-8"):
        read_json(p)


def test_metrics_rows_keep_line_separators_inside_strings_and_skip_a_torn_tail(tmp_path):
    rows = [{"stage": "rl", "step": 1, "note": "a\u2028b\u0085c"}, {"stage": "rl", "step": 2}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + '{"stage": "rl", "st'
    (tmp_path / "metrics.jsonl").write_text(text, encoding="utf-8")
    assert read_metrics(tmp_path) == rows  # str.splitlines() would cut row 1 at U+2028 and drop it
    assert read_metrics(tmp_path / "nowhere") == []


#: Reads that do not go through ``io.read_text`` and why: binary files and /proc (no text to read), and the
#: trainer's (moved with the trainer's folding; #38 item 5), and calls named ``open`` that open no file.
#: repository path -> {(function, call)}.
NOT_TEXT_INPUTS: dict[str, set[tuple[str, str]]] = {
    "agentbench_crbc/rollout/engines/models.py": {("check_weights", "open")},  # a safetensors header: binary
    "agentbench_crbc/rollout/hosting/serve.py": {("_children", "open"), ("_is_mp_helper", "open")},  # /proc/PID/
    "agentbench_crbc/trainer/checkpoint.py": {("save_checkpoint", "open"), ("_sha256", "open")},  # binary
    "agentbench_crbc/trainer/metrics.py": {("rewind", "read_bytes")},  # the resume cut of metrics.jsonl (bytes)
    "envs/webshop/env.py": {("reset", "open"), ("step", "open")},  # WebShop.open: a page of the shop, not a file
}


def _reads(source: str) -> set[tuple[str, str]]:
    """(enclosing function, call) of every read in ``source`` that bypasses ``io.read_text``: a path's own
    ``read_text`` / ``read_bytes``, ``json.load`` / ``tomllib.load`` of a file object, ``open(...)`` or
    ``X.open(...)`` for reading, and ``.splitlines()`` of ``read_text``'s answer (JSON Lines and CSV split on
    ``"\n"`` only: ``io.text_lines``)."""
    found: set[tuple[str, str]] = set()

    def mode(call: ast.Call, at: int) -> str:
        args = [*call.args[at:at + 1], *(k.value for k in call.keywords if k.arg == "mode")]
        return args[0].value if args and isinstance(args[0], ast.Constant) else "r"

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Call):
                f = child.func
                if isinstance(f, ast.Attribute) and f.attr in ("read_text", "read_bytes", "load", "splitlines"):
                    recv = f.value
                    if f.attr in ("read_text", "read_bytes") or (
                            f.attr == "load" and isinstance(recv, ast.Name) and recv.id in ("json", "tomllib")) or (
                            f.attr == "splitlines" and isinstance(recv, ast.Call)
                            and getattr(recv.func, "id", getattr(recv.func, "attr", "")) == "read_text"):
                        found.add((where, f.attr))
                elif (isinstance(f, ast.Name) and f.id == "open" and "r" in mode(child, 1)) or (
                        isinstance(f, ast.Attribute) and f.attr == "open" and "r" in mode(child, 0)
                        and not (isinstance(f.value, ast.Name) and f.value.id in ("os", "webbrowser"))):
                    found.add((where, "open"))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def test_every_file_input_is_read_through_the_one_reader():
    """Every shipped module, package resources (prompt templates) included: what bypasses ``io.read_text`` is
    listed in :data:`NOT_TEXT_INPUTS` with its reason, and the list holds nothing that is gone."""
    seen = {}
    for rel, path in shipped_files():
        if rel == "agentbench_crbc/io.py":
            continue
        if reads := _reads(path.read_text(encoding="utf-8")):
            seen[rel] = reads
    assert {m: r - NOT_TEXT_INPUTS.get(m, set()) for m, r in seen.items() if r - NOT_TEXT_INPUTS.get(m, set())} == {}
    stale = {m: r - seen.get(m, set()) for m, r in NOT_TEXT_INPUTS.items() if r - seen.get(m, set())}
    assert not {m: r for m, r in stale.items() if not m.startswith("agentbench_crbc/trainer/")}, stale


def test_the_scan_catches_each_kind_of_bypass():
    src = ("import json\nfrom pathlib import Path\n"
           "def a(p): return Path(p).read_text()\n"
           "def b(p):\n    with open(p) as fh:\n        return json.load(fh)\n"
           "def c(p): return read_text(p).splitlines()\n"
           "def d(p): return p.open('rb').read()\n"
           "def ok(p):\n    with open(p, 'w') as fh:\n        fh.write(text_lines(read_text(p))[0])\n")
    assert _reads(src) == {("a", "read_text"), ("b", "open"), ("b", "load"), ("c", "splitlines"), ("d", "open")}


def _calls(source: str) -> list[int]:
    """Lines of ``X.read_text(...)`` calls (a path's own reader) in ``source``; packaged resources
    (``...joinpath(name).read_text``) are not file inputs."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "read_text":
            recv = node.func.value
            if isinstance(recv, ast.Call) and getattr(recv.func, "attr", "") == "joinpath":
                continue
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("module", ["trainer/checkpoint.py", "trainer/resume.py", "trainer/eval.py",
                                    "trainer/metrics.py",
                                    "bench/learning.py", "bench/schedule.py", "cli/serve.py",
                                    "leaderboard/reported.py"])
def test_run_folder_and_user_files_are_read_through_the_one_reader(module):
    assert _calls((PKG / module).read_text(encoding="utf-8")) == []
