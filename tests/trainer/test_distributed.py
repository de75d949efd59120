"""torchrun with 2 CPU processes (gloo): DDP and FSDP2 updates end to end (ranks with unequal micro-batch counts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

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
