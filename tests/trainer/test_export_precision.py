"""The exported ``RUN/model`` holds the fp32 master weights, never the bf16 rollout copy FSDP2 + hf generates with on
a GPU (the CUDA cast is forced here on a CPU)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer import distributed  # noqa: E402
from agentbench_crbc.trainer.config import load_config  # noqa: E402
from agentbench_crbc.trainer.distributed import Dist  # noqa: E402
from agentbench_crbc.trainer.loop import Trainer  # noqa: E402
from agentbench_crbc.trainer.policy import build_policy, export_policy  # noqa: E402

torch.set_num_threads(1)


def _trainer(dist: Dist) -> tuple[Trainer, torch.nn.Module]:
    """A trainer as ``_wrap`` leaves it under FSDP2 + hf on a GPU: fp32 policy, rollout copy cast to bf16."""
    cfg = load_config(overrides=("model.tiny_hidden=32", "model.tiny_layers=1"))
    model, tok, _ = build_policy(cfg, torch.device("cpu"))
    with torch.no_grad():  # weights whose low bits a bf16 cast loses
        for p in model.parameters():
            p.add_(torch.full_like(p, 1e-3 / 3))
    t = Trainer.__new__(Trainer)
    t.cfg, t.dist, t.model, t.tok = cfg, dist, model, tok
    t.rollout_model = copy.deepcopy(model).to(torch.bfloat16)  # what _frozen_dtype gives on CUDA
    return t, model


def _check_export(final, tok, model, tmp_path) -> None:
    from safetensors.torch import load_file

    export_policy(final, tok, tmp_path / "model")
    saved = load_file(str(tmp_path / "model" / "model.safetensors"))
    want = model.state_dict()
    for name, t in saved.items():
        assert t.dtype == torch.float32, name
        assert torch.equal(t, want[name]), name


def test_the_export_is_the_fp32_policy_when_the_rollout_copy_is_bf16(tmp_path):
    t, model = _trainer(Dist())
    final = t._final_policy()
    assert all(p.dtype == torch.float32 for p in final.parameters())
    _check_export(final, t.tok, model, tmp_path)


def test_an_fsdp2_export_gathers_the_fp32_shards_not_the_bf16_rollout_copy(tmp_path, monkeypatch):
    # FSDP2 (world 2, rank 0): the shards are gathered into a fresh fp32 CPU copy; plain tensors stand in for them
    monkeypatch.setattr(distributed, "is_sharded", lambda model, dist: True)
    t, model = _trainer(Dist(rank=0, world=2))
    final = t._final_policy()
    assert final is not t.rollout_model and final is not model
    _check_export(final, t.tok, model, tmp_path)


def test_an_fp32_rollout_copy_is_exported_as_it_is(tmp_path):
    t, model = _trainer(Dist(rank=0, world=2))
    t.rollout_model = copy.deepcopy(model)  # CPU runs keep the rollout copy in fp32: no gather needed
    assert t._final_policy() is t.rollout_model
