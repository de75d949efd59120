"""Plugin trust: a method name clash across distributions skips the third party whatever the order; a broken plugin is
skipped with one line while the others keep working; a misbehaving method is one error naming its plugin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentbench_crbc import hookimpl
from agentbench_crbc.credit import assign
from agentbench_crbc.errors import CreditError
from agentbench_crbc.host import Host, get_plugin_manager

from .toy import toy

EVIL = """
from agentbench_crbc import hookimpl

@hookimpl
def abc_register_credit_assigners(register):
    register.add("crbc", lambda group: [[42.0] * len(t.steps) for t in group.trajectories])
"""

BROKEN = {
    "raises_at_import": "raise RuntimeError('boom at import')\n",
    "exits_at_import": "import sys\nsys.exit(3)\n",
    "hook_raises": "from agentbench_crbc import hookimpl\n\n@hookimpl\ndef abc_register_credit_assigners(register):\n"
                   "    register.add('half_done', lambda group: [])\n    raise ValueError('hook failed')\n",
    "not_callable": "from agentbench_crbc import hookimpl\n\n@hookimpl\ndef abc_register_credit_assigners(register):\n"
                    "    register.add('nothing', 42)\n",
}


def make_dist(root: Path, dist: str, modules: dict[str, str], entry_points: dict[str, str]) -> Path:
    """A minimal installed distribution (a ``.dist-info`` folder and its modules) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    eps = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[agentbench_crbc]\n{eps}")
    for mod, text in modules.items():
        (root / f"{mod}.py").write_text(text)
    return root


@pytest.mark.parametrize("first", [True, False], ids=["third-party-first", "third-party-last"])
def test_entry_point_named_like_a_builtin_is_a_clash_naming_both_distributions(tmp_path, monkeypatch, first):
    site = make_dist(tmp_path / "site", "evil-dist", {"evil": EVIL}, {"crbc": "evil"})
    if first:
        monkeypatch.syspath_prepend(str(site))
    else:
        monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    host = Host(get_plugin_manager())  # the third party is skipped whatever the order; the built-in works
    (broken,) = [b for b in host.broken if b.distribution == "evil-dist"]
    assert re.search(r"'crbc' is registered by both .*agentbench-crbc.* evil-dist", broken.error)
    assert host.credit_method("crbc").distribution == "agentbench-crbc"
    assert assign("crbc", toy(), host=host)[0][0] != 42.0


def test_broken_plugins_are_skipped_and_listed_the_rest_works(tmp_path, monkeypatch, caplog):
    eps = {name: name for name in BROKEN} | {"missing": "no_such_module_abc"}
    monkeypatch.syspath_prepend(str(make_dist(tmp_path / "site", "broken-dist", BROKEN, eps)))
    host = Host(get_plugin_manager())
    broken = {b.entry_point: b for b in host.broken}
    assert set(broken) == set(eps)
    assert all(b.distribution == "broken-dist" for b in broken.values())
    assert "boom at import" in broken["raises_at_import"].error
    assert "SystemExit" in broken["exits_at_import"].error
    assert "hook failed" in broken["hook_raises"].error
    assert "must be a function" in broken["not_callable"].error
    assert "ModuleNotFoundError" in broken["missing"].error
    assert "half_done" not in host.credit and "nothing" not in host.credit  # nothing half-registered
    assert len([r for r in caplog.records if "broken and was skipped" in r.getMessage()]) == len(eps)
    out = assign("grpo", toy(), host=host)
    assert [round(float(a[0]), 4) for a in out] == [0.866, -0.866, 0.866, -0.866]


def test_cli_lists_broken_plugins_and_other_commands_still_run(tmp_path):
    site = make_dist(tmp_path / "site", "broken-dist", BROKEN, {n: n for n in BROKEN})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-m", "agentbench_crbc", "plugins"], capture_output=True, text=True,
                         env=env)
    assert res.returncode == 0, res.stderr
    listed = [line.split()[:3] for line in res.stdout.splitlines() if line.startswith("broken")]
    assert sorted(row[1] for row in listed) == sorted(BROKEN) and {row[2] for row in listed} == {"broken-dist"}
    records = tmp_path / "toy.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    res = subprocess.run([sys.executable, "-m", "agentbench_crbc", "credit", "crbc", str(records), "-q"],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 4
    assert len(res.stderr.strip().splitlines()) == len(BROKEN)  # one line per broken plugin, no traceback
    assert "Traceback" not in res.stderr


def _exit(group):
    sys.exit(0)


def _raise(group):
    raise ZeroDivisionError("division by zero in the plugin")


MISBEHAVING = {
    "none": (lambda group: None, "NoneType"),
    "scalar": (lambda group: 1.0, "float"),
    "string": (lambda group: "abc", "str"),
    "ragged": (lambda group: [[1.0, [2.0]] for t in group.trajectories], "not an array of numbers"),
    "complex": (lambda group: [np.full(len(t.steps), 1 + 2j) for t in group.trajectories], "complex"),
    "raises": (_raise, "ZeroDivisionError: division by zero in the plugin"),
    "exits": (_exit, "SystemExit"),
    "batched_strings": (None, "expected real numbers"),
}


class _Misbehaving:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        for name, (fn, _) in MISBEHAVING.items():
            if fn is not None:
                register.add(name, fn)
        register.add_batched("batched_strings", lambda batch: np.array(["x"] * batch.n_steps))


@pytest.mark.parametrize("name", sorted(MISBEHAVING))
def test_misbehaving_method_is_one_error_naming_the_plugin(name):
    pm = get_plugin_manager()
    pm.register(_Misbehaving(), name="misbehaving-plugin")
    with pytest.raises(CreditError) as err:
        assign(name, toy(), host=Host(pm))
    msg = str(err.value)
    assert f"credit method {name!r} (plugin misbehaving-plugin" in msg and MISBEHAVING[name][1] in msg
    assert "\n" not in msg
