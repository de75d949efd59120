"""Full weights out of a (possibly FSDP2-sharded) policy one parameter at a time: pushes and frozen copies."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from .distributed import unwrap

__all__ = ["copy_weights_into", "full_state", "full_tensors", "merge_lora"]


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a DTensor shard (one all-gather), or the tensor itself."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def full_tensors(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, full tensor)`` for each state-dict entry, gathered one at a time (every rank must iterate: each
    sharded entry is a collective), so at most one unsharded parameter exists on the device at once. A DDP wrapper
    is looked through: the names are the model's own, never ``module.``-prefixed."""
    for name, t in unwrap(model).state_dict().items():
        yield name, _full(t.detach())


def merge_lora(state: dict[str, torch.Tensor], scaling: dict[str, float]) -> dict[str, torch.Tensor]:
    """A peft state dict with each ``lora_B @ lora_A * scaling`` added to its ``base_layer.weight``; the adapter
    entries go, so the names are the base model's (``base_model.model.`` and ``.base_layer.`` are left for the
    engine's exporter). ``scaling`` maps a module's name (``...q_proj``) to its adapter's ``lora_alpha / r``."""
    out = {k: v for k, v in state.items() if "lora_" not in k}
    for key in [k for k in state if k.endswith(".lora_A.default.weight")]:
        mod = key.removesuffix(".lora_A.default.weight")
        a, b = state[key], state[f"{mod}.lora_B.default.weight"]
        base = f"{mod}.base_layer.weight"
        w = out[base]
        out[base] = (w.float() + (b.float() @ a.float()) * scaling[mod]).to(w.dtype)
    return out


def _lora_scaling(model: torch.nn.Module) -> dict[str, float]:
    scales: dict[str, float] = {}
    for name, mod in model.named_modules():
        s = getattr(mod, "scaling", None)
        if isinstance(s, dict) and "default" in s and hasattr(mod, "lora_A"):
            scales[name] = float(s["default"])
    return scales


def full_state(model: torch.nn.Module, *, dtype: torch.dtype | None = None, merge: bool = True
               ) -> dict[str, torch.Tensor]:
    """The model's full weights on the CPU (``dtype`` if given), gathered parameter by parameter (no full state
    dict on the device); a peft model's adapters are merged into their base weights when ``merge``. A DDP wrapper
    is looked through (the names reaching an engine are the model's own)."""
    model = unwrap(model)  # DDP: the wrapped model's names and LoRA scalings
    state: dict[str, torch.Tensor] = {}
    for name, t in full_tensors(model):
        state[name] = t.to("cpu", dtype=dtype if dtype is not None and t.is_floating_point() else t.dtype)
    if merge and any("lora_A" in k for k in state):
        state = merge_lora(state, _lora_scaling(model))
    return state


@torch.no_grad()
def copy_weights_into(target: torch.nn.Module | None, model: torch.nn.Module) -> None:
    """Copy ``model``'s (sharded) weights into ``target`` (unsharded, same names), one parameter at a time.

    Every rank of a sharded ``model`` must call this (each gather is a collective); a rank that keeps no copy
    passes ``target=None`` and only takes part in the gathers (the final export: rank 0 alone holds the copy).

    :raises KeyError: a name of ``model`` that ``target`` lacks.
    """
    dest = target.state_dict(keep_vars=True) if target is not None else None
    for name, full in full_tensors(model):
        if dest is not None:
            dest[name].copy_(full)
