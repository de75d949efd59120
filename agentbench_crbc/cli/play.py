"""``abc play NAME``: play an environment family yourself (its :attr:`~agentbench_crbc.family.EnvFamily.play`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from ..extras import require_env

__all__ = ["register"]


def _playable() -> list[Any]:
    from ..host import get_host

    return [f for f in get_host().families if f.play is not None]


def register(sub: Any) -> None:
    p = sub.add_parser("play", help="play an environment family yourself (the playable families and their --ui "
                       "modes: `abc play --list`)")
    p.add_argument("env", nargs="?", metavar="NAME", help="an environment family with a play UI")
    p.add_argument("--list", action="store_true", help="list the playable families and their --ui modes")
    p.add_argument("--seed", type=int, default=0, help="task seed")
    p.add_argument("--ui", default="auto",
                   help="one of the family's play modes (`abc play --list`); default: auto (the first where "
                   "possible)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env keyword argument")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..host import get_host

    host = get_host()
    fams = {f.name: f for f in _playable()}
    if args.list:
        for f in fams.values():
            print(f"{f.name:<12} {' '.join(f.play_modes)}")
        return 0
    if args.env not in fams:
        raise ConfigError(f"unknown env {args.env!r}; choose one of {', '.join(fams)}")
    fam = host.family(args.env)
    if args.ui != "auto" and args.ui not in fam.play_modes:
        raise ConfigError(f"{fam.label} plays in {' or '.join(fam.play_modes)}: use --ui "
                          f"{' or --ui '.join(fam.play_modes)}")
    require_env(fam.name)
    return int(fam.load("play")(args) or 0)
