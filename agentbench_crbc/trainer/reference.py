"""The frozen KL reference of the RL stage: the policy RL started from, saved once as ``run_dir/reference``."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import torch

from .checkpoint import load_weights, trusted_reference, write_manifest
from .config import TrainConfig
from .distributed import Dist, unwrap
from .policy import build_policy
from .push import copy_weights_into

__all__ = ["make_reference"]


def _is_sharded(model: torch.nn.Module) -> bool:
    return any(hasattr(p, "full_tensor") for p in model.parameters())


def make_reference(cfg: TrainConfig, model: torch.nn.Module, *, rollout_model: torch.nn.Module | None,
                   run_dir: Path, update: int, source: Path | str | None, device: torch.device, dist: Dist,
                   dtype: torch.dtype | None = None) -> Any:
    """The reference model (``None`` without a KL term; with LoRA a callable giving the base with adapters off).

    Frozen, in ``dtype`` (the compute dtype: bf16 on GPUs, 2 bytes per parameter instead of 4). An FSDP2-sharded
    policy (which ``copy.deepcopy`` refuses) is copied into a freshly built model parameter by parameter.

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
    if source == "base":
        ref = build_policy(cfg, device)[0]
    elif _is_sharded(base):  # FSDP2 with a colocated engine: no unsharded copy to deep-copy
        ref = build_policy(cfg, device)[0]
        copy_weights_into(ref, base)
    else:
        ref = copy.deepcopy(base).eval()
    if dtype is not None:
        ref = ref.to(dtype)
    for p in ref.parameters():
        p.requires_grad_(False)
    saved = run_dir / "reference"
    if isinstance(source, Path):  # rebuilt on resume from the RL stage's checkpoint 0
        load_weights(ref, source / "model")
    elif source is None and update > 0:  # resumed mid-RL: the policy RL started from
        load_weights(ref, trusted_reference(run_dir) or saved)
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
