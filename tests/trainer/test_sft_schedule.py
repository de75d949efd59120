"""The warm start's learning-rate schedule and the expert's own level options (sft.schedule, sft.env_kwargs)."""

from __future__ import annotations

import itertools
import math

import pytest

pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.schema import SFTConfig
from agentbench_crbc.trainer.sft import sft_lr


def test_constant_schedule_is_the_old_warmup_then_flat() -> None:
    cfg = SFTConfig(steps=100, lr=1e-3, warmup=10)
    assert [sft_lr(cfg, s) for s in (0, 4, 9)] == pytest.approx([1e-4, 5e-4, 1e-3])
    assert {sft_lr(cfg, s) for s in range(10, 100)} == {1e-3}


def test_cosine_schedule_falls_from_lr_to_a_tenth_at_the_last_step() -> None:
    cfg = SFTConfig(steps=102, lr=1e-3, warmup=1, schedule="cosine")  # cosine over steps 1..101
    lrs = [sft_lr(cfg, s) for s in range(102)]
    assert lrs[1] == pytest.approx(1e-3) and lrs[-1] == pytest.approx(1e-4)
    assert lrs[51] == pytest.approx(1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # half way: 0.55 lr
    assert all(a >= b for a, b in itertools.pairwise(lrs[1:]))  # never rises after the warm-up


def test_schedule_and_expert_levels_parse_from_the_command_line() -> None:
    cfg = load_config(overrides=["sft.schedule=cosine", "sft.env_kwargs.max_moves=4"])
    assert cfg.sft.schedule == "cosine" and cfg.sft.env_kwargs == {"max_moves": 4}
    with pytest.raises(ConfigError, match=r"sft\.schedule"):
        load_config(overrides=["sft.schedule=linear"])
