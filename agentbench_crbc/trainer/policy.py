"""The policy and what serves it: model, tokenizer, LoRA and compute dtype; the prompt builder and rollout engine;
full weights out of a (possibly sharded) policy for pushes and frozen copies; the frozen KL reference."""

from __future__ import annotations

import copy
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .checkpoint import load_weights, trusted_reference, write_manifest
from .config import TrainConfig
from .distributed import Dist, unwrap

__all__ = [
    "build_builder", "build_policy", "build_rollout_engine", "compute_dtype", "copy_weights_into", "export_policy",
    "full_state", "full_tensors", "make_reference", "merge_lora", "native_bf16"
]


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes in bf16 natively: a GPU that supports it, or a CPU with AVX512-BF16 or AMX (where
    bf16 autocast runs the tiny model's forward and backward about 1.5-2x faster than fp32)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(bool(getattr(torch.cpu, p, lambda: False)()) for p in probes)
    return False


def compute_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``model.dtype`` on ``device`` (None: plain fp32). Parameters stay fp32 either way.

    ``auto`` is bf16 where the device computes it natively (:func:`native_bf16`), else fp32."""
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return torch.bfloat16 if name == "bf16" else None


def build_policy(cfg: TrainConfig, device: torch.device) -> tuple[torch.nn.Module, Any, Any]:
    """Model (LoRA-wrapped when asked), tokenizer and image processor (or None) for ``cfg.model``; parameters in
    fp32 (the master weights; ``model.dtype = bf16`` computes in autocast)."""
    from ..rollout.engines import models

    dtype = torch.float32
    proc = None
    if cfg.model.name == "tiny":
        tok = models.tiny_tokenizer()
        model = models.tiny_qwen2(tok, hidden_size=cfg.model.tiny_hidden, num_layers=cfg.model.tiny_layers,
                                  seed=cfg.seed)
        model = model.to(device=device, dtype=dtype)
    else:
        model, tok = models.load_model(cfg.model.name, dtype=dtype, device=str(device))
        if isinstance(tok, tuple):
            tok, proc = tok
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = True  # generation still caches; training forward passes do not need it
    if cfg.model.lora:
        from peft import LoraConfig, get_peft_model

        lcfg = LoraConfig(r=cfg.model.lora_rank, lora_alpha=cfg.model.lora_alpha,
                          lora_dropout=cfg.model.lora_dropout, target_modules=list(cfg.model.lora_targets),
                          task_type="CAUSAL_LM")
        with warnings.catch_warnings():  # peft 0.x calls a transformers 5 deprecated alias
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = get_peft_model(model, lcfg)
    return model.eval(), tok, proc


def build_builder(cfg: TrainConfig, tok: Any, proc: Any = None) -> Any:
    """The prompt builder of ``cfg.env`` (template, history, prompt budget) for ``tok``."""
    from ..rollout.episodes.prompts import PromptBuilder

    return PromptBuilder(tok, cfg.env.id, template=cfg.env.template, history=cfg.env.history, image_processor=proc,
                         max_prompt_tokens=cfg.rollout.max_prompt_tokens)


def build_rollout_engine(cfg: TrainConfig, model: Any, tok: Any, proc: Any = None, *,
                         autocast_dtype: torch.dtype | None = None, device: torch.device | None = None,
                         dist: Any = None) -> Any:
    """The rollout engine ``rollout.engine`` names, from the host's engine registry (one call to ``build_engine``).

    A colocated engine (``engine.capabilities.colocated``, e.g. vLLM) holds its own copy of the weights: the trainer
    pushes them after every update and puts it to sleep during the update. ``dist`` (the trainer's
    :class:`~agentbench_crbc.trainer.distributed.Dist`) tells the engine it is one rank's, seeded ``seed + rank``.
    """
    from ..rollout.engines.factory import EngineRequest, build_engine

    distributed = dist is not None and bool(dist.enabled)
    request = EngineRequest(model=model, tokenizer=tok, image_processor=proc, model_name=cfg.model.name,
                            device=device, autocast_dtype=autocast_dtype, options=dict(cfg.rollout.engine_options),
                            env_id=cfg.env.id, seed=cfg.seed + (dist.rank if distributed else 0),
                            distributed=distributed, beside_trainer=True)
    return build_engine(cfg.rollout.engine, request)


def export_policy(model: Any, tok: Any, folder: str | Path) -> None:
    """The policy as a loadable folder (weights or LoRA adapter, and tokenizer), replaced atomically."""
    import shutil

    from ..io import umask_tree

    final = Path(folder)
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    umask_tree(tmp)  # safetensors writes 0600; the folder gets what open would give under the umask
    shutil.rmtree(final, ignore_errors=True)
    tmp.replace(final)


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
