"""Synthetic measured records with known numbers for the leaderboard tests."""

from __future__ import annotations

from pathlib import Path

from agentbench_crbc.leaderboard.records import RunRecord

PAPER_CSV = Path(__file__).resolve().parents[2] / "leaderboards" / "crbc_paper_reported.csv"


def rec(method: str = "crbc", seed: int = 0, update: int = 10, subtask: str = "all", success: float = 0.5,
        n_episodes: int = 10, env: str = "alfworld", scale: str = "tiny-1M", model: str = "tiny-qwen2",
        score: float | None = None) -> RunRecord:
    return RunRecord(env=env, subtask=subtask, model=model, model_scale=scale, method=method, seed=seed,
                     update=update, success=success, score=score, n_episodes=n_episodes, config_hash="abc123",
                     package_version="0.1.0", date="2026-11-29", source="measured")


def two_method_run() -> list[RunRecord]:
    """crbc and grpo, 3 seeds, subtasks pick (10 episodes) and clean (30 episodes), updates 0, 5 and 10.

    crbc at update 10: pick 0.5/0.6/0.7, clean 0.9/0.8/1.0 -> All per seed (5+27)/40=0.8, (6+24)/40=0.75,
    (7+30)/40=0.925. grpo at update 10: pick 0.2 everywhere, clean 0.4 everywhere -> All 0.35.
    """
    out = []
    crbc = {0: (0.5, 0.9), 1: (0.6, 0.8), 2: (0.7, 1.0)}
    for seed, (pick, clean) in crbc.items():
        for update, f in ((0, 0.0), (5, 0.5), (10, 1.0)):
            out.append(rec("crbc", seed, update, "pick", pick * f, 10))
            out.append(rec("crbc", seed, update, "clean", clean * f, 30))
            out.append(rec("grpo", seed, update, "pick", 0.2 * f, 10))
            out.append(rec("grpo", seed, update, "clean", 0.4 * f, 30))
    return out
