"""Exact behaviour-policy values by dynamic programming over steps remaining, occupancies and the exact gradient.

With t steps remaining: ``V_0 = 0``, ``Q_t(s, a) = sum_s' P(s'|s, a) [1 if s' success, 0 if failure, else
V_{t-1}(s')]``, ``V_t(s) = sum_a pi(a|s) Q_t(s, a)``. Step k (0-based) of an episode has ``T - k`` steps left,
so its true advantage is ``Q_{T-k}(s, a) - V_{T-k}(s)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from ..io import json_text
from .mdp import TabularMDP

__all__ = ["ExactValues", "exact_gradient", "exact_json", "exact_values", "occupancy", "success_probability",
           "write_exact_json"]


@dataclass(frozen=True, eq=False)
class ExactValues:
    """``V[t, s]`` and ``Q[t, s, a]`` for t = 0..T steps remaining (``Q`` is 0 on padded actions)."""

    V: np.ndarray
    Q: np.ndarray

    @property
    def advantage(self) -> np.ndarray:
        """``A[t, s, a] = Q[t, s, a] - V[t, s]``."""
        return self.Q - self.V[:, :, None]

    def step_advantage(self, step: np.ndarray, state: np.ndarray, action: np.ndarray) -> np.ndarray:
        """True advantage of steps given their 0-based index k in the episode, state and action ids."""
        t = self.V.shape[0] - 1 - np.asarray(step)
        return self.Q[t, state, action] - self.V[t, state]  # type: ignore[no-any-return]


def exact_values(mdp: TabularMDP, policy: np.ndarray | None = None) -> ExactValues:
    """V and Q of ``policy`` (default the MDP's behaviour policy) for every number of steps remaining."""
    pi = mdp.policy if policy is None else np.asarray(policy, dtype=np.float64)
    S, A, T = mdp.n_states, mdp.n_actions, mdp.horizon
    V = np.zeros((T + 1, S))
    Q = np.zeros((T + 1, S, A))
    ext = np.zeros(S + 2)
    ext[S] = 1.0  # entering success pays 1, failure 0
    for t in range(1, T + 1):
        ext[:S] = V[t - 1]
        Q[t] = (mdp.transitions @ ext).reshape(S, A)
        V[t] = (pi * Q[t]).sum(1)
    return ExactValues(V, Q)


def success_probability(mdp: TabularMDP, policies: np.ndarray) -> np.ndarray:
    """Exact success probability from the start distribution of each policy in a ``(K, S, A)`` stack: ``(K,)``."""
    K, S, A = policies.shape
    ext = np.zeros((S + 2, K))
    ext[S] = 1.0
    for _ in range(mdp.horizon):
        Q = (mdp.transitions @ ext).reshape(S, A, K)
        ext[:S] = np.einsum("ksa,sak->sk", policies, Q)
    return mdp.start @ ext[:S]  # type: ignore[no-any-return]


def occupancy(mdp: TabularMDP, policy: np.ndarray | None = None) -> np.ndarray:
    """``d[k, s]``: probability that step k (0-based) of an episode is taken in non-terminal state s, ``(T, S)``."""
    pi = mdp.policy if policy is None else policy
    S, T = mdp.n_states, mdp.horizon
    PT = mdp.transitions.T.tocsr()
    d = np.zeros((T, S))
    d[0] = mdp.start
    for k in range(1, T):
        d[k] = (PT @ (d[k - 1][:, None] * pi).ravel())[:S]
    return d


def exact_gradient(mdp: TabularMDP, values: ExactValues | None = None, policy: np.ndarray | None = None
                   ) -> np.ndarray:
    """The exact policy gradient of success for the tabular softmax policy at ``policy``, ``(S, A)``.

    ``g[s, a] = sum_k d_k(s) pi(a|s) A_{T-k}(s, a)``: the sum over steps, states and actions of occupancy x pi x
    A x grad log pi, simplified with ``sum_a pi(a|s) A(s, a) = 0``.
    """
    pi = mdp.policy if policy is None else policy
    values = values or exact_values(mdp, pi)
    d = occupancy(mdp, pi)
    T = mdp.horizon
    adv = values.advantage[T - np.arange(T)]  # (T, S, A): steps remaining T - k
    return np.einsum("ks,sa,ksa->sa", d, pi, adv)  # type: ignore[no-any-return]


def exact_json(mdp: TabularMDP, values: ExactValues | None = None) -> dict[str, Any]:
    """``{"V": {"t": {s: v}}, "Q": {"t": {s: {a: q}}}}`` for t = 1..T, keys as strings."""
    values = values or exact_values(mdp)
    out: dict[str, Any] = {"V": {}, "Q": {}}
    for t in range(1, mdp.horizon + 1):
        vt, qt = values.V[t].tolist(), values.Q[t].tolist()
        out["V"][str(t)] = dict(zip(mdp.states, vt, strict=True))
        out["Q"][str(t)] = {s: dict(zip(acts, q, strict=False)) for s, acts, q in zip(mdp.states, mdp.actions, qt,
                                                                                      strict=True)}
    return out


def write_exact_json(fh: IO[str], mdp: TabularMDP, values: ExactValues | None = None) -> None:
    """The document of :func:`exact_json` written to ``fh`` one step count at a time, so memory stays the V and Q
    arrays (8 bytes a cell: the cell limit's "about 800 MB") instead of a dict of every cell (about 600 bytes a
    cell)."""
    values = values or exact_values(mdp)
    for n, key in enumerate(("V", "Q")):
        fh.write(("{" if n == 0 else ",\n") + f'"{key}": {{')
        for t in range(1, mdp.horizon + 1):
            if key == "V":
                part: Any = dict(zip(mdp.states, values.V[t].tolist(), strict=True))
            else:
                part = {s: dict(zip(acts, q, strict=False))
                        for s, acts, q in zip(mdp.states, mdp.actions, values.Q[t].tolist(), strict=True)}
            fh.write(("\n" if t == 1 else ",\n") + f'"{t}": ' + json_text(part))
        fh.write("\n}")
    fh.write("}\n")
