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


def test_dry_run_says_the_expected_time_per_run_and_in_all(capsys: pytest.CaptureFixture[str]) -> None:
    """The quick plan's time comes from the measured default (RL 380 s of a 7 min 40 s run on a nearly idle 2-core
    CPU at 2 threads) and says the CPU, load and threads it was measured on."""
    assert main(["bench", "--mode", "quick", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    measured, per_run, total = lines[-3:]
    assert measured.startswith("time measured") and "RL 380 s per 60 updates at 2 torch threads" in measured
    assert "2-core" in measured and "nearly idle" in measured and "7 min 40 s in all" in measured
    assert "shared by two runs at 1 thread each" in measured
    # 60 updates: the measured RL stage plus its setup and validation, i.e. the whole default command
    assert per_run.startswith("time per run: RL run of 60 updates 7 min 40 s (shared: 17 min)")
    assert "warm start of 0 steps 1 min 20 s" in per_run
    # 3 RL runs + a control as long as one + a warm start that only validates: 4 x 460 s + 80 s
    assert total.startswith("total: about 32 min on that idle CPU, 1 h 8 min shared, for 3 RL runs, 1 controls")


def test_the_estimate_scales_with_updates_and_warm_start_steps() -> None:
    from agentbench_crbc.bench.learning import RL_IDLE, estimate, plan

    text = estimate(plan("full", methods=["crbc"], seeds=[0]))
    assert "RL run of 120 updates 14 min (shared: 32 min)" in text  # 2 x 380 s + 80 s; 2 x 924 s + 80 s
    assert "warm start of 1000 steps 12 min" in text  # 389 s x 1000 / 600 + 80 s
    assert "total: about 26 min on that idle CPU, 44 min shared, for 1 RL runs, 0 controls, 1 warm starts" in text
    assert RL_IDLE.threads == 2 and RL_IDLE.whole_seconds == 460.0


def test_a_run_without_torch_is_one_line_before_any_worker_starts(monkeypatch: pytest.MonkeyPatch, tmp_path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The driver checks the training stack itself: a pool worker without torch failed every cell one by one."""
    import agentbench_crbc.extras as extras

    missing = extras._missing
    monkeypatch.setattr(extras, "_missing", lambda m: m == "torch" or missing(m))
    assert main(["bench", "--mode", "quick", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'agentbench-crbc[train]'" in err
    assert not (tmp_path / "out").exists()
