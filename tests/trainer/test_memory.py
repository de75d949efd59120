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
