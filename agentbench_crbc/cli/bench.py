"""``abc bench``: the CPU learning benchmark (``benchmarks/learning.py`` of a source checkout)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ConfigError

__all__ = ["learning_module", "outside_checkout_error", "register"]


def learning_module() -> ModuleType:
    """``benchmarks/learning.py`` from the source tree this package runs from, or the working folder."""
    if "abc_bench_learning" in sys.modules:
        return sys.modules["abc_bench_learning"]
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        path = root / "benchmarks" / "learning.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location("abc_bench_learning", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses look their module up there
            spec.loader.exec_module(module)
            return module
    raise ConfigError("abc bench needs a source checkout (benchmarks/learning.py was not found next to the package "
                      "or in the working folder); clone the repository and run it from its root")


def outside_checkout_error(argv: Sequence[str]) -> str | None:
    """For ``abc bench ARGS`` (not ``fidelity``, not ``--help``) where no checkout is found: the one-line reason,
    given before argparse would misread the learning benchmark's options as the ``fidelity`` subcommand."""
    if argv[:1] != ["bench"] or argv[1:2] == ["fidelity"] or {"-h", "--help"} & set(argv):
        return None
    try:
        learning_module()
    except ConfigError as exc:
        return str(exc)
    return None


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="CPU learning benchmark: every credit method from one warm start per seed",
                       description="Per seed: one imitation warm start, then an RL run per credit method from it "
                       "with the same budget, and a control that continues imitation; records go to the "
                       "leaderboard store, then the board and a paired-statistics summary are rendered. "
                       "See docs/benchmarks.md.")
    _add_fidelity(p)
    with contextlib.suppress(ConfigError):  # outside a checkout: main() says so first (outside_checkout_error)
        learning_module().add_arguments(p)
    p.set_defaults(func=run)


def _add_fidelity(p: argparse.ArgumentParser) -> None:
    """``abc bench fidelity``: an optional subcommand; plain ``abc bench [flags]`` stays the learning benchmark."""
    from ..bench import fidelity

    sub = p.add_subparsers(dest="bench_command", metavar="{fidelity}")
    f = sub.add_parser("fidelity", help="credit fidelity against the exact advantage on tabular MDPs, and tabular "
                       "learning (docs/fidelity.md)", description="Every installed credit method's step credit "
                       "against the exact behaviour-policy advantage on finite MDPs, and tabular softmax learning "
                       "with each method's credit. See docs/fidelity.md.")
    fidelity.add_arguments(f)
    f.set_defaults(func=lambda args: fidelity.run(args, sys.argv[3:]))


def run(args: argparse.Namespace) -> int:
    from .train import require_for

    module = learning_module()
    require_for("sokoban")
    return int(module.run(args, sys.argv[2:]) or 0)
