"""Vectorised episode sampling from a tabular MDP and conversion of groups of episodes to credit records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .mdp import TabularMDP

__all__ = ["Episodes", "sample_episodes", "to_records"]


@dataclass(frozen=True, eq=False)
class Episodes:
    """``n`` episodes: ``state``/``action`` ``(n, T)`` ids (-1 after the end), ``length`` and ``success`` ``(n,)``."""

    state: np.ndarray
    action: np.ndarray
    length: np.ndarray
    success: np.ndarray

    def steps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Flat arrays over every step in episode order: (episode, k (0-based), state, action)."""
        valid = self.state >= 0
        ep, k = np.nonzero(valid)
        return ep, k, self.state[valid], self.action[valid]


def _next_state(mdp: TabularMDP, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Sample a successor for each transition row: rows sum to 1, so a global cumulative sum is ``row + inner``."""
    P = mdp.transitions
    cum = np.cumsum(P.data)
    lo, hi = P.indptr[rows], P.indptr[rows + 1]
    base = np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0.0)
    pos = np.searchsorted(cum, base + u, side="right")
    return P.indices[np.clip(pos, lo, hi - 1)]  # type: ignore[no-any-return]


def sample_episodes(mdp: TabularMDP, n: int, rng: np.random.Generator, policy: np.ndarray | None = None,
                    which: np.ndarray | None = None) -> Episodes:
    """Sample ``n`` episodes of at most T steps; reaching success or failure ends one, so does running out.

    :param policy: ``(S, A)`` (default the behaviour policy) or a ``(K, S, A)`` stack, episode i following
        ``policy[which[i]]``.
    """
    pi = mdp.policy if policy is None else policy
    S, A, T = mdp.n_states, mdp.n_actions, mdp.horizon
    cdf = np.cumsum(pi, axis=-1)
    last = mdp.mask.sum(1) - 1
    state = np.full((n, T), -1, dtype=np.int64)
    action = np.full((n, T), -1, dtype=np.int64)
    cur = rng.choice(S, size=n, p=mdp.start)
    alive = np.arange(n)
    success = np.zeros(n, dtype=bool)
    length = np.full(n, T, dtype=np.int64)
    for k in range(T):
        s = cur[alive]
        rows_cdf = cdf[s] if cdf.ndim == 2 else cdf[which[alive], s]  # type: ignore[index]
        a = (rows_cdf <= rng.random(len(alive))[:, None]).sum(1)
        a = np.minimum(a, last[s])
        state[alive, k] = s
        action[alive, k] = a
        nxt = _next_state(mdp, s * A + a, rng.random(len(alive)))
        ended = nxt >= S
        success[alive[nxt == S]] = True
        length[alive[ended]] = k + 1
        cur[alive] = np.where(ended, 0, nxt)
        alive = alive[~ended]
        if not len(alive):
            break
    return Episodes(state, action, length, success)


def to_records(mdp: TabularMDP, episodes: Episodes, group_size: int, *, prefix: str = "g") -> list[dict[str, Any]]:
    """Credit-contract records: consecutive blocks of ``group_size`` episodes form groups ``{prefix}{i}``; anchors
    and action names come from the MDP."""
    anchors, actions = mdp.anchors, mdp.actions
    out = []
    for i, (srow, arow, n, win) in enumerate(zip(episodes.state.tolist(), episodes.action.tolist(),
                                                 episodes.length.tolist(), episodes.success.tolist(), strict=True)):
        steps = [{"anchor": anchors[s], "action": actions[s][a]} for s, a in zip(srow[:n], arow[:n], strict=True)]
        out.append({"group": f"{prefix}{i // group_size}", "steps": steps, "success": win})
    return out
