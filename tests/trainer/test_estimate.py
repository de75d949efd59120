"""The CPU warning: a worked FLOP count, and who gets warned (GPU-sized presets on a CPU, not the CPU demo)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer.config import load_config  # noqa: E402
from agentbench_crbc.trainer.estimate import cpu_warning, run_flops  # noqa: E402

SMALL = ["updates=2", "rollout.groups=1", "rollout.group_size=2", "env.max_steps=3", "rollout.max_prompt_tokens=10",
         "rollout.max_response_tokens=2", "optim.ppo_epochs=1", "sft.steps=5", "sft.batch_size=4", "eval.episodes=2",
         "eval.greedy=false", "eval.every=0", "eval.samples=1", "eval.train_temperature=false"]


def test_run_flops_worked_example() -> None:
    cfg = load_config(overrides=SMALL)
    # RL: 2 updates x 1 group x G=2 x 3 steps = 12 samples of 12 tokens, 2 + 4 + 6 = 12 FLOPs per param-token
    # SFT: 5 x 4 x 12 tokens x 6; validation: 3 evals x 1 pass x 2 episodes x 3 steps x 12 tokens x 2
    per_param = 12 * 12 * 12 + 5 * 4 * 12 * 6 + 3 * 2 * 3 * 12 * 2
    assert run_flops(cfg, 1000) == pytest.approx(per_param * 1000)


def test_gpu_preset_on_cpu_warns_with_an_estimate() -> None:
    model = torch.nn.Linear(1000, 1000)  # 1M parameters
    said: list[str] = []
    cfg = load_config(preset="alfworld-qwen2.5-1.5b", model="tiny")
    seconds = cpu_warning(cfg, model, torch.device("cpu"), say=said.append)
    assert seconds is not None and seconds > 0 and len(said) == 1
    assert said[0].startswith("warning: preset 'alfworld-qwen2.5-1.5b' is sized for a GPU and runs on the CPU here: "
                              "up to roughly ")
    assert "Ctrl-C saves a checkpoint" in said[0]


def test_each_sampling_mode_counts_in_the_validation_flops() -> None:
    """The training temperature is a second sampling mode: its episodes add to the validation's work."""
    one = run_flops(load_config(overrides=SMALL), 1000)
    two = run_flops(load_config(overrides=[*SMALL, "eval.train_temperature=true"]), 1000)
    assert two - one == pytest.approx(3 * 2 * 3 * 12 * 2 * 1000)


def test_cpu_demo_is_quiet_and_gpus_are_not_estimated() -> None:
    model = torch.nn.Linear(100, 100)
    said: list[str] = []
    assert cpu_warning(load_config(), model, torch.device("cpu"), say=said.append) is not None and said == []
    assert cpu_warning(load_config(preset="alfworld-qwen2.5-1.5b"), model, torch.device("cuda"),
                       say=said.append) is None and said == []
