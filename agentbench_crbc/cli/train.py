"""``abc train --credit NAME``: group RL with step-level credit (the CPU default warm-starts, then learns)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_config_arguments", "config_from_args", "register"]


def add_config_arguments(p: argparse.ArgumentParser, *, credit: bool = True) -> None:
    """The flags every training-like command shares (preset, env, model, TOML file, ``--set``)."""
    if credit:
        p.add_argument("--credit", metavar="NAME", help="credit method (see `abc plugins`; default crbc)")
    p.add_argument("--env", choices=("sokoban", "alfworld", "webshop"), help="environment (default: the preset's)")
    p.add_argument("--preset", metavar="NAME", help="cpu-demo (default), alfworld-qwen2.5-1.5b, alfworld-qwen2.5-7b,"
                   " webshop-qwen2.5-1.5b, webshop-qwen2.5-7b, sokoban-qwen2.5-vl-3b")
    p.add_argument("--model", metavar="PATH_OR_ID", help="tiny, smollm2, a Hugging Face id or a local folder")
    p.add_argument("--config", metavar="FILE.toml", help="TOML file with config values (see examples/configs)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override one value, dotted keys (optim.lr=1e-5, credit.options.beta=0.9); repeatable")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as TOML and exit")


def config_from_args(args: argparse.Namespace) -> Any:
    from ..trainer.config import load_config

    return load_config(preset=args.preset, config=args.config, env=args.env, credit=getattr(args, "credit", None),
                       model=args.model, overrides=args.overrides)


def register(sub: Any) -> None:
    p = sub.add_parser("train", help="train an agent with group RL and a credit method",
                       description="With no options: the CPU demo (tiny model on 6x6 Sokoban: imitation warm start, "
                       "then group RL with CRBC), about 10-15 minutes on 2 cores, offline; prints held-out success "
                       "before and after the RL stage. See docs/training.md.")
    add_config_arguments(p)
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run folder from its last checkpoint")
    p.add_argument("--list-presets", action="store_true", help="list presets and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trainer.config import PRESETS, check_credit, to_toml

    if args.list_presets:
        for name, table in PRESETS.items():
            print(f"{name:24} env={table['env']['name']:9} model={table['model']['name']}")
        return 0
    from ..trainer.loop import train

    if args.resume:
        summary = train(resume=args.resume, overrides=tuple(args.overrides))
    else:
        cfg = config_from_args(args)
        check_credit(cfg)
        if args.print_config:
            sys.stdout.write(to_toml(cfg))
            return 0
        summary = train(cfg)
    if not sys.stdout.isatty():
        print(json.dumps(summary))
    return 0
