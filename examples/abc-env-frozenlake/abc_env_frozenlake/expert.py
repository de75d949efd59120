"""The FrozenLake expert: value iteration on the map's known transition model, then greedy actions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .env import ACTIONS

__all__ = ["expert_policy", "task_key", "values"]


def values(model: dict[int, dict[int, list[tuple[float, int, float, bool]]]], *, gamma: float = 0.95,
           tol: float = 1e-10) -> np.ndarray:
    """State values of FrozenLake's ``P`` (``P[s][a] = [(prob, next, reward, done), ...]``) by value iteration."""
    n = len(model)
    v = np.zeros(n)
    while True:
        q = np.array([[sum(p * (r + (0.0 if d else gamma * v[s2])) for p, s2, r, d in model[s][a])
                       for a in range(len(ACTIONS))] for s in range(n)])
        new = q.max(axis=1)
        if np.abs(new - v).max() < tol:
            return new
        v = new


def expert_policy(env: Any) -> Callable[[Any, dict[str, Any]], str]:
    """``policy(obs, info) -> action``: the action of highest value from the agent's cell (ties: first in
    ``left, down, right, up``), computed once per map from the env's current lake."""
    base = env.unwrapped
    model = base.lake.unwrapped.P
    v = values(model)
    gamma = 0.95

    def q(s: int, a: int) -> float:
        return sum(p * (r + (0.0 if d else gamma * v[s2])) for p, s2, r, d in model[s][a])

    best = {s: ACTIONS[int(np.argmax([q(s, a) for a in range(len(ACTIONS))]))] for s in model}

    def policy(obs: Any, info: dict[str, Any]) -> str:
        return best[int(base.cell)]

    return policy


def task_key(env: Any) -> str | None:
    """The map itself (equal maps are equal tasks), hashed into the held-out split."""
    desc = getattr(env.unwrapped, "desc", None)
    return "\n".join(desc) if desc else None
