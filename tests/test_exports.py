"""The public API: ``__all__`` sorted and complete in every core module (httpx's habit)."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["agentbench_crbc", "agentbench_crbc.errors", "agentbench_crbc.host", "agentbench_crbc.credit",
           "agentbench_crbc.testing", "agentbench_crbc.io", "agentbench_crbc.anchors", "agentbench_crbc.extras",
           "agentbench_crbc.credit.assign", "agentbench_crbc.credit.batch", "agentbench_crbc.credit.explain",
           "agentbench_crbc.credit.keys", "agentbench_crbc.credit.options", "agentbench_crbc.credit.records",
           "agentbench_crbc.credit.returns", "agentbench_crbc.credit.stats", "agentbench_crbc.credit.testing",
           "agentbench_crbc.credit.types", "agentbench_crbc.family", "agentbench_crbc.envcheck"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    assert list(mod.__all__) == sorted(mod.__all__)
    for attr in mod.__all__:
        assert getattr(mod, attr) is not None, attr


def test_core_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, agentbench_crbc, agentbench_crbc.credit as c; from tests.credit.toy import toy; "
            "c.assign('crbc', toy()); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
