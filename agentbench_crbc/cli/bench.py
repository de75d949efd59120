"""``abc bench``: the CPU learning benchmark (:mod:`agentbench_crbc.bench.learning`), ``abc bench fidelity`` and
``abc bench credit`` (:mod:`agentbench_crbc.bench.credit_quality`)."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Any

from .commands import COMMANDS

__all__ = ["learning_module", "register"]


def learning_module() -> ModuleType:
    """The learning benchmark's module, an ordinary module of this package (it ships in the wheel)."""
    from ..bench import learning

    return learning


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help=COMMANDS["bench"],
                       description="Per seed: a starting model (full mode: an imitation warm start; quick mode: the "
                       "untrained model, no warm start), then an RL run per credit method from it with the same "
                       "budget, and a control that continues imitation. Runs go side by side on "
                       "--workers local processes (default: one per core) or, with --ray-address, as Ray tasks; "
                       "each run's row goes to OUT/bench.jsonl and its records to the leaderboard store as it ends "
                       "(a rerun does only what did not finish), then the board and a paired-statistics summary "
                       "are rendered. See docs/benchmarks.md.")
    _add_fidelity(p)
    learning_module().add_arguments(p)
    p.set_defaults(func=run)


def _add_fidelity(p: argparse.ArgumentParser) -> None:
    """``abc bench fidelity``: an optional subcommand; plain ``abc bench [flags]`` stays the learning benchmark."""
    from ..bench import fidelity

    sub = p.add_subparsers(dest="bench_command", metavar="{fidelity,credit}")
    f = sub.add_parser("fidelity", help="credit fidelity against the exact advantage on tabular MDPs, and tabular "
                       "learning (docs/fidelity.md)", description="Every installed credit method's step credit "
                       "against the exact behaviour-policy advantage on finite MDPs, and tabular softmax learning "
                       "with each method's credit. See docs/fidelity.md.")
    fidelity.add_arguments(f)
    f.set_defaults(func=lambda args: fidelity.run(args, sys.argv[3:]))
    from ..bench import credit_quality

    c = sub.add_parser("credit", help="credit quality on the trainer's own rollouts: within-group AUC of each "
                       "method against the family's optimal moves", description=credit_quality.__doc__.split(
                           "\n\n")[1].replace("\n", " "))
    from .train import add_config_arguments, config_from_args

    add_config_arguments(c, credit=False)
    credit_quality.add_arguments(c)

    def credit_run(args: argparse.Namespace) -> int:
        return credit_quality.run(args, lambda method: config_from_args(argparse.Namespace(**{**vars(args),
                                                                                            "credit": method})))

    c.set_defaults(func=credit_run)


def run(args: argparse.Namespace) -> int:
    from .train import require_for

    module = learning_module()
    if not args.dry_run:  # printing the plan needs no training stack
        for env in args.env or module.MODES[args.mode].envs:
            require_for(env)
    return int(module.run(args, sys.argv[2:]) or 0)
