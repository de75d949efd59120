"""benchmarks/gpu_grid.sh --rehearse: the GPU grid's device command runs here on the CPU from a clean copy of the
tracked files, every cell of the slice writes its result line (with the kernels that computed it), and each gets a
time estimate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two cells of setup, two validations and an update each: minutes on a loaded CPU
def test_the_rehearsal_runs_every_cell_of_the_slice_from_a_clean_copy(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "GRID_PYTHON": sys.executable, "GRID_METHODS": "grpo,crbc"}
    got = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_grid.sh"), "--rehearse"], capture_output=True,
                         text=True, env=env, timeout=1800)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    rows = [json.loads(ln) for ln in (tmp_path / "grid" / "results.jsonl").read_text().splitlines()]
    assert sorted((r["cell"], r["seed"]) for r in rows) == [("crbc", 0), ("grpo", 0)]
    assert all(r["rc"] == 0 and r["after"] and r["kernels"]["torch"] for r in rows)
    assert got.stdout.count("a full cell (60 updates, 128 levels) at most about") == 2
    assert "gpu grid rehearsal: ok" in got.stdout
