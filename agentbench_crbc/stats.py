"""Old import path of :mod:`agentbench_crbc.credit.stats` (kept for one release; import from there)."""

from __future__ import annotations

from .credit.stats import EPS, episode_advantage, keyed_mean_std, normalize_within, trajectory_advantage

__all__ = ["EPS", "episode_advantage", "keyed_mean_std", "normalize_within", "trajectory_advantage"]
