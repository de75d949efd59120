"""``abc play NAME``: play an environment family yourself (its :attr:`~agentbench_crbc.family.EnvFamily.play`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from ..extras import require_env
from .commands import COMMANDS

__all__ = ["register"]


def _playable() -> list[Any]:
    from ..host import get_host

    return [f for f in get_host().families if f.play is not None]


def register(sub: Any) -> None:
    p = sub.add_parser("play", help=COMMANDS["play"],
                       epilog="Exit status: 0 when the game you played ends won, 1 when you quit (or the input ends) "
                       "before; 2 for bad input (an unknown family, a --ui it lacks, a window without a display). "
                       "WebShop's browser mode serves until Ctrl-C and exits 0.")
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
    playable = ", ".join(fams) or "none installed"
    if args.env is None:
        raise ConfigError(f"give a family to play: `abc play NAME`, NAME one of {playable} (`abc play --list` shows "
                          "their --ui modes)")
    if args.env not in fams:
        if args.env in host.families:
            raise ConfigError(f"env family {args.env!r} has no play mode (its EnvFamily sets no `play`); playable: "
                              f"{playable}")
        raise ConfigError(f"unknown env family {args.env!r}; playable: {playable} (`abc plugins` lists every "
                          "family)")
    fam = host.family(args.env)
    if args.ui != "auto" and args.ui not in fam.play_modes:
        raise ConfigError(f"{fam.label} plays in {' or '.join(fam.play_modes)}: use --ui "
                          f"{' or --ui '.join(fam.play_modes)}")
    require_env(fam.name)
    return int(fam.load("play")(args) or 0)
