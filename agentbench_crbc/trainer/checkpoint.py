"""Atomic, verifiable checkpoints: temp folder, sha256 manifest written last, fsync, rename; ``latest`` points at
the newest complete one, and a resume skips damaged ones; snapshots of a live run (single process, DDP and FSDP2,
whose full states are gathered onto rank 0) and the optimizer restored from one."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConfigError
from ..io import atomic_write_text, json_text, read_json, read_text, umask_tree
from .distributed import Dist, broadcast_object, is_sharded, unwrap

if TYPE_CHECKING:
    from .resume import RunState

__all__ = [
    "MANIFEST", "checkpoint_manifest", "find_checkpoint", "latest_checkpoint", "load_checkpoint",
    "load_optimizer_state", "load_weights", "restore_optimizer", "save_checkpoint", "save_snapshot", "set_aside",
    "trusted_reference", "verify_folder", "write_manifest"
]


#: Written last into every checkpoint (and ``reference/``): each file's size and sha256, plus run bookkeeping.
MANIFEST = "manifest.json"


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
            model.save_pretrained(model_dir, safe_serialization=True,  # type: ignore[operator]
                                  **_in_memory_names(model))
        else:
            model_dir.mkdir()
            torch.save(model.state_dict(), model_dir / "state.pt")
        if optimizer_state is not None:
            torch.save(optimizer_state, tmp / "optimizer.pt")
        elif optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
        (tmp / "state.json").write_text(json_text(state, indent=1), encoding="utf-8")
        metrics = Path(run_dir) / "metrics.jsonl"  # a resume cuts the log back to this size (trainer/metrics.py)
        write_manifest(tmp, metrics_bytes=metrics.stat().st_size if metrics.exists() else 0)
        umask_tree(tmp)  # mkdtemp's 0700 (and the weights' 0600) as open and mkdir would have made them
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


def _in_memory_names(model: Any) -> dict[str, Any]:
    """``save_pretrained`` keywords that keep the model's own parameter names (transformers 5 otherwise writes
    some models, Qwen2.5-VL among them, under their original checkpoint names, which :func:`load_weights` cannot map
    back: a resumed VL run stopped with "weights do not fit the model")."""
    import inspect

    params = inspect.signature(model.save_pretrained).parameters
    return {"save_original_format": False} if "save_original_format" in params else {}


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def write_manifest(folder: str | Path, **extra: Any) -> None:
    """Write ``folder/manifest.json``: size and sha256 of every other file under ``folder`` (plus ``extra``)."""
    folder = Path(folder)
    files = {p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json_text({"format": 1, "files": files, **extra}, indent=1), encoding="utf-8")


def verify_folder(folder: str | Path, *, require_manifest: bool = False) -> dict[str, Any]:
    """Check every file of ``folder`` against its manifest; return the manifest (``{}`` for a folder saved before
    manifests existed, whose ``state.json``, if any, must still parse, unless ``require_manifest``).

    :raises ConfigError: one line naming the first missing, truncated or altered file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder.name} is missing")
    home = folder.resolve()
    for p in sorted(folder.rglob("*")):  # the trainer writes no links: one here points where it chose
        if p.is_symlink():
            raise ConfigError(f"{p.relative_to(folder).as_posix()} is a symlink (to {os.readlink(p)}); a saved "
                              "folder holds its own files only (replace the link with the file, or remove it)")
    path = folder / MANIFEST
    if not path.exists() and require_manifest:
        raise ConfigError(f"{MANIFEST} is missing (not a complete checkpoint the trainer wrote)")
    if not path.exists():  # an older folder: only its trainer state can be checked
        if (folder / "state.json").exists():
            try:
                read_json(folder / "state.json", error=ConfigError)
            except ConfigError:
                raise ConfigError("state.json is not valid JSON") from None
        return {}
    try:
        manifest: dict[str, Any] = read_json(path, error=ConfigError)
        files = manifest["files"]
    except (ConfigError, KeyError, TypeError):
        raise ConfigError(f"{MANIFEST} is unreadable") from None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in files.items()):
        raise ConfigError(f"{MANIFEST} is unreadable")
    for name, want in files.items():
        f = folder / name
        if not f.resolve().is_relative_to(home):
            raise ConfigError(f"{MANIFEST} names {str(name)[:80]!r}, outside the folder; it is not one the trainer "
                              "wrote")
        if not f.is_file():
            raise ConfigError(f"{name} is missing")
        size = f.stat().st_size
        if size != want["bytes"]:
            raise ConfigError(f"{name} has {size} bytes, the manifest says {want['bytes']}")
        if _sha256(f) != want["sha256"]:
            raise ConfigError(f"{name} does not match its sha256 in the manifest")
    return manifest


def checkpoint_manifest(ckpt: str | Path) -> dict[str, Any]:
    """A checkpoint's manifest as saved (``{}`` when it has none); :func:`verify_folder` checks it."""
    path = Path(ckpt) / MANIFEST
    if not path.exists():
        return {}
    manifest: dict[str, Any] = read_json(path, error=ConfigError)
    return manifest


def find_checkpoint(run_dir: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest intact checkpoint of a run (``None`` when there is none), and ``(checkpoint, what is wrong)``
    for each newer one that failed :func:`verify_folder` (newest first).

    Candidates are the one ``latest`` names, then every ``ckpt-*`` folder with a ``state.json`` from the newest. A
    checkpoint without a manifest is damaged (the trainer writes one last into every checkpoint it saves).

    :raises ConfigError: a checkpoint (or ``checkpoints/``) is a symlink to a place outside the run folder.
    """
    root = Path(run_dir) / "checkpoints"
    home = Path(run_dir).resolve()
    for p in (root, *root.glob("ckpt-*")):
        if p.is_symlink() and not p.resolve().is_relative_to(home):
            raise ConfigError(f"--resume: {p} is a symlink to {p.resolve()}, outside the run folder; a run resumes "
                              "only from its own checkpoints (move the folder in, or remove the link)")
    ckpts = sorted((p for p in root.glob("ckpt-*") if (p / "state.json").exists()), key=lambda p: p.stat().st_mtime,
                   reverse=True)
    pointer = root / "latest"
    if pointer.exists():
        named = root / read_text(pointer, error=ConfigError).strip()
        if named in ckpts:
            ckpts.remove(named)
            ckpts.insert(0, named)
    damaged: list[tuple[Path, str]] = []
    for ckpt in ckpts:
        try:
            verify_folder(ckpt, require_manifest=True)
        except ConfigError as exc:
            damaged.append((ckpt, str(exc)))
            continue
        return ckpt, damaged
    return None, damaged


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest intact checkpoint of a run, or ``None`` (see :func:`find_checkpoint`)."""
    return find_checkpoint(run_dir)[0]


def set_aside(folder: str | Path) -> Path:
    """Rename a damaged checkpoint to ``damaged-{name}`` beside it, out of resumes and rotation; return the path."""
    folder = Path(folder)
    target = folder.with_name(f"damaged-{folder.name}")
    k = 1
    while target.exists():
        k += 1
        target = folder.with_name(f"damaged-{folder.name}-{k}")
    folder.rename(target)
    return target


def load_checkpoint(ckpt: str | Path, *, model: torch.nn.Module | None = None,
                    optimizer: Any | None = None) -> dict[str, Any]:
    """Load weights (into ``model``) and optimizer state; return the trainer state dict."""
    ckpt = Path(ckpt)
    if not (ckpt / "state.json").exists():
        raise ConfigError(f"--resume: {ckpt} is not a complete checkpoint (no state.json)")
    state: dict[str, Any] = read_json(ckpt / "state.json", error=ConfigError)
    if model is not None:
        load_weights(model, ckpt / "model")
    if optimizer is not None and (osd := load_optimizer_state(ckpt)) is not None:
        optimizer.load_state_dict(osd)
    if (ckpt / "rng.pt").exists():
        torch.set_rng_state(torch.load(ckpt / "rng.pt", map_location="cpu", weights_only=True)["torch"])
    return state


def load_optimizer_state(ckpt: str | Path) -> dict[str, Any] | None:
    """A checkpoint's saved optimizer state (``optimizer.pt``), or ``None`` when it has none.

    Single-process and DDP checkpoints hold ``optimizer.state_dict()`` (parameters keyed by index); FSDP2 checkpoints
    hold the gathered full state of ``get_optimizer_state_dict`` (keyed by parameter name).
    """
    path = Path(ckpt) / "optimizer.pt"
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)  # saved from CUDA: else every rank fills cuda:0


def trusted_reference(run_dir: str | Path) -> Path | None:
    """The run's saved KL reference (``run_dir/reference``) when it is one the trainer wrote there, ``None`` when
    there is none. A link to a place outside the run, or a folder without an intact manifest, is never loaded.

    :raises ConfigError: one line naming what is wrong and how to fix it.
    """
    saved = Path(run_dir) / "reference"
    if not saved.exists() and not saved.is_symlink():
        return None
    if saved.is_symlink() and not saved.resolve().is_relative_to(Path(run_dir).resolve()):
        raise ConfigError(f"--resume: {saved} is a symlink to {saved.resolve()}, outside the run folder; a run loads "
                          "only its own reference (remove the link)")
    try:
        verify_folder(saved, require_manifest=True)
    except ConfigError as exc:
        raise ConfigError(f"--resume: {saved} is not a reference the trainer wrote ({exc}); remove it, and the "
                          "resume rebuilds it from checkpoint 0 when one is kept") from None
    return saved


def load_weights(model: torch.nn.Module, folder: str | Path) -> None:
    """Copy saved weights (full ``safetensors``, a LoRA adapter, or ``state.pt``) into ``model`` in place."""
    folder = Path(folder)
    if (folder / "state.pt").exists():
        # to the CPU first (CUDA-saved tensors would otherwise land on cuda:0 on every rank), copied into place
        model.load_state_dict(torch.load(folder / "state.pt", map_location="cpu", weights_only=True))
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


def _by_name(optimizer_state: dict[str, Any]) -> bool:
    """Whether a saved optimizer state names its parameters (FSDP2's gathered full state) instead of numbering them
    (``optimizer.state_dict()``)."""
    return any(isinstance(k, str) for g in optimizer_state["param_groups"] for k in g["params"])


def save_snapshot(run_dir: Path, tag: int, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                  state: RunState, dist: Dist, keep: int) -> None:
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
          state: RunState, dist: Dist, keep: int) -> None:
    if state.stage == "sft":  # a resume during the warm start reloads the optimizer saved here
        state.sft_optimizer = optimizer is not None
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
            save_checkpoint(run_dir, tag, model=model, optimizer=None, state=state.to_json(), keep=keep,
                            state_dict=full, optimizer_state=optim)
        return
    if dist.main:
        save_checkpoint(run_dir, tag, model=unwrap(model), optimizer=optimizer, state=state.to_json(), keep=keep)


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
