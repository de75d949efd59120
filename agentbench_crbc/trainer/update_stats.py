"""The metrics row of one RL update: episode outcomes of its groups and the advantages credit gave their steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["update_row"]


def update_row(groups: Sequence[Any], advantages: Any, counts: Mapping[str, float], **extra: float) -> dict[str, Any]:
    """Success, return, episode length, invalid-action share and advantage mean/std of one update's groups, with
    ``counts`` (from ``build_samples``) and ``extra`` (timings, the PPO update's logs) merged in."""
    a = np.asarray(advantages, dtype=np.float64)
    trajs = [t for g in groups for t in g.trajectories]
    steps = [s for t in trajs for s in t.steps]
    return {"success": float(np.mean([t.success for t in trajs])),
            "return": float(np.mean([t.reward for t in trajs])),
            "episode_len": float(np.mean([len(t.steps) for t in trajs])),
            "invalid": float(np.mean([not s.valid for s in steps])) if steps else 0.0,
            "adv_mean": float(a.mean()) if a.size else 0.0, "adv_std": float(a.std()) if a.size else 0.0,
            **counts, **extra}
