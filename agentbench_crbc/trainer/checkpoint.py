"""Atomic checkpoints: write into a temp folder, fsync, rename; ``latest`` points at the newest complete one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from ..io import atomic_write_text

__all__ = ["latest_checkpoint", "load_checkpoint", "load_optimizer_state", "load_weights", "save_checkpoint"]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(run_dir: str | Path, update: int, *, model: torch.nn.Module, optimizer: Any | None,
                    state: dict[str, Any], keep: int = 2,
                    state_dict: dict[str, Any] | None = None,
                    optimizer_state: dict[str, Any] | None = None) -> Path:
    """Save ``ckpt-{update:06d}`` under ``run_dir/checkpoints`` atomically and point ``latest`` at it.

    A kill at any moment leaves the previous checkpoint usable: files go to a temp folder that is renamed only
    when complete, then ``latest`` (a small text file) is replaced atomically.

    :param model: saved with ``save_pretrained`` when it has one (LoRA: the adapter only), else its state dict.
    :param state_dict: save this (e.g. FSDP2's gathered full state) instead of asking ``model``.
    :param optimizer: its ``state_dict()`` is saved as ``optimizer.pt`` (``None``: no optimizer state).
    :param optimizer_state: save this as ``optimizer.pt`` instead of asking ``optimizer`` (e.g. FSDP2's gathered full
        optimizer state, keyed by parameter name); give one of ``optimizer`` and ``optimizer_state``, not both.
    :param state: JSON-able trainer state (update, stage, RNG seeds, metrics so far).
    """
    if optimizer is not None and optimizer_state is not None:
        raise ValueError("save_checkpoint: give optimizer or optimizer_state, not both")
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"ckpt-{update:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        model_dir = tmp / "model"
        if state_dict is not None:  # a gathered full state dict (FSDP2)
            model_dir.mkdir()
            torch.save(state_dict, model_dir / "state.pt")
        elif hasattr(model, "save_pretrained"):
            model.save_pretrained(model_dir, safe_serialization=True)  # type: ignore[operator]
        else:
            model_dir.mkdir()
            torch.save(model.state_dict(), model_dir / "state.pt")
        if optimizer_state is not None:
            torch.save(optimizer_state, tmp / "optimizer.pt")
        elif optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
        for p in tmp.rglob("*"):
            if p.is_file():
                with open(p, "rb") as fh:
                    os.fsync(fh.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(root / "latest", final.name + "\n")
    ckpts = sorted((p for p in root.glob("ckpt-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)  # oldest first
    for old in ckpts[:-keep] if keep > 0 else []:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".ckpt-*"):  # temp folders of killed saves
        shutil.rmtree(stale, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if pointer.exists():
        p = root / pointer.read_text(encoding="utf-8").strip()
        if (p / "state.json").exists():
            return p
    ckpts = sorted((p for p in root.glob("ckpt-*") if (p / "state.json").exists()), key=lambda p: p.stat().st_mtime)
    return ckpts[-1] if ckpts else None


def load_checkpoint(ckpt: str | Path, *, model: torch.nn.Module | None = None,
                    optimizer: Any | None = None) -> dict[str, Any]:
    """Load weights (into ``model``) and optimizer state; return the trainer state dict."""
    ckpt = Path(ckpt)
    if not (ckpt / "state.json").exists():
        raise ConfigError(f"--resume: {ckpt} is not a complete checkpoint (no state.json)")
    state: dict[str, Any] = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    if model is not None:
        load_weights(model, ckpt / "model")
    if optimizer is not None and (osd := load_optimizer_state(ckpt)) is not None:
        optimizer.load_state_dict(osd)
    if (ckpt / "rng.pt").exists():
        torch.set_rng_state(torch.load(ckpt / "rng.pt", weights_only=True)["torch"])
    return state


def load_optimizer_state(ckpt: str | Path) -> dict[str, Any] | None:
    """A checkpoint's saved optimizer state (``optimizer.pt``), or ``None`` when it has none.

    Single-process and DDP checkpoints hold ``optimizer.state_dict()`` (parameters keyed by index); FSDP2 checkpoints
    hold the gathered full state of ``get_optimizer_state_dict`` (keyed by parameter name).
    """
    path = Path(ckpt) / "optimizer.pt"
    if not path.exists():
        return None
    return torch.load(path, weights_only=True)


def load_weights(model: torch.nn.Module, folder: str | Path) -> None:
    """Copy saved weights (full ``safetensors``, a LoRA adapter, or ``state.pt``) into ``model`` in place."""
    folder = Path(folder)
    if (folder / "state.pt").exists():
        model.load_state_dict(torch.load(folder / "state.pt", weights_only=True))
        return
    from safetensors.torch import load_file

    if (folder / "adapter_model.safetensors").exists():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(folder / "adapter_model.safetensors"))
        return
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"no weights in {folder}")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        sd.update(load_file(f))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("lm_head.weight")]  # tied embeddings are saved once
    if missing or unexpected:
        raise ConfigError(f"weights in {folder} do not fit the model: missing {missing[:3]}, "
                          f"unexpected {unexpected[:3]}")
