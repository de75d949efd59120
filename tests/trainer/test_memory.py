"""The memory model: typed-in architectures match transformers' own parameter counts; parts shard, vanish and add up."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from agentbench_crbc.trainer.config import load_config  # noqa: E402
from agentbench_crbc.trainer.memory import ARCHITECTURES, GIB, architecture_of, memory_plan  # noqa: E402


def _text_config(a):
    return transformers.Qwen2Config(hidden_size=a.hidden, intermediate_size=a.intermediate,
                                    num_hidden_layers=a.layers, num_attention_heads=a.heads,
                                    num_key_value_heads=a.kv_heads, vocab_size=a.vocab, tie_word_embeddings=a.tied)


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct"])
def test_text_parameter_counts_equal_transformers(name: str) -> None:
    a = ARCHITECTURES[name]
    with torch.device("meta"):  # shapes only: no memory
        model = transformers.Qwen2ForCausalLM(_text_config(a))
    assert a.params == sum(p.numel() for p in model.parameters())
    assert architecture_of(model.config) == a


def test_vl_parameter_count_equals_transformers() -> None:
    a = ARCHITECTURES["Qwen/Qwen2.5-VL-3B-Instruct"]
    cfg = transformers.Qwen2_5_VLConfig(
        text_config={"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                     "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936,
                     "tie_word_embeddings": True},
        vision_config={"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                       "out_hidden_size": 2048, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "in_channels": 3}, tie_word_embeddings=True)
    with torch.device("meta"):
        model = transformers.Qwen2_5_VLForConditionalGeneration(cfg)
    assert a.params == sum(p.numel() for p in model.parameters()) == 3_754_622_976
    assert a.vision_params == sum(p.numel() for n, p in model.named_parameters() if "visual" in n)


def test_plan_parts_shard_vanish_and_add_up() -> None:
    cfg = load_config(preset="alfworld-qwen2.5-7b")
    P = ARCHITECTURES[cfg.model.name].params
    one, four = memory_plan(cfg, world_size=1), memory_plan(cfg, world_size=4)
    parts1, parts4 = dict(one.parts), dict(four.parts)
    assert parts1["AdamW state, fp32 m and v (sharded)"] == pytest.approx(8 * P / GIB, rel=1e-3)
    assert parts4["AdamW state, fp32 m and v (sharded)"] == pytest.approx(parts1["AdamW state, fp32 m and v "
                                                                                  "(sharded)"] / 4, rel=1e-3)
    assert parts1["bf16 KL reference (frozen copy)"] == pytest.approx(2 * P / GIB, rel=1e-3)
    assert "bf16 rollout copy for the hf engine (unsharded)" not in parts1  # one GPU: the engine shares weights
    assert "bf16 rollout copy for the hf engine (unsharded)" in parts4
    no_kl = memory_plan(dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, kl_coef=0.0)))
    assert "bf16 KL reference (frozen copy)" not in dict(no_kl.parts)
    lora = memory_plan(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, lora=True)))
    assert dict(lora.parts)["AdamW state, fp32 m and v (sharded)"] < 0.01 * parts1["AdamW state, fp32 m and v "
                                                                                   "(sharded)"]
    persistent = sum(v for k, v in one.parts if "activations" not in k and "LM head" not in k
                     and "KV cache" not in k and "CUDA" not in k)
    assert one.train_peak_gib == pytest.approx((persistent + parts1["activations, one micro-batch (checkpointed)"]
                                                + parts1["LM head at response tokens (logits + grad)"]) * 1.1 + 1,
                                               abs=0.05)


def test_table_says_whether_it_fits_and_what_to_change() -> None:
    small = memory_plan(load_config(preset="alfworld-qwen2.5-1.5b"), gpu_gib=80).table()
    assert "-> fits: peak" in small
    big = memory_plan(load_config(preset="alfworld-qwen2.5-7b"), gpu_gib=80).table()
    assert "-> does NOT fit" in big and "more ranks" in big


def _plan(preset: str, *sets: str, **kw):
    return memory_plan(load_config(preset=preset, overrides=sets), **kw)


def test_fp32_weights_under_autocast_keep_a_fp32_residual_fp32_keys_and_a_cast_cache() -> None:
    """One GPU (and DDP) computes on the fp32 master weights under bf16 autocast: the residual stream and the RoPE'd
    keys are fp32 and autocast caches a bf16 copy of every trainable weight; FSDP2 gathers bf16 weights instead."""
    cfg = load_config(preset="alfworld-qwen2.5-1.5b")
    a = ARCHITECTURES[cfg.model.name]
    h, kv, i, L = a.hidden, a.kv_dim, a.intermediate, a.layers
    tokens = cfg.optim.micro_batch * (cfg.rollout.max_prompt_tokens + cfg.rollout.max_response_tokens)
    seqs = cfg.rollout.groups * cfg.rollout.group_size
    seq = cfg.rollout.max_prompt_tokens + cfg.rollout.max_response_tokens
    one, eight = dict(memory_plan(cfg).parts), dict(memory_plan(cfg, world_size=8).parts)
    assert cfg.model.gradient_checkpointing
    act = "activations, one micro-batch (checkpointed)"
    assert one[act] == pytest.approx(tokens * (L * 4 * h + 22 * h + 6 * kv + 6 * i) / GIB, abs=1e-3)
    assert eight[act] == pytest.approx(tokens * (L * 2 * h + 2 * (5 * h + 2 * kv + 3 * i)) / GIB, abs=1e-3)
    assert one[act] / eight[act] > 1.6  # the checkpointed residual stream doubles (plus one layer recomputed)
    kv_one = one[f"hf engine KV cache ({seqs} sequences x {seq} tokens)"]
    kv_eight = eight[f"hf engine KV cache ({seqs // 8} sequences x {seq} tokens)"]  # rollout.groups: over all ranks
    assert kv_one == pytest.approx(1.5 * 8 * kv_eight, rel=1e-3)  # fp32 keys, bf16 values
    assert one["autocast cast cache, bf16 copies of fp32 weights"] == pytest.approx(2 * a.params / GIB, rel=1e-3)
    assert "autocast cast cache, bf16 copies of fp32 weights" not in eight
    ddp = dict(memory_plan(dataclasses.replace(cfg, strategy="ddp"), world_size=8).parts)  # DDP shards nothing
    assert ddp["AdamW state, fp32 m and v (sharded)"] == one["AdamW state, fp32 m and v (sharded)"]
    assert ddp[act] == one[act] and "bf16 rollout copy for the hf engine (unsharded)" not in ddp


def test_lora_keeps_the_base_fp32_and_builds_no_reference() -> None:
    plan = _plan("alfworld-qwen2.5-7b", "model.lora=true")
    P = ARCHITECTURES["Qwen/Qwen2.5-7B-Instruct"].params
    parts = dict(plan.parts)
    assert parts["fp32 frozen base under LoRA (sharded)"] == pytest.approx(4 * P / GIB, rel=1e-3)
    assert not [k for k in parts if "reference" in k] and not [n for n, _ in plan.startup if "reference" in n]
    assert dict(_plan("alfworld-qwen2.5-7b", "model.lora=true", world_size=4).parts)[
        "fp32 frozen base under LoRA (sharded)"] == pytest.approx(P / GIB, rel=1e-3)


def test_the_start_counts_the_fp32_copies_before_their_casts() -> None:
    """Every rank loads the whole fp32 model before FSDP2 shards it; FSDP2 + hf deep-copies it in fp32 for the
    rollout copy; the KL reference is built in fp32, with vLLM awake."""
    P = ARCHITECTURES["Qwen/Qwen2.5-7B-Instruct"].params
    hf8 = _plan("alfworld-qwen2.5-7b", world_size=8)
    assert hf8.startup_peak_gib == pytest.approx((8 * P / GIB) * 1.1 + 1, abs=0.05)
    vllm8 = _plan("alfworld-qwen2.5-7b", "rollout.engine=vllm", world_size=8, gpu_gib=80)
    master = dict(vllm8.parts)["fp32 master weights (trainable, sharded)"]
    awake = 0.4 * 80
    assert vllm8.startup_peak_gib == pytest.approx((master + 4 * P / GIB + awake) * 1.1 + 1, abs=0.05)
    assert vllm8.peak_gib == vllm8.startup_peak_gib > vllm8.generate_peak_gib  # the start is this run's peak
    assert "peak at the start" in vllm8.table()
    tight = _plan("alfworld-qwen2.5-7b", "rollout.engine=vllm", world_size=8, gpu_gib=64)
    assert not tight.fits and "the start is the peak" in tight.table()
