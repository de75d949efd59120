"""``abc envs``: one aligned table of the registered ``abc/*`` ids."""

from __future__ import annotations

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.family import EnvFamily, EnvId
from agentbench_crbc.hookspecs import hookimpl
from agentbench_crbc.host import Host, get_plugin_manager, reset_host


def test_envs_table_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["id", "max"] and len(lines) > 5
    start = lines[0].index("entry point")
    assert all(line[start:].startswith("agentbench_crbc.envs.") for line in lines[1:])
    steps_end = lines[0].index("max steps") + len("max steps")
    assert all(line[:steps_end].rstrip()[-1].isdigit() and line[steps_end] == " " for line in lines[1:])
    assert any(line.startswith("abc/Sokoban-v0 ") for line in lines)


class _Unplayable:
    """A family registered in-test with no play mode."""

    @hookimpl
    def abc_register_env_families(self, register):
        register.add(EnvFamily(name="still", label="Still", default_id="still/Lake-v0",
                               ids=(EnvId("still/Lake-v0", "gymnasium.envs.toy_text.frozen_lake:FrozenLakeEnv", 7),)))


@pytest.fixture
def unplayable_host():
    pm = get_plugin_manager()
    pm.register(_Unplayable(), name="unplayable")
    reset_host(Host(pm))
    yield
    reset_host(None)


@pytest.mark.parametrize(("argv", "message"), [
    (["play"], "give a family to play: `abc play NAME`, NAME one of "),
    (["play", "still"], "env family 'still' has no play mode (its EnvFamily sets no `play`); playable: "),
    (["play", "nope"], "unknown env family 'nope'; playable: "),
])
def test_play_says_what_to_play(unplayable_host, capsys, argv, message) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"abc play: error: {message}") and "sokoban" in err[0]
    assert "still," not in err[0]  # only the playable families are offered


def test_envs_marks_ids_whose_extra_is_missing(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from agentbench_crbc import extras

    real = extras._missing
    monkeypatch.setattr(extras, "_missing", lambda name: name == "rapidfuzz" or real(name))
    assert main(["envs"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:] if line.startswith("abc/")}
    assert "webshop (missing)" in rows["abc/WebShop-v0"]
    assert "(missing)" not in rows["abc/ALFWorld-v0"] and "alfworld" in rows["abc/ALFWorld-v0"]
    assert rows["abc/Sokoban-v0"].split()[2] == "-"  # the env itself needs no extra
    assert "  webshop: rapidfuzz is not installed; pip install 'agentbench-crbc[webshop]'" in out


def test_envs_imports_no_extra() -> None:
    """Listing ids (and checking their extras) imports none of the extras' modules."""
    import subprocess
    import sys

    code = ("import sys; from agentbench_crbc.cli import main; main(['envs']); "
            "print(sorted(m for m in ('torch', 'flask', 'rapidfuzz', 'bm25s', 'textworld', 'alfworld', 'pygame') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]"
