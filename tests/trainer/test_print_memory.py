"""``abc train --print-memory``: the memory model's table for a resolved preset, without loading anything."""

from __future__ import annotations

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.errors import ConfigError
from agentbench_crbc.trainer.config import groups_per_rank, load_config


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
    assert "8 rank(s)" in out and "vllm engine while awake (gpu_memory_utilization)" in out and "-> fits" in out
    assert "hf engine KV cache" not in out


def test_print_memory_of_a_model_without_an_architecture_says_which_exist(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"model_type": "no-such-architecture"}')  # a model folder transformers
    assert main(["train", "--print-memory", "--model", str(tmp_path)]) != 0  # cannot read
    err = capsys.readouterr().err
    assert "--print-memory: no architecture for model" in err and "Qwen/Qwen2.5-1.5B-Instruct" in err


def _no_network(monkeypatch) -> None:
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("--print-memory reached for the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    transformers = pytest.importorskip("transformers")
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", refuse)


def test_print_memory_of_the_default_tiny_model_never_calls_the_hub(monkeypatch, capsys):
    _no_network(monkeypatch)
    assert main(["train", "--print-memory"]) == 0
    out = capsys.readouterr().out
    assert "memory per rank: tiny (1.03M parameters), 1 rank(s), 80 GiB GPU" in out and "-> fits" in out
    assert main(["train", "--print-memory", "--set", "model.tiny_hidden=64", "--set", "model.tiny_layers=2"]) == 0
    assert "tiny (0.24M parameters)" in capsys.readouterr().out
    assert main(["train", "--print-memory", "--model", "smollm2"]) == 0  # the offline wheel's model: typed in
    assert "smollm2 (134.54M parameters)" in capsys.readouterr().out


@pytest.mark.parametrize(("hidden", "layers"), [(128, 4), (64, 2)])
def test_the_tiny_architecture_counts_the_parameters_of_the_model_the_trainer_builds(hidden, layers):
    pytest.importorskip("torch")
    from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.memory import builtin_architecture

    cfg = load_config(overrides=[f"model.tiny_hidden={hidden}", f"model.tiny_layers={layers}"])
    model = tiny_qwen2(tiny_tokenizer(), hidden_size=hidden, num_layers=layers)
    assert builtin_architecture(cfg.model).params == sum(p.numel() for p in model.parameters())


def test_print_memory_refuses_ranks_and_gpu_sizes_that_mean_nothing(capsys):
    # #31 item 7: --world-size 0 or -4 silently meant 1 rank; --gpu-gib inf "fitted"; nan and negatives passed
    for flag, value in (("--world-size", "0"), ("--world-size", "-4"), ("--gpu-gib", "inf"), ("--gpu-gib", "nan"),
                        ("--gpu-gib", "-80"), ("--gpu-gib", "0")):
        assert main(["train", "--preset", "alfworld-qwen2.5-7b", "--print-memory", flag, value]) == 2, (flag, value)
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"abc train: error: {flag} ") and "Traceback" not in line


def test_print_memory_of_tiny_vl_never_calls_the_hub_and_counts_the_model_the_trainer_builds(monkeypatch, capsys):
    # issue 39: --model tiny-vl went to AutoConfig.from_pretrained('tiny-vl'), i.e. the hub
    _no_network(monkeypatch)
    assert main(["train", "--print-memory", "--model", "tiny-vl"]) == 0
    out = capsys.readouterr().out
    assert "memory per rank: tiny-vl (" in out and "-> fits" in out
    pytest.importorskip("torch")
    from agentbench_crbc.rollout.engines.models import tiny_qwen2_5_vl, tiny_tokenizer
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.memory import builtin_architecture

    model, _ = tiny_qwen2_5_vl(tiny_tokenizer())
    arch = builtin_architecture(load_config(overrides=["model.name=tiny-vl"]).model)
    assert arch is not None and arch.params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("world", "per_rank"), [(1, 16), (2, 8), (8, 2), (16, 1)])
def test_a_preset_means_the_papers_total_groups_on_any_number_of_gpus(capsys, world, per_rank):
    """rollout.groups is the total per update over all ranks (the paper's 16), each rank rolling out its share."""
    cfg = load_config(preset="alfworld-qwen2.5-1.5b")
    assert cfg.rollout.groups == 16 and groups_per_rank(cfg, world) == per_rank
    assert main(["train", "--preset", "alfworld-qwen2.5-1.5b", "--print-memory", "--world-size", str(world)]) == 0
    out = capsys.readouterr().out
    split = f" over {world} ranks = {per_rank} groups ({8 * per_rank} episodes) per rank" if world > 1 else " = 128"
    assert f"rollout: 16 groups x G=8 per update{split}" in out
    assert f"hf engine KV cache ({8 * per_rank} sequences" in out


@pytest.mark.parametrize("world", [3, 32])
def test_a_total_the_ranks_cannot_split_is_refused_in_one_line(capsys, world):
    with pytest.raises(ConfigError, match=rf"16 groups per update do not split over {world} ranks") as exc:
        groups_per_rank(load_config(preset="alfworld-qwen2.5-1.5b"), world)
    assert "\n" not in str(exc.value) and "set rollout.groups to a multiple of" in str(exc.value)
    assert main(["train", "--preset", "alfworld-qwen2.5-1.5b", "--print-memory", "--world-size", str(world)]) == 2
    assert "do not split over" in capsys.readouterr().err
