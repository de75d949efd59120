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


def test_print_memory_refuses_ranks_and_gpu_sizes_that_mean_nothing(capsys):
    # #31 item 7: --world-size 0 or -4 silently meant 1 rank; --gpu-gib inf "fitted"; nan and negatives passed
    for flag, value in (("--world-size", "0"), ("--world-size", "-4"), ("--gpu-gib", "inf"), ("--gpu-gib", "nan"),
                        ("--gpu-gib", "-80"), ("--gpu-gib", "0")):
        assert main(["train", "--preset", "alfworld-qwen2.5-7b", "--print-memory", flag, value]) == 2, (flag, value)
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"abc train: error: {flag} ") and "Traceback" not in line
