"""``abc envs``: one aligned table of the registered ``abc/*`` ids."""

from __future__ import annotations

import pytest

from agentbench_crbc.cli import main


def test_envs_table_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["id", "max"] and len(lines) > 5
    start = lines[0].index("entry point")
    assert all(line[start:].startswith("agentbench_crbc.envs.") for line in lines[1:])
    steps_end = lines[0].index("max steps") + len("max steps")
    assert all(line[:steps_end].rstrip()[-1].isdigit() and line[steps_end] == " " for line in lines[1:])
    assert any(line.startswith("abc/Sokoban-v0 ") for line in lines)
