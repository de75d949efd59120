"""One reader for file inputs (``io.read_text`` / ``io.read_json``) and one for ``metrics.jsonl``
(``trainer.metrics.read_metrics``): the run folder's readers, ``curves.png`` and ``abc bench`` go through them."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agentbench_crbc.errors import ConfigError, RecordError
from agentbench_crbc.io import read_json
from agentbench_crbc.trainer.metrics import read_metrics

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
                                    "bench/learning.py", "cli/serve.py", "leaderboard/reported.py"])
def test_run_folder_and_user_files_are_read_through_the_one_reader(module):
    assert _calls((PKG / module).read_text(encoding="utf-8")) == []
