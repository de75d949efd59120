"""The frozen KL reference of the RL stage: the policy RL started from, saved once as ``run_dir/reference``."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import torch

from .checkpoint import load_weights, write_manifest
from .config import TrainConfig
from .distributed import Dist, unwrap
from .policy import build_policy

__all__ = ["make_reference"]


def make_reference(cfg: TrainConfig, model: torch.nn.Module, *, rollout_model: torch.nn.Module | None,
                   run_dir: Path, update: int, source: Path | str | None, device: torch.device, dist: Dist) -> Any:
    """The reference model (``None`` without a KL term; with LoRA a callable giving the base with adapters off).

    :param source: from :func:`~agentbench_crbc.trainer.resume.reference_source`: ``"base"`` rebuilds the base
        model, a path loads the RL stage's checkpoint 0, ``None`` copies the policy now (or, resumed mid-RL,
        loads the saved reference).
    """
    if cfg.optim.kl_coef <= 0:
        return None
    base = unwrap(model)
    if cfg.model.lora:
        return lambda: (base, base.disable_adapter())
    if rollout_model is not None:  # FSDP2: an unsharded copy (its forward runs no collectives)
        base = rollout_model
    # rebuilt on resume from the base model when the run started RL from it (no warm start)
    ref = build_policy(cfg, device)[0] if source == "base" else copy.deepcopy(base).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    saved = run_dir / "reference"
    if isinstance(source, Path):  # rebuilt on resume from the RL stage's checkpoint 0
        load_weights(ref, source / "model")
    elif source is None and update > 0:  # resumed mid-RL: the policy RL started from
        load_weights(ref, saved)
        return ref
    if dist.main:
        tmp = run_dir / ".reference.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        torch.save(ref.state_dict(), tmp / "state.pt")
        write_manifest(tmp)
        shutil.rmtree(saved, ignore_errors=True)
        tmp.replace(saved)
    return ref
