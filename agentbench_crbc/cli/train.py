"""``abc train --credit NAME``: group RL with step-level credit (the CPU default warm-starts, then learns)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .commands import COMMANDS

__all__ = ["add_config_arguments", "config_from_args", "deterministic", "env_argument", "example_configs",
           "print_memory", "register", "require_for"]


def env_argument(value: str) -> str:
    """``--env``: a registered family's name or one of its Gymnasium ids (argparse says which exist)."""
    from ..errors import UnknownNameError
    from ..family import resolve_env as resolve

    try:
        resolve(value)
    except UnknownNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def add_config_arguments(p: argparse.ArgumentParser, *, credit: bool = True) -> None:
    """The flags every training-like command shares (preset, env, model, TOML file, ``--set``)."""
    if credit:
        p.add_argument("--credit", metavar="NAME", help="credit method (see `abc plugins`; default crbc)")
    p.add_argument("--env", type=env_argument, metavar="NAME_OR_ID",
                   help="environment family (`abc plugins` lists them) or one of its ids (default: the preset's)")
    from ..trainer.schema import PRESETS

    p.add_argument("--preset", metavar="NAME", help=f"{', '.join(PRESETS)} (default: cpu-demo)")
    p.add_argument("--model", metavar="PATH_OR_ID", help="tiny, smollm2, a Hugging Face id or a local folder")
    p.add_argument("--config", metavar="FILE.toml", help="TOML file with config values, or the name of an example "
                   f"shipped with the package: {', '.join(example_configs())}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override one value, dotted keys (optim.lr=1e-5, credit.options.beta=0.9); repeatable")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as TOML and exit")


def example_configs() -> dict[str, Path]:
    """The example TOML files by name (``examples/configs`` of the repository, shipped in the wheel)."""
    here = Path(__file__).resolve().parents[1]
    for folder in (here / "configs", here.parent / "examples" / "configs"):  # installed wheel, source tree
        if folder.is_dir():
            return {p.stem: p for p in sorted(folder.glob("*.toml"))}
    return {}


def config_from_args(args: argparse.Namespace) -> Any:
    from ..trainer.config import load_config

    config = args.config
    if config and not Path(config).exists() and config.removesuffix(".toml") in example_configs():
        config = example_configs()[config.removesuffix(".toml")]
    return load_config(preset=args.preset, config=config, env=args.env, credit=getattr(args, "credit", None),
                       model=args.model, overrides=args.overrides)


def require_for(env: str) -> None:
    """The training stack and the environment's own packages, or one line naming the extra to install."""
    from ..extras import require, require_env

    require("torch", "transformers", "peft", "tqdm", extra="train")
    require_env(env)


def register(sub: Any) -> None:
    p = sub.add_parser("train", help=COMMANDS["train"],
                       description="With no options: the CPU demo (a 1M-parameter model learns 6x6 Sokoban from "
                       "reward alone: a budget of 60 updates of group RL with CRBC from a random start), offline; "
                       "it measured 7 min 40 s on a nearly idle 2-core CPU with 2 torch threads; the default is now "
                       "1 thread, whose update took a third of the two-thread time on a 2-core CPU shared with other "
                       "work (README.md, on a busy machine); "
                       "prints held-out success before and after RL and the gain in points. See README.md and "
                       "docs/training.md.")
    add_config_arguments(p)
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run folder from its last checkpoint")
    p.add_argument("--list-presets", action="store_true", help="list presets and exit")
    p.add_argument("--print-memory", action="store_true",
                   help="print what each part of the resolved config takes per GPU, whether it fits, and exit")
    p.add_argument("--gpu-gib", type=float, default=80.0, metavar="GIB",
                   help="GPU memory for --print-memory (default 80)")
    p.add_argument("--world-size", type=int, default=1, metavar="N",
                   help="ranks (GPUs) for --print-memory: FSDP2 shards over them, rollout.groups splits over them "
                        "(default 1)")
    p.set_defaults(func=run)


def print_memory(cfg: Any, gpu_gib: float, world_size: int) -> int:
    """``--print-memory``: the memory model's table for ``cfg`` (no torch, nothing loaded; a built-in or typed-in
    architecture never reaches the hub); exit 0 either way."""
    import math

    from ..errors import ConfigError
    from ..trainer.memory import ARCHITECTURES, architecture_of, builtin_architecture, memory_plan

    if not 1 <= world_size <= 100_000:
        raise ConfigError(f"--world-size {world_size}: give the number of ranks (GPUs), at least 1")
    if not (math.isfinite(gpu_gib) and 0 < gpu_gib <= 1e6):
        raise ConfigError(f"--gpu-gib {gpu_gib}: give the GPU's memory in GiB, a positive finite number")
    arch = builtin_architecture(cfg.model)
    if arch is None:
        try:
            from transformers import AutoConfig

            from ..rollout.engines.models import check_available

            check_available(cfg.model.name)  # not cached and no hub: one line now, not the hub client's retries
            arch = architecture_of(AutoConfig.from_pretrained(cfg.model.name))
        except Exception as exc:  # not on the hub cache, not a folder, no transformers
            raise ConfigError(f"--print-memory: no architecture for model {cfg.model.name!r} ({exc}); use one of "
                              f"tiny, {', '.join(ARCHITECTURES)} or a local model folder") from None
    print(memory_plan(cfg, gpu_gib=gpu_gib, world_size=world_size, arch=arch).table())
    return 0


def deterministic(cfg: Any, resume: str | None) -> bool:
    """Whether the run is in deterministic mode: the resolved config's ``deterministic``, or a resumed run folder's
    (its ``config.json``; a resume's ``--set`` cannot change it)."""
    if cfg is not None:
        return bool(cfg.deterministic)
    from ..errors import AbcError
    from ..io import read_json

    try:
        return bool(read_json(Path(str(resume)) / "config.json").get("deterministic"))
    except (AbcError, AttributeError):  # no or a broken folder: the trainer says so in one line
        return False


def run(args: argparse.Namespace) -> int:
    from ..extras import require
    from ..trainer.config import PRESETS, check_credit, to_toml

    if args.list_presets:
        for name, table in PRESETS.items():
            print(f"{name:24} env={table['env']['name']:9} model={table['model']['name']}")
        return 0
    cfg = None
    if not args.resume:  # the config (and --print-config) needs no torch
        cfg = config_from_args(args)
        check_credit(cfg)
        if args.print_config:
            sys.stdout.write(to_toml(cfg))
            return 0
        if args.print_memory:
            return print_memory(cfg, args.gpu_gib, args.world_size)
        require_for(cfg.env.name)
    else:
        require("torch", "transformers")
    if deterministic(cfg, args.resume):
        from ..trainer.kernels import pin_kernels

        pin_kernels()  # before torch is imported: it reads them once
    from ..trainer.threads import prepare_openmp

    prepare_openmp()  # before torch (and its OpenMP runtime) loads: OpenMP reads its waiting policy only then
    from ..trainer.loop import train

    train(resume=args.resume, overrides=tuple(args.overrides)) if cfg is None else train(cfg)
    return 0  # the summary is printed and saved as RUN_DIR/results.json
