"""kill -9 mid-run then --resume finishes the run; Ctrl-C leaves a checkpoint that resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ._util import run_abc, set_args

pytestmark = pytest.mark.slow


def _start(tmp_path, extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "agentbench_crbc", "train", "--credit", "crbc",
                             *set_args([f"out_dir={tmp_path}", *extra])], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_checkpoint(tmp_path, name, proc, timeout=240):
    t0 = time.time()
    while time.time() - t0 < timeout:
        for latest in tmp_path.glob("*/checkpoints/latest"):
            if latest.read_text().strip() >= name and "ckpt-0000" in latest.read_text():
                return latest.parents[1]
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    raise AssertionError(f"no {name} after {timeout} s")


def _rl_steps(run):
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [x["step"] for x in rows if x["stage"] == "rl"]


def test_kill_9_then_resume(tmp_path):
    proc = _start(tmp_path, ["updates=6"])
    run = _wait_for_checkpoint(tmp_path, "ckpt-000002", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    done_before = max(_rl_steps(run))
    assert done_before < 6
    r = run_abc(["train", "--resume", str(run)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stdout
    steps = _rl_steps(run)
    assert max(steps) == 6 and set(range(1, 7)) <= set(steps)
    assert json.loads((run / "results.json").read_text())["updates"] == 6


def test_ctrl_c_leaves_a_usable_checkpoint(tmp_path):
    proc = _start(tmp_path, ["updates=50", "checkpoint_every=100"])
    run = _wait_for_checkpoint(tmp_path, "ckpt-000000", proc)  # warm start done, RL running
    deadline = time.monotonic() + 300
    while not _rl_steps(run):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "no RL step within 300 s"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:]
    assert "checkpoint saved" in out
    latest = (run / "checkpoints" / "latest").read_text().strip()
    state = json.loads((run / "checkpoints" / latest / "state.json").read_text())
    assert state["stage"] == "rl" and state["update"] >= 1
    r = run_abc(["train", "--resume", str(run), "--set", "updates=1"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]  # resumes (the run's own config: updates stays 50, so cap it)


def test_ctrl_c_during_the_warm_start_keeps_its_optimizer(tmp_path):
    proc = _start(tmp_path, ["sft.steps=100000", "sft.max_minutes=0", "updates=1"])
    deadline = time.monotonic() + 300
    run = None
    while run is None or not [x for x in (run / "metrics.jsonl").read_text().splitlines() if '"sft"' in x]:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "no SFT step within 300 s"
        time.sleep(0.2)
        run = next((p for p in tmp_path.iterdir() if (p / "metrics.jsonl").exists()), None)
    proc.send_signal(signal.SIGINT)  # long before the first periodic warm-start checkpoint (step 12500)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:]
    ckpt = run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()
    state = json.loads((ckpt / "state.json").read_text())
    assert state["stage"] == "sft" and state["sft_step"] >= 10
    assert state["sft_optimizer"] and (ckpt / "optimizer.pt").exists()  # so --resume reloads the Adam moments
