"""``abc sft``: imitation warm start from the environment's expert; writes a model folder ``abc train`` can use."""

from __future__ import annotations

import argparse
from typing import Any

from .commands import COMMANDS

__all__ = ["register"]


def register(sub: Any) -> None:
    from .train import add_config_arguments

    p = sub.add_parser("sft", help=COMMANDS["sft"],
                       description="Trains on expert actions (the family's imitation data where it has them, e.g. "
                       "Sokoban's optimal solver with all optimal first actions and random symmetries; else its "
                       "expert's episodes), validates, and saves RUN_DIR/model; then "
                       "`abc train --model RUN_DIR/model --set sft.steps=0`.")
    add_config_arguments(p, credit=False)
    p.add_argument("--steps", type=int, help="optimizer steps (default: the preset's sft.steps, or 1000)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from ..trainer.config import to_toml
    from .train import config_from_args, require_for

    args.overrides = [*args.overrides, "updates=0"]
    cfg = config_from_args(args)
    if args.steps is not None:
        cfg.sft.steps = args.steps
    elif cfg.sft.steps == 0:
        cfg.sft.steps = 1000
    if args.print_config:
        sys.stdout.write(to_toml(cfg))
        return 0
    require_for(cfg.env.name)
    from ..trainer.loop import train

    summary = train(cfg)
    print(f"model: {summary['run_dir']}/model")
    return 0
