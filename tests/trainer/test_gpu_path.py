"""The GPU path's second pass, checked on CPU: pushes to vLLM carry the model's own names (DDP unwrapped), go in the
serving dtype and once at the start, say clearly when ``/dev/shm`` is too small; a VL rank without steps still runs
its vision tower. (``test_torchrun_matrix.py`` runs every combination end to end under torchrun.)"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError  # noqa: E402
from agentbench_crbc.rollout.engines import models  # noqa: E402

from ._util import run_abc, set_args  # noqa: E402

STANDINS = Path(__file__).resolve().parents[1] / "standins"
torch.set_num_threads(1)


@pytest.fixture
def standin_vllm(monkeypatch, tmp_path):
    """The vLLM stand-in imported as ``vllm`` for this test only; its event log under ``tmp_path/log``."""
    for name in ("vllm", "vllm.inputs"):
        path = STANDINS / "vllm" / ("__init__.py" if name == "vllm" else "inputs.py")
        spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[str(path.parent)]
                                                      if name == "vllm" else None)
        mod = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, mod)
        spec.loader.exec_module(mod)
    monkeypatch.setenv("ABC_VLLM_STANDIN_LOG", str(tmp_path / "log"))
    monkeypatch.delenv("ABC_VLLM_PUSH_DIR", raising=False)
    return sys.modules["vllm"]


def _reloads(tmp_path) -> list[dict]:
    path = tmp_path / "log" / "rank0.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "reload"]


def _ddp_names(rank: int, store: str, out: str) -> None:
    from torch.nn.parallel import DistributedDataParallel

    from agentbench_crbc.trainer.policy import full_state

    torch.set_num_threads(1)
    model = models.tiny_qwen2(models.tiny_tokenizer(), hidden_size=32, num_layers=1)
    torch.distributed.init_process_group("gloo", store=torch.distributed.FileStore(store, 1), rank=0, world_size=1)
    got = full_state(DistributedDataParallel(model), dtype=torch.bfloat16)
    torch.save({"names": sorted(got), "want": sorted(model.state_dict()),
                "dtypes": sorted({str(v.dtype) for v in got.values()})}, out)
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # gloo can abort at interpreter exit after destroy_process_group


def test_full_state_of_a_ddp_model_carries_the_models_own_names(tmp_path):
    """DDP + vLLM crashed at the first push: the names kept the wrapper's ``module.`` (vLLM: "There is no module
    or parameter named 'module'")."""
    import torch.multiprocessing as mp

    out = str(tmp_path / "names.pt")
    mp.spawn(_ddp_names, args=(str(tmp_path / "store"), out), nprocs=1, join=True)
    got = torch.load(out, weights_only=True)
    assert got["names"] == got["want"] and got["dtypes"] == ["torch.bfloat16"]


def test_the_standin_refuses_names_as_vllm_does(standin_vllm):
    model = models.tiny_qwen2(models.tiny_tokenizer())
    state = dict(model.state_dict())
    standin_vllm.load_weights(model, state)  # the checkpoint's names: accepted (tied head skipped)
    with pytest.raises(ValueError, match="no module or parameter named 'module' in Qwen2ForCausalLM"):
        standin_vllm.load_weights(model, {f"module.{k}": v for k, v in state.items()})
    with pytest.raises(ValueError, match="not initialized from checkpoint"):
        standin_vllm.load_weights(model, {k: v for k, v in state.items() if "layers.0.mlp" not in k})


def test_a_push_is_written_in_the_serving_dtype_and_loads(standin_vllm, tmp_path):
    """fp32 master weights reach vLLM in the dtype it serves (bf16): half the bytes in /dev/shm."""
    from agentbench_crbc.rollout.engines.vllm import VLLMEngine

    engine = VLLMEngine("tiny")
    assert engine.serving_dtype == torch.bfloat16
    model = models.tiny_qwen2(models.tiny_tokenizer(), seed=3).float()
    engine.update_weights(model.state_dict())  # fp32: cast to the serving dtype on the way
    (push,) = _reloads(tmp_path)
    assert push["dtypes"] == ["torch.bfloat16"]
    assert push["bytes"] < 0.6 * sum(p.numel() * 4 for p in model.parameters())
    served = engine.llm.model.state_dict()
    assert all(torch.equal(served[k], v.to(torch.bfloat16)) for k, v in model.state_dict().items())


def test_a_push_too_big_for_dev_shm_goes_to_disk_or_says_what_to_do(standin_vllm, tmp_path, monkeypatch, capsys):
    from agentbench_crbc.rollout.engines import vllm as engine_mod

    real = engine_mod._free
    monkeypatch.setattr(engine_mod, "_free", lambda d: 1024 if str(d).startswith("/dev/shm") else real(d))
    engine = engine_mod.VLLMEngine("tiny")
    engine.update_weights(models.tiny_qwen2(models.tiny_tokenizer()).state_dict())
    (push,) = _reloads(tmp_path)
    assert not push["folder"].startswith("/dev/shm")
    assert "/dev/shm has 0.00 GiB free, the weights take" in capsys.readouterr().err
    small = tmp_path / "small"
    small.mkdir()
    monkeypatch.setenv("ABC_VLLM_PUSH_DIR", str(small))
    monkeypatch.setattr(engine_mod, "_free", lambda d: 4096)
    with pytest.raises(ConfigError, match=r"the weights take 0\.00 GiB and .*small has 0\.00 GiB free; .*"
                                          r"--shm-size=.*ABC_VLLM_PUSH_DIR"):
        engine_mod.VLLMEngine("tiny").update_weights(models.tiny_qwen2(models.tiny_tokenizer()).state_dict())


def test_the_trainer_pushes_once_at_the_start_then_once_per_update(tmp_path):
    """Single process with the vllm engine (the stand-in): the start pushed twice, in fp32."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDINS), os.environ.get("PYTHONPATH", "")]),
           "ABC_VLLM_STANDIN_LOG": str(tmp_path / "log")}
    r = run_abc(["train", "--credit", "grpo", *set_args(["updates=1", "sft.steps=0", "rollout.engine=vllm",
                                                         "device=cpu", "model.dtype=fp32", "eval.episodes=2",
                                                         "rollout.constrain=false",  # vLLM cannot constrain
                                                         f"out_dir={tmp_path / 'runs'}"])], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    pushes = _reloads(tmp_path)
    assert len(pushes) == 2 and all(p["dtypes"] == ["torch.bfloat16"] for p in pushes)


def test_a_vl_rank_without_steps_still_runs_its_vision_tower():
    """Under torchrun a rank with no steps runs the busiest rank's number of zero-gradient passes; a text-only
    dummy left the vision tower out of its backward (DDP then errs, FSDP2's reduce-scatters mismatch)."""
    from agentbench_crbc.trainer.config import OptimConfig
    from agentbench_crbc.trainer.update import UpdateContext, ppo_update

    tok = models.tiny_tokenizer()
    model, proc = models.tiny_qwen2_5_vl(tok)
    reached: set[str] = set()
    for name, p in model.named_parameters():
        p.register_hook(lambda g, name=name: reached.add(name))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    logs = ppo_update(model, opt, [], OptimConfig(kl_coef=0.0, micro_batch=2), UpdateContext(pad_id=tok.pad_token_id,
                      device="cpu", sync_max=lambda n: max(n, 1), image_processor=proc,  # a busier rank
                      image_pad_id=tok.convert_tokens_to_ids("<|image_pad|>")), rng=np.random.default_rng(0))
    assert logs["n_steps"] == 0
    missing = sorted({n for n, _ in model.named_parameters()} - reached)
    assert not missing, missing[:4]
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())  # zero gradients: nothing moved


def test_the_push_folder_has_room_for_every_rank_of_the_node(monkeypatch, capsys):
    """Each rank keeps its own push file: /dev/shm is chosen only when all of the node's ranks' files fit."""
    from agentbench_crbc.rollout.engines import vllm as engine_mod

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    monkeypatch.delenv("ABC_VLLM_PUSH_DIR", raising=False)
    monkeypatch.setattr(engine_mod, "_free", lambda d: 3 * 2**30 if str(d) == "/dev/shm" else 2**40)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert engine_mod.push_root(2**30) == "/dev/shm"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert engine_mod.push_root(2**30) != "/dev/shm"
    assert "the weights take 8.00 GiB" in capsys.readouterr().err


def test_the_standin_has_vllm_0_32_to_0_33s_surface(standin_vllm, tmp_path):
    """Issue 39: the stand-in's signatures are vLLM 0.32-0.33's (``LLM.sleep(level)``, ``wake_up(tags)``,
    ``collective_rpc(method, timeout, args, kwargs)`` calling ``reload_weights(weights_path=...)``)."""
    import inspect

    from agentbench_crbc.rollout.engines.vllm import VLLM_FLOOR, VLLMEngine, _version_tuple

    LLM = standin_vllm.LLM
    assert _version_tuple(standin_vllm.__version__) >= VLLM_FLOOR
    assert list(inspect.signature(LLM.sleep).parameters) == ["self", "level"]
    assert inspect.signature(LLM.sleep).parameters["level"].default == 1
    assert list(inspect.signature(LLM.wake_up).parameters) == ["self", "tags"]
    assert inspect.signature(LLM.wake_up).parameters["tags"].default is None
    assert list(inspect.signature(LLM.collective_rpc).parameters) == ["self", "method", "timeout", "args", "kwargs"]
    engine = VLLMEngine("tiny", enable_sleep_mode=True)
    llm = engine.llm
    llm.sleep(level=1)
    llm.wake_up(tags=["weights"])  # vLLM's RLHF order: weights first, push, then the KV cache
    with pytest.raises(RuntimeError, match="sleeps"):
        engine.update_weights(models.tiny_qwen2(models.tiny_tokenizer()).state_dict())
    llm.wake_up(tags=["kv_cache"])
    engine.update_weights(models.tiny_qwen2(models.tiny_tokenizer()).state_dict())  # reload_weights(weights_path=...)
    with pytest.raises(ValueError, match="tags"):
        llm.wake_up(tags=["everything"])
    with pytest.raises(TypeError):  # a keyword vLLM's reload_weights has not
        llm.collective_rpc("reload_weights", kwargs={"path": str(tmp_path)})


def test_a_vllm_older_than_the_floor_is_one_line(standin_vllm, monkeypatch):
    from agentbench_crbc.rollout.engines.vllm import VLLMEngine

    monkeypatch.setattr(standin_vllm, "__version__", "0.31.2")
    with pytest.raises(ConfigError, match=r"vLLM 0.31.2 is older than 0.32.*pip install 'vllm>=0.32'"):
        VLLMEngine("tiny")
