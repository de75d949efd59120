"""``abc --version`` and ``abc --help`` start without the plugin host, any plugin or family, numpy or scipy; a
command builds only its own parser, and family commands still load when one is named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentbench_crbc.cli import COMMANDS, build_parser, main

_HEAVY = ("scipy", "numpy", "torch", "gymnasium", "agentbench_crbc.plugins", "agentbench_crbc.envs",
          "agentbench_crbc.credit", "agentbench_crbc.host")


def _imported(*argv: str) -> set[str]:
    """The top-level-and-below module names ``python -X importtime -m agentbench_crbc ARGV`` imports."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "agentbench_crbc", *argv], capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_import_no_plugin_and_no_scipy(argv):
    mods = _imported(*argv)
    assert "agentbench_crbc.cli" in mods  # the probe reads the right process
    heavy = sorted(m for m in mods if m.startswith(_HEAVY))
    assert heavy == []
    assert not any(m.startswith("agentbench_crbc.cli.") and m != "agentbench_crbc.cli.commands" for m in mods)


def test_help_lists_every_command_and_names_family_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert [c for c in COMMANDS if f"    {c}" not in out] == []
    flat = " ".join(out.split())
    assert "`abc FAMILY ...`" in flat and "`abc plugins` lists the installed families" in flat


def test_a_named_command_is_built_in_full_and_the_others_are_help_lines():
    sub = next(a for a in build_parser(["credit", "crbc", "x.jsonl"])._actions if a.dest == "command")
    assert {a.dest for a in sub.choices["credit"]._actions} >= {"method", "explain"}
    assert {a.dest for a in sub.choices["rollout"]._actions} == {"help"}  # only listed
    full = next(a for a in build_parser()._actions if a.dest == "command")
    assert "env_backend" in {a.dest for a in full.choices["rollout"]._actions}


def test_family_commands_load_when_a_family_command_is_named():
    sub = next(a for a in build_parser(["alfworld", "generate"])._actions if a.dest == "command")
    assert "alfworld" in sub.choices
    assert "alfworld" not in next(a for a in build_parser(["--help"])._actions if a.dest == "command").choices


def test_bench_help_does_not_promise_a_warm_start_quick_mode_has_none(capsys) -> None:
    # #51 item 5: the help said "one imitation warm start" though quick mode plans none (warm_steps=0)
    import pytest

    from agentbench_crbc.bench.learning import MODES
    from agentbench_crbc.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert MODES["quick"].warm_steps == 0 and "one imitation warm start" not in text
    assert "quick mode: the untrained model, no warm start" in text
