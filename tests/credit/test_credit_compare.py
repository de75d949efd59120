"""benchmarks/credit_compare.py draws the built-in methods only (the tracked figures) unless asked for plugins."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentbench_crbc import hookimpl
from agentbench_crbc.host import Host, get_plugin_manager, reset_host

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "credit_compare.py"


class _ThirdParty:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add("zz_third_party", lambda group: [np.zeros(len(t.steps)) for t in group.trajectories])


@pytest.fixture
def credit_compare():
    spec = importlib.util.spec_from_file_location("_credit_compare_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pm = get_plugin_manager()
    pm.register(_ThirdParty(), name="zz-third-party")  # as if installed from another distribution
    reset_host(Host(pm))
    yield module
    reset_host(None)


def test_builtins_only_unless_asked(credit_compare) -> None:
    builtins = credit_compare.methods()
    assert "zz_third_party" not in builtins and builtins[:3] == list(credit_compare.ORDER[:3])
    assert credit_compare.methods(all_plugins=True) == [*builtins, "zz_third_party"]


def test_all_plugins_never_writes_the_tracked_figures(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--all-plugins"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and "--all-plugins needs --out DIR" in r.stderr
