"""The import-linter contracts of pyproject.toml hold on the installed layout (every module in a layer, no plugin
or env reached except through the host, plugins and envs apart, credit free of torch), and each one catches a
break injected into a staged copy."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.layers import ROOT, run

#: contract name -> (staged file, line appended to it, the import chain the contract must report). Every contract
#: of pyproject.toml has at least one; the layers contract also gets a module listed in no layer.
BREAKS: dict[str, list[tuple[str, str, str]]] = {
    "layers": [
        ("agentbench_crbc/credit/assign.py", "import agentbench_crbc.trainer.config",
         "agentbench_crbc.credit.assign -> agentbench_crbc.trainer.config"),
        ("agentbench_crbc/envcheck.py", "import agentbench_crbc.trainer.loss",
         "agentbench_crbc.envcheck -> agentbench_crbc.trainer.loss"),
        ("agentbench_crbc/testing.py", "import agentbench_crbc.trainer.loss",
         "agentbench_crbc.testing -> agentbench_crbc.trainer.loss"),
        ("agentbench_crbc/stray.py", "X = 1", "not listed as layers: - agentbench_crbc.stray"),
    ],
    "core reaches plugins and envs only through the plugin host": [
        ("agentbench_crbc/trainer/schema.py", "import agentbench_crbc.plugins.grpo",
         "agentbench_crbc.trainer.schema -> agentbench_crbc.plugins.grpo"),
        ("agentbench_crbc/__main__.py", "import agentbench_crbc.envs.sokoban",  # the top layer: only this catches it
         "agentbench_crbc.__main__ -> agentbench_crbc.envs.sokoban"),
    ],
    "plugins and envs import only the author API": [
        ("agentbench_crbc/plugins/gigpo.py", "import agentbench_crbc.rollout.episodes.parse",
         "agentbench_crbc.plugins.gigpo -> agentbench_crbc.rollout.episodes.parse"),
    ],
    "plugins never import envs": [
        ("agentbench_crbc/plugins/crbc.py", "import agentbench_crbc.envs.sokoban",
         "agentbench_crbc.plugins.crbc -> agentbench_crbc.envs.sokoban"),
    ],
    "no env family imports another": [
        ("agentbench_crbc/envs/webshop/family.py", "import agentbench_crbc.envs.sokoban.family",
         "agentbench_crbc.envs.webshop.family -> agentbench_crbc.envs.sokoban.family"),
    ],
    "no plugin imports a sibling plugin": [
        ("agentbench_crbc/plugins/grpo.py", "import agentbench_crbc.plugins.rloo",
         "agentbench_crbc.plugins.grpo -> agentbench_crbc.plugins.rloo"),
    ],
    "credit and the foundation stay numpy/scipy": [
        ("agentbench_crbc/credit/types.py", "import torch", "agentbench_crbc.credit.types -> torch"),
        ("agentbench_crbc/credit/batch.py", "import torch", "agentbench_crbc.credit.batch -> torch"),
        ("agentbench_crbc/anchors.py", "import pandas", "agentbench_crbc.anchors -> pandas"),
        ("agentbench_crbc/extras.py", "import matplotlib", "agentbench_crbc.extras -> matplotlib"),
    ],
}


def _contracts() -> list[str]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [c["name"] for c in cfg["tool"]["importlinter"]["contracts"]]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.timeout(300)
def test_import_contracts_hold() -> None:
    result = run(capture=True)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-6000:]
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in _flat(report)


def test_the_layers_contract_is_exhaustive() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c for c in cfg["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    assert layers["exhaustive"] is True and layers["containers"] == ["agentbench_crbc"]


def test_the_forbidden_contracts_name_every_core_module() -> None:
    """The core's source list (every top-level module and package but plugins and envs) and the numpy/scipy list
    name only modules that exist, and the core's list misses none: a new core module is checked from the start."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["name"]: c for c in cfg["tool"]["importlinter"]["contracts"]}
    pkg = ROOT / "agentbench_crbc"
    top = {f"agentbench_crbc.{p.stem}" for p in pkg.glob("*.py") if p.stem != "__init__"}
    top |= {f"agentbench_crbc.{p.name}" for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    core = contracts["core reaches plugins and envs only through the plugin host"]["source_modules"]
    assert sorted(core) == sorted(top - {"agentbench_crbc.leaderboard.data"})
    light = next(c for n, c in contracts.items() if n.startswith("credit and the foundation"))["source_modules"]
    assert set(light) <= top | {"agentbench_crbc.plugins"}, sorted(set(light) - top)


@pytest.mark.timeout(300)
def test_every_contract_catches_its_injected_break() -> None:
    names = _contracts()
    owner = {n: next(k for k in BREAKS if n.startswith(k)) for n in names}  # every contract has its breaks
    assert sorted(set(owner.values())) == sorted(BREAKS)
    inject = {path: line for breaks in BREAKS.values() for path, line, _ in breaks}
    result = run(capture=True, inject=inject)
    report = _flat(result.stdout + result.stderr)
    assert result.returncode != 0
    assert f"Contracts: 0 kept, {len(names)} broken." in report, report[:3000]
    broken = report.split("Broken contracts", 1)[1]
    starts = [broken.index(_flat(n)) for n in names]
    for i, name in enumerate(names):
        section = broken[starts[i]:starts[i + 1] if i + 1 < len(names) else None]
        for _, _, chain in BREAKS[owner[name]]:
            assert chain in section, (name, chain, section[:2000])


def test_architecture_doc_lists_every_command() -> None:
    from agentbench_crbc.cli import COMMANDS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    cli = doc.split("```", 2)[1].split(" bench ", 1)[0]  # the layer diagram's cli rows
    assert [c for c in COMMANDS if f" {c}" not in cli.replace("|", " ").replace(",", " ")] == []
