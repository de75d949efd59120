"""benchmarks/update_ablation.py: a result line names the revision the run's trainer started on, not the checkout's
at the run's end (which a long grid outlives)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("update_ablation", ROOT / "benchmarks" / "update_ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_revision_comes_from_the_runs_own_records(tmp_path):
    u = _script()
    (tmp_path / "eval").mkdir()
    rows = [{"subtask": "all", "revision": "0123456789ab+dirty"}, {"subtask": "1 move", "revision": "later"}]
    (tmp_path / "eval" / "records.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert u._run_revision(str(tmp_path)) == "0123456789ab+dirty"
    assert u._run_revision(str(tmp_path / "missing")) is None and u._run_revision(None) is None
