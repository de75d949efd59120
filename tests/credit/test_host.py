"""The plugin host: built-ins through entry points, temporary plugins, duplicate and unknown names."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from agentbench_crbc import UnknownNameError, hookimpl
from agentbench_crbc.credit import assign
from agentbench_crbc.host import Host, get_plugin_manager

from .toy import toy


def test_builtins_come_from_this_distribution() -> None:
    host = Host()
    for name in ("grpo", "rloo", "gigpo", "crbc"):
        m = host.credit_method(name)
        assert m.distribution == "agentbench-crbc" and m.batched and m.plugin == name


def test_unknown_name_lists_installed_methods() -> None:
    with pytest.raises(UnknownNameError, match=r"'gipgo'; installed: .*crbc.*gigpo"):
        assign("gipgo", toy())


class _Half:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add("half", lambda group, *, k=0.5: [np.full(len(t.steps), k) for t in group.trajectories])


def test_temporary_plugin_registers_a_per_group_method() -> None:
    pm = get_plugin_manager()
    pm.register(_Half(), name="half-plugin")
    host = Host(pm)
    assert "half" in host.credit and host.credit_method("half").options == {"k": 0.5}
    out = assign("half", toy(), host=host, k=2)
    assert [o.tolist() for o in out] == [[2.0, 2.0], [2.0] * 3, [2.0] * 3, [2.0] * 3]


def test_abc_plugins_says_when_a_method_has_no_docstring(capsys) -> None:
    from agentbench_crbc.cli import main
    from agentbench_crbc.cli.plugins import NO_SUMMARY
    from agentbench_crbc.host import reset_host

    pm = get_plugin_manager()
    pm.register(_Half(), name="half-plugin")  # a lambda: no docstring
    reset_host(Host(pm))
    try:
        assert main(["plugins"]) == 0
    finally:
        reset_host(None)
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["half"].endswith(NO_SUMMARY) and not rows["crbc"].endswith(NO_SUMMARY)


class _Clash:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add("crbc", lambda group: [])


def test_duplicate_name_names_both_plugins_and_skips_the_newcomer() -> None:
    pm = get_plugin_manager()
    pm.register(_Clash(), name="clash")
    host = Host(pm)  # #31 item 10: one broken plugin, not a broken `abc`
    (broken,) = [b for b in host.broken if b.entry_point == "clash"]
    assert "DuplicateNameError" in broken.error and "'crbc' is registered by both crbc" in broken.error
    assert host.credit_method("crbc").plugin == "crbc"  # the built-in keeps its name


def test_disable_autoload_keeps_builtins() -> None:
    code = "from agentbench_crbc.host import Host; print(' '.join(Host().credit.names()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "ABC_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert {"crbc", "gigpo", "grpo", "rloo"} <= set(out.stdout.split())
