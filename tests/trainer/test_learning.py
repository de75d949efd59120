"""RL learns: from a random start on 1-2-move Sokoban, GRPO and CRBC raise training success by 30 points, a broken
update (the advantage's sign flipped) does not, and an absurd learning rate is stopped by the KL guard."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentbench_crbc.trainer import update as update_mod
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.loop import Trainer

#: A budget in updates (not minutes): 1-2-move levels in the egocentric view, constrained answers, no warm start.
UPDATES = 24
LEARN = ["sft.steps=0", f"updates={UPDATES}", "rollout.groups=8", "rollout.group_size=8", "env.kwargs.max_moves=2",
         "env.max_steps=4", "env.kwargs.view=egocentric", "rollout.constrain=true", "model.tiny_hidden=64",
         "model.tiny_layers=2", "optim.lr=2e-3", "optim.ppo_epochs=4", "optim.mini_batch_size=64",
         "optim.target_kl=0.05", "eval.episodes=8", "eval.samples=1", "eval.greedy=false",
         "eval.train_temperature=false", "eval.references=false", "checkpoint_every=100", "progress=false",
         "tensorboard=false", "max_minutes=0"]
WINDOW = 6  # updates averaged at each end of the run
#: Training success gained over the run (last WINDOW updates minus first). Seed 0 reached 0.40 on an AVX-512 CPU and
#: 0.38 (CRBC) on one without (float rounding differs, so the runs differ); seeds 1-2 there gave CRBC 0.32 / 0.50 and
#: GRPO 0.12 / 0.48 (2026-12-02): one seed's gain is not a 40-point guarantee. 0.30 keeps twice the margin over what
#: the sign-flipped update may reach (+0.15 at most, below).
LEARN_GAIN = 0.30


def _run(tmp_path, method: str, extra: tuple[str, ...] = ()) -> list[dict]:
    cfg = load_config(credit=method, overrides=[*LEARN, f"out_dir={tmp_path}", *extra])
    trainer = Trainer(cfg)
    trainer.run()
    rows = [json.loads(line) for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "success" in r and r.get("stage", "rl") == "rl"]


def _gain(rows: list[dict]) -> float:
    s = [r["success"] for r in rows]
    return float(np.mean(s[-WINDOW:]) - np.mean(s[:WINDOW]))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("method", ["grpo", "crbc"])
def test_rl_raises_training_success_by_30_points(tmp_path, method):
    rows = _run(tmp_path, method)
    assert len(rows) == UPDATES
    assert _gain(rows) >= LEARN_GAIN, [round(r["success"], 2) for r in rows]
    assert max(r["invalid"] for r in rows) == 0.0  # constrained decoding: every answer is a legal move
    assert all(np.isfinite(r["entropy"]) and r["entropy"] > 0 for r in rows)  # measured, not a placeholder 0.0
    assert max(r["approx_kl_after"] for r in rows) <= 1.5 * 0.05 + 1e-9  # the guard's bound holds


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_broken_update_does_not_learn(tmp_path, monkeypatch):
    """The same run with the advantage's sign flipped inside the update: the test above would fail on it."""
    real = update_mod.samples_from_groups

    def flipped(groups, advantages, **kw):
        return real(groups, -np.asarray(advantages, dtype=np.float64), **kw)

    monkeypatch.setattr(update_mod, "samples_from_groups", flipped)
    rows = _run(tmp_path, "grpo")
    assert _gain(rows) < LEARN_GAIN
    assert np.mean([r["success"] for r in rows[-WINDOW:]]) < np.mean([r["success"] for r in rows[:WINDOW]]) + 0.15


@pytest.mark.timeout(600)
def test_an_absurd_learning_rate_is_stopped_by_the_kl_guard(tmp_path):
    """lr 1.0 (Adam moves every weight by about 1 a step): every such step is undone and the rate halved until
    steps stay within the KL bound; the policy keeps its entropy and its answers instead of collapsing."""
    rows = _run(tmp_path, "grpo", ("updates=6", "optim.lr=1.0"))
    assert rows[0]["kl_stop"] == 1.0
    assert max(r["approx_kl_after"] for r in rows) <= 0.075 + 1e-9  # the weights kept never moved further
    assert rows[0]["approx_kl_rejected"] > 0.075
    assert rows[-1]["lr"] < 0.1  # halved at each stop
    assert min(r["entropy"] for r in rows) > 0.5  # ln 4 = 1.39 at the start: far from a collapsed policy
