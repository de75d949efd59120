"""The import-linter contracts of pyproject.toml hold on the installed layout (layers, no plugin or env reached
except through the host, credit free of torch)."""

from __future__ import annotations

import pytest

from tests.layers import run


@pytest.mark.timeout(300)
def test_import_contracts_hold() -> None:
    result = run(capture=True)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-6000:]
    assert "broken" not in report.split("Contracts:")[-1].split("\n")[0].replace("0 broken", "")


def test_architecture_doc_lists_every_command() -> None:
    from pathlib import Path

    from agentbench_crbc.cli import COMMANDS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    cli = doc.split("```", 2)[1].split(" bench ", 1)[0]  # the layer diagram's cli rows
    assert [c for c in COMMANDS if f" {c}" not in cli.replace("|", " ").replace(",", " ")] == []
