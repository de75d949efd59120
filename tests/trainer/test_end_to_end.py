"""A 3-update CPU run end to end on a tiny model for each environment; run folder contents; abc eval."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentbench_crbc.envs  # noqa: F401 - registers abc/* ids
from agentbench_crbc.family import resolve_env as resolve

from ._util import run_abc, set_args

pytestmark = pytest.mark.slow


def _env_ready(name: str) -> str | None:
    from agentbench_crbc.errors import MissingDependencyError
    from agentbench_crbc.extras import require_env

    assert resolve(name).env_id in gym.registry
    try:
        require_env(name)
    except MissingDependencyError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("env", ["sokoban", "alfworld", "webshop"])
def test_three_updates_end_to_end(env, tmp_path):
    reason = _env_ready(env)
    if reason:
        pytest.skip(reason)
    # ALFWorld/WebShop: no warm start (the expert planner is slow), 3-step episodes, short answers
    extra = ["env.max_steps=3", "rollout.max_response_tokens=4", "sft.steps=0", "rollout.groups=1",
             "rollout.group_size=3", "eval.episodes=2"] if env != "sokoban" else []
    if env == "sokoban":
        extra = ["tensorboard=true"]
    r = run_abc(["train", "--credit", "crbc", "--env", env, *set_args([*extra, f"out_dir={tmp_path}"])],
                cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[0].startswith(f"training {resolve(env).env_id} (")  # which family, and why
    (run,) = [p for p in tmp_path.iterdir() if p.name.startswith(f"{env}__crbc__tiny__0__")]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    rl = [x for x in rows if x["stage"] == "rl"]
    assert [x["step"] for x in rl] == [1, 2, 3]
    assert all(x["n_steps"] > 0 and x["kl"] >= 0 for x in rl)
    assert all(x["time_rollout"] > 0 and x["time_ppo"] > 0 and x["invalid"] >= 0 for x in rl)
    results = json.loads((run / "results.json").read_text())
    assert results["curves"] == str(run / "curves.png") and (run / "curves.png").stat().st_size > 0  # the figure
    assert results["updates"] == 3 and results["modes"]["t0.4"]["n_episodes"] == (4 if env == "sokoban" else 2)
    records = [json.loads(x) for x in (run / "eval" / "records.jsonl").read_text().splitlines()]
    alls = [x for x in records if x["subtask"] == "all"]
    assert sorted(x["update"] for x in alls) == [0, 3]
    assert all(x["env"] == env and x["method"] == "crbc" and x["model_scale"] == "tiny-1M" for x in alls)
    assert (run / "config.toml").exists() and (run / "model" / "model.safetensors").exists()
    assert (run / "checkpoints" / "latest").read_text().strip() == "ckpt-000003"
    # per-episode outcomes live in eval/update-NNNN.json, not in every checkpoint's trainer state
    assert len(json.loads((run / "eval" / "update-0003.json").read_text())["t0.4"]["episodes"]) == \
        results["modes"]["t0.4"]["n_episodes"]
    evals = json.loads((run / "checkpoints" / "ckpt-000003" / "state.json").read_text())["evals"]
    assert evals["after"]["t0.4"]["n_episodes"] == results["modes"]["t0.4"]["n_episodes"]
    assert not [mode for ev in evals.values() for mode in ev.values() if isinstance(mode, dict) and "episodes" in mode]
    if env != "sokoban":
        return
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    # the learning curve starts at the untrained model (validated, not recorded on the leaderboard)
    first = results["modes"]["t0.4"]
    assert first["untrained"] is not None and 0.0 <= first["untrained"] <= 1.0
    assert "untrained ->" in r.stdout
    ev = run_abc(["eval", "--run", str(run), "--episodes", "4", "--no-greedy"], cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert "success" in ev.stdout


def test_eval_a_model_by_name(tmp_path):
    out = tmp_path / "ev"
    r = run_abc(["eval", "--model", "tiny", "--env", "sokoban", "--episodes", "4", "--out", str(out),
                 "--set", "env.max_steps=3", "--set", "rollout.max_response_tokens=4"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = [json.loads(x) for x in (out / "eval" / "records.jsonl").read_text().splitlines()]
    assert recs[0]["method"] == "base" and recs[0]["n_episodes"] == 4 and recs[0]["update"] == 0
    assert recs[0]["kind"] == "prompting" and recs[0]["env"] == "sokoban"
    assert recs[0]["model"] == "tiny-qwen2" and recs[0]["model_scale"] == "tiny-1M"
    # per-episode outcomes on the held-out seeds, consistent with the aggregate
    full = json.loads((out / "eval" / "update-0000.json").read_text())
    for mode in ("t0.4", "greedy"):
        eps = full[mode]["episodes"]
        assert len(eps) == 4 and len({e["seed"] for e in eps}) == 4
        assert all(e["seed"] >= 1_000_000 and 1 <= e["steps"] <= 3 and 0 <= e["invalid"] <= e["steps"] for e in eps)
        assert sum(e["success"] for e in eps) / 4 == full[mode]["success"]
    assert [e["seed"] for e in full["t0.4"]["episodes"]] == [e["seed"] for e in full["greedy"]["episodes"]]


def test_sft_then_train_from_its_model(tmp_path):
    r = run_abc(["sft", "--steps", "3", *set_args([f"out_dir={tmp_path}"])], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = list(tmp_path.iterdir())
    assert (run / "model" / "tokenizer.json").exists()
    assert not [x for x in (run / "metrics.jsonl").read_text().splitlines() if '"stage": "rl"' in x]
    r = run_abc(["train", "--credit", "grpo", "--model", str(run / "model"),
                 *set_args(["sft.steps=0", "updates=1", f"out_dir={tmp_path / 'rl'}"])], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (rl,) = list((tmp_path / "rl").iterdir())
    recs = [json.loads(x) for x in (rl / "eval" / "records.jsonl").read_text().splitlines()]
    # labelled by the base model of the run it came from, not by the folder name "model"
    assert {(x["model"], x["model_scale"]) for x in recs} == {("tiny-qwen2", "tiny-1M")}


def test_vl_preset_pipeline_two_updates_with_a_tiny_qwen2_5_vl(tmp_path):
    """The sokoban-qwen2.5-vl-3b preset's pipeline (pixel observations, images in every forward of the update) with
    a tiny random Qwen2.5-VL in place of the 3B model."""
    sets = ["sft.steps=0", "updates=2", "rollout.groups=1", "rollout.group_size=4", "rollout.max_response_tokens=8",
            "eval.episodes=2", "eval.greedy=false", "env.max_steps=3", "max_minutes=0", "progress=false",
            "tensorboard=false", "optim.micro_batch=8", "device=cpu", "model.dtype=fp32", f"out_dir={tmp_path}"]
    r = run_abc(["train", "--credit", "crbc", "--preset", "sokoban-qwen2.5-vl-3b", "--model", "tiny-vl",
                 *(x for kv in sets for x in ("--set", kv))], cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = [p for p in tmp_path.iterdir() if p.name.startswith("sokoban__crbc__tiny-vl__")]
    rl = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"rl"' in x]
    assert [x["step"] for x in rl] == [1, 2]
    assert all(x["n_steps"] + x["image_token_steps"] > 0 and x["optimizer_steps"] >= 1 for x in rl)
