"""kill -9 mid-run then --resume finishes the run; Ctrl-C leaves a checkpoint that resumes; a damaged newest
checkpoint falls back to the previous one; a lost KL reference is rebuilt or stops the run; metrics stay single."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError  # noqa: E402
from agentbench_crbc.trainer.checkpoint import (  # noqa: E402
    find_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    verify_folder,
)
from agentbench_crbc.trainer.metrics import MetricsLogger, read_metrics  # noqa: E402

from ._util import run_abc, set_args  # noqa: E402


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- damaged checkpoints, the KL reference, metrics (issue 17) -------------------------------------------------------
def _tiny_model():
    from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer

    return tiny_qwen2(tiny_tokenizer(), hidden_size=32, num_layers=1, seed=0)


def _two_checkpoints(tmp_path):
    """ckpt-000001 and ckpt-000002 of a tiny model (safetensors), one AdamW step apart; the weights of the first."""
    model = _tiny_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.tensor([[1, 2, 3, 4]])

    def step():
        opt.zero_grad()
        model(input_ids=x).logits.sum().backward()
        opt.step()

    step()
    save_checkpoint(tmp_path, 1, model=model, optimizer=opt, state={"update": 1})
    first = {k: v.clone() for k, v in model.state_dict().items()}
    time.sleep(0.02)  # distinct folder mtimes
    step()
    save_checkpoint(tmp_path, 2, model=model, optimizer=opt, state={"update": 2})
    return first


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _flip])
@pytest.mark.parametrize("name", ["model/model.safetensors", "optimizer.pt", "rng.pt", "state.json"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, name, damage):
    first = _two_checkpoints(tmp_path)
    root = tmp_path / "checkpoints"
    assert latest_checkpoint(tmp_path) == root / "ckpt-000002"
    damage(root / "ckpt-000002" / name)
    ckpt, damaged = find_checkpoint(tmp_path)
    assert ckpt == root / "ckpt-000001" and latest_checkpoint(tmp_path) == ckpt
    assert [(p.name, name in why) for p, why in damaged] == [("ckpt-000002", True)]
    fresh = _tiny_model()
    opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    assert load_checkpoint(ckpt, model=fresh, optimizer=opt)["update"] == 1
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, first[k]), k
    assert opt.state_dict()["state"][0]["step"].item() == 1


def test_no_intact_checkpoint_left_is_reported_per_checkpoint(tmp_path):
    _two_checkpoints(tmp_path)
    for n in (1, 2):
        (tmp_path / "checkpoints" / f"ckpt-00000{n}" / "rng.pt").unlink()
    ckpt, damaged = find_checkpoint(tmp_path)
    assert ckpt is None and [p.name for p, _ in damaged] == ["ckpt-000002", "ckpt-000001"]
    with pytest.raises(ConfigError, match=r"rng\.pt is missing"):
        verify_folder(tmp_path / "checkpoints" / "ckpt-000001")


def _log_rows(log, stage, steps):
    for s in steps:
        log.log(s, {"x": float(s)}, stage=stage)


def test_metrics_are_cut_back_to_the_checkpoint_that_is_resumed(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=False)
    _log_rows(log, "sft", [10, 20])
    _log_rows(log, "rl", [1, 2])
    save_checkpoint(tmp_path, 2, model=torch.nn.Linear(2, 2), optimizer=None, state={"update": 2})
    _log_rows(log, "rl", [3])
    _log_rows(log, "eval", [3])
    log._fh.write('{"stage": "rl", "st')  # torn by a kill mid-write
    log.close()
    manifest = json.loads((tmp_path / "checkpoints" / "ckpt-000002" / "manifest.json").read_text())
    resumed = MetricsLogger(tmp_path, tensorboard=False)
    assert resumed.rewind(manifest["metrics_bytes"], sft_step=20, update=2) == 3
    _log_rows(resumed, "rl", [3])
    resumed.close()
    assert [(r["stage"], r["step"]) for r in read_metrics(tmp_path)] == [("sft", 10), ("sft", 20), ("rl", 1),
                                                                         ("rl", 2), ("rl", 3)]


def test_metrics_of_an_older_checkpoint_without_a_manifest_are_cut_by_step(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=False)
    _log_rows(log, "sft", [10, 20, 30])
    _log_rows(log, "eval", [0])
    _log_rows(log, "rl", [1, 2, 3])
    _log_rows(log, "eval", [3])
    assert log.rewind(None, sft_step=30, update=1) == 3
    log.close()
    assert [(r["stage"], r["step"]) for r in read_metrics(tmp_path)] == [("sft", 10), ("sft", 20), ("sft", 30),
                                                                         ("eval", 0), ("rl", 1)]


def _tiny_run(tmp_path, extra):
    r = run_abc(["train", "--credit", "grpo", *set_args([f"out_dir={tmp_path}", *extra])], cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = [p for p in tmp_path.iterdir() if (p / "config.toml").exists()]
    return run


def _reference(run):
    return torch.load(run / "reference" / "state.pt", weights_only=True)


@pytest.mark.slow
def test_resume_past_a_damaged_checkpoint_and_a_lost_reference(tmp_path):
    # no warm start: the KL reference is the base model, which the run's config rebuilds
    run = _tiny_run(tmp_path, ["sft.steps=0", "updates=3", "keep_checkpoints=2"])
    reference = _reference(run)
    _truncate(run / "checkpoints" / "ckpt-000003" / "model" / "model.safetensors")
    shutil.rmtree(run / "reference")
    r = run_abc(["train", "--resume", str(run), "--set", "updates=4"], cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert "ckpt-000003 is damaged (model/model.safetensors has" in r.stdout
    assert "resuming from ckpt-000002" in r.stdout and "resumed from" in r.stdout
    assert "the KL reference is rebuilt from the base model 'tiny'" in r.stdout
    assert (run / "checkpoints" / "damaged-ckpt-000003").is_dir()
    rebuilt = _reference(run)
    assert rebuilt.keys() == reference.keys() and all(torch.equal(rebuilt[k], reference[k]) for k in reference)
    assert _rl_steps(run) == [1, 2, 3, 4]  # update 3 was lost with its checkpoint and logged once more
    evals = [x["step"] for x in read_metrics(run) if x["stage"] == "eval"]
    assert evals == [0, 4]


@pytest.mark.slow
def test_a_lost_reference_after_a_warm_start_comes_from_checkpoint_0_or_stops(tmp_path):
    run = _tiny_run(tmp_path, ["updates=2", "keep_checkpoints=10"])
    reference = _reference(run)
    shutil.rmtree(run / "reference")
    r = run_abc(["train", "--resume", str(run), "--set", "updates=3"], cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "the KL reference is rebuilt from checkpoints/ckpt-000000" in r.stdout
    rebuilt = _reference(run)
    assert all(torch.equal(rebuilt[k], reference[k]) for k in reference)
    # once checkpoint 0 is gone too, the resume stops with one line naming the fixes, before any work
    shutil.rmtree(run / "reference")
    shutil.rmtree(run / "checkpoints" / "ckpt-000000")
    r = run_abc(["train", "--resume", str(run), "--set", "updates=4"], cwd=tmp_path, timeout=900)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "reference/ is missing" in line and "optim.kl_coef=0" in line
    assert _rl_steps(run) == [1, 2, 3]
