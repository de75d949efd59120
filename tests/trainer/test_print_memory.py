"""``abc train --print-memory``: the memory model's table for a resolved preset, without loading anything."""

from __future__ import annotations

from agentbench_crbc.cli import main


def test_print_memory_of_the_7b_preset_says_it_does_not_fit_one_80gb_gpu_and_what_to_change(capsys):
    assert main(["train", "--preset", "alfworld-qwen2.5-7b", "--print-memory", "--gpu-gib", "80"]) == 0
    out = capsys.readouterr().out
    assert "Qwen/Qwen2.5-7B-Instruct (7.62B parameters), 1 rank(s), 80 GiB GPU" in out
    assert "does NOT fit" in out and "more ranks (FSDP2 shards it)" in out
    assert "bf16 KL reference" in out


def test_print_memory_shards_over_ranks_and_sees_the_engine(capsys):
    assert main(["train", "--preset", "alfworld-qwen2.5-7b", "--print-memory", "--world-size", "8",
                 "--set", "rollout.engine=vllm"]) == 0
    out = capsys.readouterr().out
    assert "8 rank(s)" in out and "vLLM engine" in out and "-> fits" in out
    assert "hf engine KV cache" not in out


def test_print_memory_of_a_model_without_an_architecture_says_which_exist(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"model_type": "no-such-architecture"}')  # a model folder transformers
    assert main(["train", "--print-memory", "--model", str(tmp_path)]) != 0  # cannot read
    err = capsys.readouterr().err
    assert "--print-memory: no architecture for model" in err and "Qwen/Qwen2.5-1.5B-Instruct" in err
