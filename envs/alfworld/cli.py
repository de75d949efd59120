"""``abc alfworld generate``: ALFWorld games for all six task types, built offline from the wheel's rooms."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from agentbench_crbc.errors import ConfigError

__all__ = ["register", "run_generate"]


def register(sub: Any) -> None:
    """Add ``abc alfworld`` (with ``generate``) to the ``abc`` subparsers (the family's ``commands``)."""
    p = sub.add_parser("alfworld", help="ALFWorld tools (generate games offline)",
                       description="ALFWorld on the real alfworld/TextWorld engine.")
    asub = p.add_subparsers(dest="alfworld_command", metavar="SUBCOMMAND")
    g = asub.add_parser("generate", help="generate engine-checked games for all six task families",
                        description="Game i is number SEED + i // T of task type i % T (T task types), written "
                                    "as OUT/v<version>/SPLIT/<task_type>/<number>/ with initial_state.pddl, "
                                    "traj_data.json and game.tw-pddl; existing games are kept.")
    g.add_argument("--out", help="output folder (default: the cache folder gymnasium.make uses)")
    g.add_argument("--n", type=int, default=6, help="number of games (default 6: one per task type)")
    g.add_argument("--seed", type=int, default=0, help="first game number (default 0)")
    g.add_argument("--split", default="train", choices=("train", "valid_seen", "valid_unseen"))
    g.add_argument("--task-type", action="append", default=[], metavar="NAME",
                   help="restrict to these task types (paper or ALFWorld names); repeatable")
    g.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                   help="build and engine-check games in N worker processes (default 1; same files either way)")
    g.add_argument("-q", "--quiet", action="store_true", help="print only the summary line")
    g.set_defaults(func=run_generate)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_generate(args: argparse.Namespace) -> int:
    from .generate import default_cache_dir, generate_games
    from .layouts import TASK_TYPES, task_type_of

    if args.n < 1:
        raise ConfigError("--n must be at least 1")
    if args.seed < 0:
        raise ConfigError("--seed must be non-negative")
    if args.jobs < 1:
        raise ConfigError("--jobs must be at least 1")
    types = tuple(task_type_of(t) for t in args.task_type) or TASK_TYPES
    out = args.out or default_cache_dir()
    start = time.perf_counter()
    for i, path in enumerate(generate_games(out, args.n, seed=args.seed, split=args.split, task_types=types,
                                            jobs=args.jobs)):
        if not args.quiet:
            print(f"[{i + 1}/{args.n}] {path.parent}", flush=True)
    print(f"{args.n} games ({args.split}, seed {args.seed}) under {out} in {time.perf_counter() - start:.1f} s",
          file=sys.stderr if not args.quiet else sys.stdout)
    return 0
