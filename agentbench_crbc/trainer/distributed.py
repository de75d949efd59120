"""torchrun support: process group setup (nccl on GPU, gloo on CPU), FSDP2 ``fully_shard`` or DDP wrapping."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import torch

from .threads import torch_threads

__all__ = [
    "DEFAULT_TIMEOUT_MINUTES",
    "Dist",
    "agree",
    "all_reduce_mean",
    "broadcast_object",
    "collective_device",
    "dist_timeout_minutes",
    "init_distributed",
    "is_sharded",
    "max_int",
    "shard_model",
    "shutdown",
    "torch_threads",
    "unwrap",
    "wrap_model",
]


@dataclass
class Dist:
    """Where this process sits: ``rank`` of ``world`` (1 and 0 outside torchrun) and its device."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


#: Minutes a collective may wait before the process group aborts (``ABC_DIST_TIMEOUT_MINUTES`` overrides). Rank 0
#: validates alone while the other ranks wait in their next collective, and a paper-scale validation takes far
#: longer than torch's default of 10 minutes.
DEFAULT_TIMEOUT_MINUTES = 180.0
#: The timeouts a process group can keep: a second at least (less aborts every collective), a year at most.
MIN_TIMEOUT_MINUTES, MAX_TIMEOUT_MINUTES = 1 / 60, 525_600.0


def dist_timeout_minutes() -> float:
    """The process group's collective timeout in minutes: ``ABC_DIST_TIMEOUT_MINUTES`` or the default (180)."""
    raw = os.environ.get("ABC_DIST_TIMEOUT_MINUTES", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_MINUTES
    except ValueError:
        value = -1.0
    if not MIN_TIMEOUT_MINUTES <= value <= MAX_TIMEOUT_MINUTES:  # also false for nan; inf and 1e13 overflow a timedelta
        from ..errors import ConfigError

        raise ConfigError(f"ABC_DIST_TIMEOUT_MINUTES={raw!r}: give a number of minutes in [{MIN_TIMEOUT_MINUTES:g}, "
                          f"{MAX_TIMEOUT_MINUTES:g}] (default {DEFAULT_TIMEOUT_MINUTES:g})")
    return value


def init_distributed(device: str = "auto") -> Dist:
    """Join the torchrun process group when ``WORLD_SIZE`` > 1 (nccl with CUDA, else gloo), with a collective
    timeout of :func:`dist_timeout_minutes` (long enough for rank 0's validation while the others wait)."""
    want_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if want_cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world > 1 and not torch.distributed.is_initialized():
        from datetime import timedelta

        torch.distributed.init_process_group(backend="nccl" if want_cuda else "gloo",
                                             timeout=timedelta(minutes=dist_timeout_minutes()))
    return Dist(rank, world, local, dev)


def wrap_model(model: torch.nn.Module, dist: Dist, strategy: str = "auto", *,
               compute_dtype: torch.dtype | None = None) -> torch.nn.Module:
    """Shard with FSDP2 (``fully_shard`` on each decoder layer, then the root) or wrap in DDP; no-op alone.

    ``auto`` picks FSDP2 on GPU and DDP on CPU (both work with gloo; DDP is the cheaper one for tiny models).
    With ``compute_dtype`` (bf16), FSDP2 keeps fp32 sharded parameters and optimizer state, gathers parameters in
    ``compute_dtype`` for the forward and backward, and reduces gradients in fp32 (``MixedPrecisionPolicy``).
    """
    if not dist.enabled:
        return model
    if strategy == "auto":
        strategy = "fsdp" if dist.device.type == "cuda" else "ddp"
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[dist.local_rank] if dist.device.type == "cuda" else None)
    return shard_model(model, compute_dtype=compute_dtype)


def shard_model(model: torch.nn.Module, *, compute_dtype: torch.dtype | None = None) -> torch.nn.Module:
    """FSDP2 as the trainer shards: ``fully_shard`` on each decoder layer, then the root, with the trainer's
    mixed precision (``compute_dtype``: parameters gathered in it, gradients reduced in fp32; None: plain fp32).
    Needs an initialised process group (any world size)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # MixedPrecisionPolicy() keeps every dtype as it is (plain fp32)
    policy = MixedPrecisionPolicy() if compute_dtype is None else \
        MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    layers = _decoder_layers(model)
    for layer in layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks (``model.model.layers`` in Qwen2/Llama, through a peft wrapper if any)."""
    for name, mod in model.named_modules():
        if name.endswith("layers") and isinstance(mod, torch.nn.ModuleList):
            return list(mod)
    return []


def unwrap(model: torch.nn.Module) -> Any:
    """The module inside a DDP wrapper (FSDP2 shards in place, so it is the model itself)."""
    return getattr(model, "module", model)


def collective_device(backend: str | None = None) -> torch.device:
    """The device a tensor must be on for the process group's collectives: CPU when the backend takes CPU tensors
    (gloo, or a ``cpu:gloo,cuda:nccl`` pair), else the current device of the one it takes (nccl: this rank's GPU).

    :param backend: a backend string as ``torch.distributed.get_backend()`` gives it (default: the default group's).
    """
    if backend is None:
        backend = str(torch.distributed.get_backend())
    caps: list[str] = []
    for part in backend.lower().split(","):  # "gloo" or "cpu:gloo,cuda:nccl"
        dev, _, name = part.rpartition(":")
        caps += [dev] if dev else torch.distributed.Backend.backend_capability.get(name, ["cpu"])
    if "cpu" in caps:
        return torch.device("cpu")
    kind = caps[0]
    module = getattr(torch, kind, None)
    if module is not None and hasattr(module, "is_available") and module.is_available():
        return torch.device(kind, module.current_device())
    return torch.device(kind)


def all_reduce_mean(values: list[float], dist: Dist) -> list[float]:
    """Average floats over ranks (for logging)."""
    if not dist.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=collective_device())
    torch.distributed.all_reduce(t)
    return (t / dist.world).tolist()


def max_int(dist: Dist, n: int) -> int:
    """The largest ``n`` over ranks."""
    if not dist.enabled:
        return n
    t = torch.tensor([float(n)], device=collective_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def agree(dist: Dist, flag: bool) -> bool:
    """True on every rank when it is true on any (stops must be collective under torchrun)."""
    if not dist.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=collective_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return bool(t.item() > 0)


def broadcast_object(dist: Dist, obj: list[Any]) -> list[Any]:
    """Rank 0's ``obj`` (a list of picklable values) on every rank (in place; a no-op outside torchrun)."""
    if dist.enabled:
        torch.distributed.broadcast_object_list(obj, src=0)
    return obj


def is_sharded(model: torch.nn.Module, dist: Dist) -> bool:
    """Under torchrun with FSDP2 (``fully_shard`` in place), as opposed to DDP or a single process."""
    return dist.enabled and not isinstance(model, torch.nn.parallel.DistributedDataParallel)


def shutdown(dist: Dist, code: int = 0, *, barrier: bool = True) -> None:
    """Leave the process group; under torchrun flush and ``os._exit(code)`` (gloo can abort at interpreter exit).

    :param barrier: wait for the other ranks first (not after an error: they may be gone).
    """
    if not dist.enabled or not torch.distributed.is_initialized():
        return
    if barrier:
        torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
