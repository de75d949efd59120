"""``abc bench`` as ordinary package modules: the learning benchmark imports normally, no run-time import cycles."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import agentbench_crbc.bench as bench_pkg
from agentbench_crbc.bench import fidelity, learning, report, rows
from agentbench_crbc.cli import bench as cli_bench
from agentbench_crbc.cli import main
from agentbench_crbc.family import EnvFamily, EnvId
from agentbench_crbc.hookspecs import hookimpl
from agentbench_crbc.host import Host, get_plugin_manager, reset_host

BENCH = Path(bench_pkg.__file__).parent


def test_learning_benchmark_is_a_module_of_the_package() -> None:
    assert cli_bench.learning_module() is learning
    assert Path(learning.__file__).parent == BENCH  # not executed from benchmarks/ by file path
    assert "abc_bench_learning" not in sys.modules


def test_the_checkout_script_only_calls_the_module() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "learning.py"
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [(n.module, [a.name for a in n.names]) for n in imports] == [("agentbench_crbc.bench.learning", ["main"])]


def _bench_imports(path: Path) -> set[str]:
    """The sibling ``agentbench_crbc.bench`` modules ``path`` imports, at any depth (lazy imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out.add(node.module or "")
    return out


def test_no_import_cycle_among_the_bench_modules() -> None:
    graph = {p.stem: _bench_imports(p) for p in BENCH.glob("*.py")}
    assert "fidelity" not in graph["report"] and "report" in graph["fidelity"]
    assert report.FidelityRow is fidelity.FidelityRow is rows.FidelityRow

    def visit(node: str, path: tuple[str, ...]) -> None:
        for nxt in graph.get(node, ()):
            assert nxt not in path, f"import cycle: {' -> '.join((*path, nxt))}"
            visit(nxt, (*path, nxt))

    for start in graph:
        visit(start, (start,))


class _ToyFamily:
    @hookimpl
    def abc_register_env_families(self, register):
        register.add(EnvFamily(name="toyfam", label="Toy", ids=(EnvId("abc-test/Toy-v0", "math:floor", 5),),
                               default_id="abc-test/Toy-v0"))


def test_env_names_are_checked_against_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    pm = get_plugin_manager()
    pm.register(_ToyFamily(), name="toy-family")
    reset_host(Host(pm))
    try:
        assert main(["bench", "--env", "toyfam", "--dry-run"]) == 0
        assert "abc sft --env toyfam" in capsys.readouterr().out
        with pytest.raises(SystemExit):
            main(["bench", "--env", "nofam", "--dry-run"])
        err = capsys.readouterr().err
        assert "argument --env: unknown env family 'nofam'; installed: " in err and "toyfam" in err
    finally:
        reset_host()


def test_dry_run_needs_no_training_stack(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import agentbench_crbc.cli.train as cli_train

    def missing(env: str) -> None:
        raise AssertionError(f"the dry run asked for the training stack of {env}")

    monkeypatch.setattr(cli_train, "require_for", missing)
    assert main(["bench", "--mode", "quick", "--dry-run"]) == 0
    assert "5 runs (3 RL, 1 warm starts, 1 controls)" in capsys.readouterr().out
