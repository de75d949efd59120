"""``abc play ENV``: play an environment yourself (delegates to ``agentbench_crbc.envs.<ENV>.play.run``)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from ..errors import ConfigError
from ..extras import require_env

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("play", help="play an environment yourself (sokoban: window or terminal; alfworld: terminal; "
                       "webshop: browser or terminal)")
    p.add_argument("env", help="sokoban, alfworld or webshop")
    p.add_argument("--seed", type=int, default=0, help="task seed")
    p.add_argument("--ui", default="auto",
                   help="terminal, window (sokoban) or browser (webshop); default: window or browser where "
                   "possible")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env keyword argument")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..envs import ENV_FAMILIES

    if args.env not in ENV_FAMILIES:
        raise ConfigError(f"unknown env {args.env!r}; choose one of {', '.join(ENV_FAMILIES)}")
    require_env(args.env)
    module = importlib.import_module(f"agentbench_crbc.envs.{args.env}.play")
    return int(module.run(args) or 0)
