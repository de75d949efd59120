"""Names a plugin chooses end up in run folders and printed command lines (#40 item 7): a name that is not an
identifier is refused at registration, a run folder never lands outside ``out_dir``, and ``abc bench --dry-run``
prints command lines a shell reads back as the same arguments."""

from __future__ import annotations

import contextlib
import io
import shlex
from types import SimpleNamespace

import pytest

from agentbench_crbc import hookimpl
from agentbench_crbc.cli import main
from agentbench_crbc.errors import ConfigError
from agentbench_crbc.host import Host, get_plugin_manager, reset_host

BAD_NAMES = ["../../../../tmp/x", "a b", "x;rm -rf y", "caf\u00e9", "1st", "", "a-b", "$(id)"]


def _grpo_like(group, **options):
    import numpy as np

    return [np.zeros(len(t.steps)) for t in group.trajectories]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_credit_method_or_gate_named_like_a_path_is_refused(name):
    class Plugin:
        @hookimpl
        def abc_register_credit_assigners(self, register):
            register.add(name, _grpo_like)

        @hookimpl
        def abc_register_group_gates(self, register):
            register.add(name + "_gate" if name else "", lambda actions, step: False)

    pm = get_plugin_manager()
    pm.register(Plugin(), name="odd-names")
    host = Host(pm)
    assert name not in host.credit.names() and name + "_gate" not in host.gates.names()
    (broken,) = [b for b in host.broken if b.entry_point == "odd-names"]
    assert "identifier" in str(broken) or "non-empty" in str(broken)
    assert "grpo" in host.credit.names()  # the others keep working


def test_a_run_folder_never_lands_outside_out_dir(tmp_path):
    from agentbench_crbc.trainer.run import make_run_dir

    cfg = SimpleNamespace(out_dir=str(tmp_path / "runs"), env=SimpleNamespace(name="sokoban"),
                          credit=SimpleNamespace(name="../../../../tmp/x"), model=SimpleNamespace(name="tiny"), seed=0)
    with pytest.raises(ConfigError, match="is not one folder name"):
        make_run_dir(cfg)  # type: ignore[arg-type]
    assert not any(tmp_path.rglob("*"))
    cfg.credit.name = "crbc"
    assert make_run_dir(cfg).parent == tmp_path / "runs"  # type: ignore[arg-type]


def test_abc_bench_dry_run_prints_command_lines_a_shell_reads_back():
    odd = "exp_name=a b;touch x $(id) 'q'"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["bench", "--mode", "quick", "--dry-run", "--method", "grpo", "--set", odd]) == 0
    lines = [line for line in out.getvalue().splitlines() if " abc train " in line]
    assert lines
    for line in lines:
        argv = shlex.split(line[line.index("abc train "):])
        assert argv[:6] == ["abc", "train", "--env", "sokoban", "--credit", "grpo"]
        assert odd in argv and argv[argv.index(odd) - 1] == "--set"


@pytest.fixture(autouse=True)
def _fresh_host():
    yield
    reset_host(None)
