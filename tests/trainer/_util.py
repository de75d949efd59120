"""Helpers of the trainer tests: a tiny, fast configuration and a subprocess runner for ``abc``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: 1-3 updates of a 1M-param model on tiny budgets: seconds, not minutes.
TINY = ["sft.steps=4", "sft.batch_size=8", "sft.pool=64", "sft.warmup=1", "updates=3", "rollout.groups=2",
        "rollout.group_size=4", "rollout.max_response_tokens=5", "eval.episodes=4", "eval.samples=1",
        "eval.greedy=false", "env.max_steps=4", "max_minutes=0", "sft.max_minutes=0", "checkpoint_every=1",
        "progress=false", "tensorboard=false", "optim.micro_batch=64",
        # one optimizer step an update (the CPU demo takes 4 epochs of 64-step mini-batches): pipelines, not learning
        "optim.ppo_epochs=1", "optim.mini_batch_size=256"]


def set_args(extra: list[str] = ()) -> list[str]:
    out = []
    for kv in [*TINY, *extra]:
        out += ["--set", kv]
    return out


def run_abc(args: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None,
            **kw) -> subprocess.CompletedProcess:
    env = {**(os.environ if env is None else env), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "agentbench_crbc", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)
