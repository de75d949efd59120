"""The policy and what serves it: model, tokenizer, LoRA and compute dtype; the prompt builder and rollout engine."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from .config import TrainConfig

__all__ = ["build_builder", "build_policy", "build_rollout_engine", "compute_dtype", "export_policy",
           "native_bf16"]


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

    A colocated engine (``engine.colocated``, e.g. vLLM) holds its own copy of the weights: the trainer pushes them
    after every update and puts it to sleep during the update. ``dist`` (the trainer's
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
