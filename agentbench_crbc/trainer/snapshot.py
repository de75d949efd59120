"""Checkpoints of a live run: save the model, optimizer and trainer state, restore the optimizer on resume
(single process, DDP and FSDP2, where the full states are gathered onto rank 0)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from .checkpoint import load_optimizer_state, save_checkpoint
from .distributed import Dist, broadcast_object, is_sharded, unwrap

__all__ = ["restore_optimizer", "save_snapshot"]


def _by_name(optimizer_state: dict[str, Any]) -> bool:
    """Whether a saved optimizer state names its parameters (FSDP2's gathered full state) instead of numbering them
    (``optimizer.state_dict()``)."""
    return any(isinstance(k, str) for g in optimizer_state["param_groups"] for k in g["params"])


def save_snapshot(run_dir: Path, tag: int, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                  state: dict[str, Any], dist: Dist, keep: int) -> None:
    """Checkpoint ``tag`` (every rank calls this: under FSDP2 the gathers are collectives; rank 0 writes).

    :raises ConfigError: the disk is full (or the quota spent): one line; the previous checkpoint is untouched, so
        ``abc train --resume`` continues from it once there is space.
    """
    try:
        _save(run_dir, tag, model=model, optimizer=optimizer, state=state, dist=dist, keep=keep)
    except (OSError, RuntimeError) as exc:
        if not _no_space(exc):
            raise
        raise ConfigError(f"checkpoint {tag} of {run_dir}: no space left on the device; the previous checkpoint is "
                          f"intact: free some space, then `abc train --resume {run_dir}` continues") from None


def _no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it: torch wraps write errors in RuntimeError) is a full disk or quota."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(seen) or "file write failed" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _save(run_dir: Path, tag: int, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
          state: dict[str, Any], dist: Dist, keep: int) -> None:
    if state["stage"] == "sft":  # a resume during the warm start reloads the optimizer saved here
        state["sft_optimizer"] = optimizer is not None
    if is_sharded(model, dist):  # FSDP2: gather full model and optimizer states onto rank 0's CPU
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        full = get_model_state_dict(model, options=opts)
        # a fresh optimizer (no step yet) has nothing to save, and gathering it would initialise its state
        optim = get_optimizer_state_dict(model, optimizer, options=opts) \
            if optimizer is not None and optimizer.state else None
        if dist.main:
            save_checkpoint(run_dir, tag, model=model, optimizer=None, state=state, keep=keep, state_dict=full,
                            optimizer_state=optim)
        return
    if dist.main:
        save_checkpoint(run_dir, tag, model=unwrap(model), optimizer=optimizer, state=state, keep=keep)


def restore_optimizer(ckpt: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, dist: Dist,
                      say: Callable[[str], None]) -> None:
    """Load checkpoint ``ckpt``'s optimizer state into ``optimizer`` (every rank calls this).

    Single process and DDP: every rank loads ``optimizer.pt`` (``optimizer.state_dict()``, identical on all
    ranks). FSDP2: rank 0 loads the gathered full state and ``set_optimizer_state_dict`` broadcasts it, each rank
    keeping its own shard of the moments. A checkpoint without optimizer state leaves ``optimizer`` as it is.
    """
    if not is_sharded(model, dist):
        osd = load_optimizer_state(ckpt)
        if osd is None:
            say(f"resume: {ckpt.name} holds no optimizer state; the optimizer starts afresh")
            return
        if _by_name(osd):
            raise ConfigError(f"--resume: {ckpt}/optimizer.pt was saved under FSDP2 (keyed by parameter name); "
                              "resume with the same --set strategy=fsdp under torchrun")
        optimizer.load_state_dict(osd)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    osd, status = None, ["ok"]
    if dist.main:
        osd = load_optimizer_state(ckpt)
        if osd is None:
            status = ["missing"]
        elif not _by_name(osd):
            status = ["indexed"]
    broadcast_object(dist, status)  # every rank takes the same branch below
    if status[0] == "missing":
        say(f"resume: {ckpt.name} holds no optimizer state (an FSDP2 checkpoint saved before optimizer states were "
            "gathered); AdamW's moments start from zero")
        return
    if status[0] == "indexed":
        raise ConfigError(f"--resume: {ckpt}/optimizer.pt was saved by a single process or DDP (keyed by index); "
                          "resume with the same strategy (--set strategy=ddp, or without torchrun)")
    set_optimizer_state_dict(model, optimizer, optim_state_dict=osd if osd is not None else {},
                             options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
