"""benchmarks/golden.py: the first difference between two golden runs is named (a worked example), and ``check``
reruns the committed golden run here: bit for bit on the CPU model that made it; on another, the difference it finds
is the measured answer to whether runs agree across CPU types (docs/benchmarks.md, "Reproducibility")."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _golden():
    spec = importlib.util.spec_from_file_location("golden", ROOT / "benchmarks" / "golden.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(tensors, loss=0.5, after=0.25):
    return {"tensors": tensors, "result": {"updates": [{"step": 1, "loss": 0.1}, {"step": 2, "loss": loss}],
                                           "modes": {"t0.4": {"before": 0.125, "after": after}}}}


def test_the_first_differing_tensor_then_metric_then_success_is_named():
    g = _golden()
    a = _run({"embed": "aa", "layer.0": "bb", "head": "cc"})
    assert g.first_difference(a, a) is None
    assert g.first_difference(a, _run({"embed": "aa", "layer.0": "XX", "head": "YY"})) == "tensor layer.0"
    assert g.first_difference(a, _run({"embed": "aa", "layer.0": "bb"})) == "tensor head (present in one run only)"
    same = dict(a["tensors"])
    assert g.first_difference(a, _run(same, loss=0.5000001)) == "update 2 metric loss: 0.5 != 0.5000001"
    assert g.first_difference(a, _run(same, after=0.5)).startswith("held-out success: ")


def test_check_reruns_the_committed_golden_run_bit_for_bit():
    golden = json.loads((ROOT / "benchmarks" / "results" / "golden.json").read_text())
    got = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "golden.py"), "check"], capture_output=True,
                         text=True, timeout=1800)
    line = got.stdout.strip()
    from agentbench_crbc.trainer.kernels import cpu_model

    if got.returncode == 1 and cpu_model() != golden["made_on"]["cpu"]:
        pytest.xfail(f"another CPU type: {line}")  # the cross-type finding, reported, not a failure of the code
    assert got.returncode == 0 and line.startswith("match"), got.stdout + got.stderr[-2000:]
