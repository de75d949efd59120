"""The multi-GPU defects, checked on CPU: FSDP2 (gloo, 2 processes) weights gathered one parameter at a time for a
vLLM push (LoRA merged) and for the KL reference (no deepcopy of a sharded module), a per-rank vLLM, the process
group's timeout."""

from __future__ import annotations

import copy
import warnings
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError  # noqa: E402
from agentbench_crbc.rollout.engines import models  # noqa: E402
from agentbench_crbc.trainer import distributed  # noqa: E402
from agentbench_crbc.trainer.distributed import Dist  # noqa: E402

from .._fake_vllm import fake_vllm  # noqa: E402

torch.set_num_threads(1)


def _tiny(lora: bool):
    tok = models.tiny_tokenizer()
    m = models.tiny_qwen2(tok, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                          seed=0).float()
    if lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(0)  # lora_A is drawn from the global generator: equal on every rank
        with warnings.catch_warnings():  # peft 0.x calls a transformers 5 deprecated alias
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            m = get_peft_model(m, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                              task_type="CAUSAL_LM"))
        with torch.no_grad():  # adapters that change the weights (lora_B starts at zero)
            g = torch.Generator().manual_seed(1)
            for n, p in m.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return m


def _worker(rank: int, world: int, store_path: str, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    from agentbench_crbc.rollout.engines.vllm import export_state
    from agentbench_crbc.trainer.policy import copy_weights_into, full_state

    torch.set_num_threads(1)
    store = torch.distributed.FileStore(store_path, world)
    torch.distributed.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        results = {}
        # defect 4: FSDP + LoRA + vLLM: the push merges the adapters, gathered per parameter
        m = _tiny(lora=True)
        want = export_state(copy.deepcopy(m))  # the single-process push: peft merge
        for layer in m.base_model.model.model.layers:
            fully_shard(layer)
        fully_shard(m)
        assert any(hasattr(p, "full_tensor") for p in m.parameters())
        got = export_state(full_state(m))  # export_state raised on lora_A / lora_B before
        results["push_keys"] = sorted(got) == sorted(want)
        results["push_equal"] = all(torch.allclose(got[k], want[k], atol=1e-6) for k in want)
        got_bf16 = full_state(m, dtype=torch.bfloat16)
        results["push_bf16"] = all(v.dtype == torch.bfloat16 for v in got_bf16.values() if v.is_floating_point())
        # defect 2: a frozen unsharded copy of a sharded policy (deepcopy refuses it)
        p = _tiny(lora=False)
        plain = copy.deepcopy(p)
        for layer in p.model.layers:
            fully_shard(layer)
        fully_shard(p)
        ref = _tiny(lora=False)
        with torch.no_grad():
            for q in ref.parameters():
                q.zero_()
        copy_weights_into(ref, p)
        results["ref_equal"] = all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(),
                                                                       plain.state_dict().values(), strict=True))
        if rank == 0:
            torch.save(results, out)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_fsdp_push_merges_lora_and_the_reference_copies_a_sharded_policy(tmp_path):
    import torch.multiprocessing as mp

    out = str(tmp_path / "results.pt")
    mp.spawn(_worker, args=(2, str(tmp_path / "store"), out), nprocs=2, join=True)
    results = torch.load(out, weights_only=True)
    assert results == {"push_keys": True, "push_equal": True, "push_bf16": True, "ref_equal": True}


def test_merge_lora_matches_peft_merge_and_drops_adapter_names():
    from agentbench_crbc.rollout.engines.vllm import export_state
    from agentbench_crbc.trainer.policy import full_state

    m = _tiny(lora=True)
    got = export_state(full_state(m))
    merged = copy.deepcopy(m).merge_and_unload()
    want = merged.state_dict()
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        torch.testing.assert_close(got[k], v, atol=1e-6, rtol=1e-5)


def test_process_group_timeout_is_long_and_configurable(monkeypatch):
    seen = {}
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda **kw: seen.update(kw))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("ABC_DIST_TIMEOUT_MINUTES", raising=False)
    d = distributed.init_distributed("cpu")
    assert d.world == 2 and seen["backend"] == "gloo"
    assert seen["timeout"] == timedelta(minutes=distributed.DEFAULT_TIMEOUT_MINUTES) > timedelta(minutes=60)
    monkeypatch.setenv("ABC_DIST_TIMEOUT_MINUTES", "300")
    distributed.init_distributed("cpu")
    assert seen["timeout"] == timedelta(minutes=300)
    monkeypatch.setenv("ABC_DIST_TIMEOUT_MINUTES", "soon")
    with pytest.raises(ConfigError, match="ABC_DIST_TIMEOUT_MINUTES"):
        distributed.init_distributed("cpu")


def test_each_rank_builds_its_vllm_on_its_own_gpu(monkeypatch):
    """Under torchrun the trainer's vLLM engine runs in the rank's process on the rank's device (external
    launcher), not every rank's on GPU 0; alone it is a plain engine."""

    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.policy import build_rollout_engine

    made = fake_vllm(monkeypatch)
    cfg = load_config(overrides=("rollout.engine=vllm", "model.name=Qwen/Qwen2.5-1.5B-Instruct"))
    build_rollout_engine(cfg, None, None, dist=Dist(rank=1, world=2, local_rank=1))
    build_rollout_engine(cfg, None, None, dist=Dist())
    assert made[0]["distributed_executor_backend"] == "external_launcher" and made[0]["seed"] == cfg.seed + 1
    assert "distributed_executor_backend" not in made[1]


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e13", "1e-9", "0", "-5"])
def test_process_group_timeouts_that_cannot_work_are_refused(monkeypatch, raw):
    # #31 item 13: nan, inf and 1e13 overflowed timedelta (a traceback), 1e-9 minutes aborted every collective
    monkeypatch.setenv("ABC_DIST_TIMEOUT_MINUTES", raw)
    with pytest.raises(ConfigError, match=r"ABC_DIST_TIMEOUT_MINUTES=.*give a number of minutes in"):
        distributed.dist_timeout_minutes()
