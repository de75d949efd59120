"""The built-in tiny model's board label says its size: a wider or deeper tiny model is another scale."""

from __future__ import annotations

import pytest

from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.eval import builtin_params, model_scale


@pytest.mark.parametrize(("hidden", "layers", "scale"), [(128, 4, "tiny-1M"), (192, 6, "tiny-3M"),
                                                         (256, 6, "tiny-4M"), (256, 8, "tiny-5M")])
def test_the_tiny_models_scale_comes_from_its_width_and_depth(hidden, layers, scale):
    cfg = load_config(overrides=(f"model.tiny_hidden={hidden}", f"model.tiny_layers={layers}"))
    assert model_scale("tiny-qwen2", builtin_params(cfg)) == scale


def test_the_count_is_the_built_models():
    pytest.importorskip("torch")
    from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer

    cfg = load_config(overrides=("model.tiny_hidden=256", "model.tiny_layers=6"))
    model = tiny_qwen2(tiny_tokenizer(), hidden_size=256, num_layers=6)
    assert builtin_params(cfg) == sum(p.numel() for p in model.parameters()) == 3_632_384


def test_other_models_are_not_counted_here():
    assert builtin_params(load_config(overrides=("model.name=tiny-vl",))) is None
