"""torchrun with 2 CPU processes (gloo): DDP and FSDP2 updates end to end (ranks with unequal micro-batch counts),
and their checkpoints: AdamW's moments saved (FSDP2: gathered) and restored exactly by --resume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from ._util import set_args

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_torchrun_two_process_gloo_update(strategy, tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not installed")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [torchrun, "--standalone", "--nproc_per_node", "2", "-m", "agentbench_crbc", "train", "--credit", "crbc",
           *set_args(["updates=2", "sft.steps=2", f"strategy={strategy}", f"out_dir={tmp_path}", "device=cpu",
                     "optim.micro_batch=4"])]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    (run,) = list(tmp_path.iterdir())  # rank 0 made one run folder and broadcast it
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    rl = [x for x in rows if x["stage"] == "rl"]
    assert [x["step"] for x in rl] == [1, 2] and all(x["n_steps"] > 0 for x in rl)
    assert (run / "checkpoints" / "latest").read_text().strip() == "ckpt-000002"
    assert (run / "model" / "model.safetensors").exists() and "held-out success" in r.stdout
    assert "2 groups x G=4 (1 per rank)" in r.stdout  # rollout.groups is the total over the 2 ranks


def _torchrun(args: list[str], cwd) -> subprocess.CompletedProcess:
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not installed")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "agentbench_crbc", *args], cwd=cwd,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return r


def _adam_state(ckpt) -> dict:
    """``optimizer.pt`` of a checkpoint: {param key: {"step", "exp_avg", "exp_avg_sq"}} and the param groups."""
    path = ckpt / "optimizer.pt"
    assert path.exists(), f"{ckpt.name} holds no optimizer state: {sorted(p.name for p in ckpt.iterdir())}"
    return torch.load(path, weights_only=True)


def _hyper(groups: list[dict]) -> list[dict]:
    """A param group's hyperparameters (FSDP2's broadcast turns the betas tuple into a list: same values)."""
    return [{k: tuple(v) if isinstance(v, list) else v for k, v in g.items() if k != "params"} for g in groups]


def _weights(ckpt) -> dict:
    folder = ckpt / "model"
    if (folder / "state.pt").exists():  # FSDP2: the gathered full state dict
        return torch.load(folder / "state.pt", weights_only=True)
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_torchrun_resume_restores_optimizer_state(strategy, tmp_path):
    """A checkpoint holds AdamW's moments (FSDP2: gathered from the shards); a resumed run restores exactly those
    tensors and the weights (0 further updates, re-saved: identical) and keeps stepping from them (one more update:
    step 3).

    No warm start and an entropy bonus: an untrained model fails every rollout, so the advantages are all zero and
    only the entropy term gives every parameter a gradient (non-zero moments, not just zeros that match)."""
    _torchrun(["train", "--credit", "crbc",
               *set_args(["updates=2", "sft.steps=0", "optim.entropy_coef=0.01", "optim.target_kl=0",
                          f"strategy={strategy}",
                          f"out_dir={tmp_path}", "device=cpu", "optim.micro_batch=4"])], cwd=tmp_path)
    (run,) = list(tmp_path.iterdir())
    ckpt = run / "checkpoints" / "ckpt-000002"
    saved, weights = _adam_state(ckpt), _weights(ckpt)
    state, groups = saved["state"], saved["param_groups"]
    params = [k for g in groups for k in g["params"]]
    assert len(params) > 10 and sorted(state, key=str) == sorted(params, key=str)  # every parameter has moments
    assert all(float(s["step"]) == 2 for s in state.values())
    moving = [k for k, s in state.items() if s["exp_avg"].abs().sum() > 0 and s["exp_avg_sq"].abs().sum() > 0]
    assert len(moving) >= 0.8 * len(state), f"only {len(moving)} of {len(state)} parameters have non-zero moments"

    r = _torchrun(["train", "--resume", str(run)], cwd=tmp_path)  # a finished run: nothing to do, nothing written
    assert "already finished" in r.stdout
    again = _adam_state(ckpt)
    assert sorted(again["state"], key=str) == sorted(state, key=str)
    for k, s in state.items():
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(again["state"][k][name], s[name]), (k, name)
    assert _hyper(again["param_groups"]) == _hyper(groups)
    again_w = _weights(ckpt)  # and the weights (FSDP2: loaded before sharding, each rank keeps its shard)
    assert sorted(again_w) == sorted(weights) and all(torch.equal(again_w[k], w) for k, w in weights.items())

    _torchrun(["train", "--resume", str(run), "--set", "updates=3"], cwd=tmp_path)
    after = _adam_state(run / "checkpoints" / "ckpt-000003")["state"]
    assert sorted(after, key=str) == sorted(state, key=str)
    assert all(float(s["step"]) == 3 for s in after.values())  # AdamW continued (a restart would say step 1)
