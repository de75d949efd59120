"""CRBC: Cross-Rollout Bellman Closure (Ren et al., arXiv 2609.35082), step credit Q - V on the merged group.

The closure itself (Eqs. 1-13) is :mod:`agentbench_crbc.credit.closure`; this module adds the step credit added to
the trajectory advantage (Eq. 14), its option bounds, and the per-group diagnostics of ``abc credit crbc --explain``
(registered with the method, so the credit layer reaches them through the plugin host).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.closure import MAX_DEPTH, Closure, closure
from agentbench_crbc.credit.explain import GroupExplanation
from agentbench_crbc.credit.stats import episode_advantage
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["BOUNDS", "PRESETS", "crbc", "explain"]

#: The allowed option values, checked when a config is resolved (see ``abc plugins``).
BOUNDS = {
    "beta": Bound(0.0, 1.0, lo_open=True),
    "depth": Bound(0, MAX_DEPTH, integer=True, choices=(None, "inf", "infinity", "full", math.inf)),
    "w_traj": Bound(),
    "w_step": Bound(),
    "sigma_min": Bound(0.0, lo_open=True),
    "traj_advantage": Bound(choices=("grpo", "rloo")),
    "norm": Bound(choices=("std", "none")),
}


def crbc(batch: StepBatch, *, beta: float = 0.98, depth: Any = None, w_traj: float = 1.0, w_step: float = 5.0,
         sigma_min: float = 0.1, traj_advantage: str = "grpo", norm: str = "std",
         cross_steps: bool = False) -> np.ndarray:
    """CRBC: A_{i,t} = w_traj * A^G_i + w_step * A^S(s_{i,t}, a_{i,t})  (Eq. 14).

    :param beta: discount of the closure, in (0, 1]; beta = 1 gives plain success probabilities.
    :param depth: ``None``/``"inf"`` for the full closure (Eq. 9), or K >= 0 backups from visit-local values (Eq. 10).
    :param sigma_min: floor of the per-anchor credit scale (Eq. 13).
    :param traj_advantage: ``"grpo"`` (with ``norm``, ``cross_steps``) or ``"rloo"`` for A^G.
    :returns: one float per step.
    """
    c = closure(batch, beta=beta, depth=depth, sigma_min=sigma_min)
    a_g = episode_advantage(batch, norm=norm, cross_steps=cross_steps, kind=traj_advantage)
    return w_traj * a_g + w_step * c.A_step[c.step_sa]


# -- diagnostics ------------------------------------------------------------------------------------------------

def _coverage(batch: StepBatch, c: Closure, idx: np.ndarray, depths: Sequence[int | None]) -> dict[str, float]:
    """Mean, over gated steps, of the trajectories that give evidence about the step's (anchor, action) within K
    hops: those visiting the pair or a state reachable from its successors in K - 1 more steps (K None: any).

    Trajectory sets are bit masks and reach is computed once per depth over the group's transition graph (K hops
    by K passes; unbounded reach over the strongly connected components in topological order), so the cost is
    linear in the group's steps times ``len(idx) / 64`` words.
    """
    starts, lens = batch.traj_start[idx].tolist(), batch.traj_len[idx].tolist()
    steps = np.concatenate([np.arange(a, a + n) for a, n in zip(starts, lens, strict=True)])
    bit_of_traj = {i: 1 << j for j, i in enumerate(idx.tolist())}
    own: dict[int, int] = {}  # state -> trajectories visiting it
    own_sa: dict[int, int] = {}  # (anchor, action) pair -> trajectories taking it
    succ: dict[int, set[int]] = {}
    next_of_sa: dict[int, set[int]] = {}
    S = batch.n_states
    for s, x, sa, i in zip(batch.step_state[steps].tolist(), batch.step_next[steps].tolist(),
                           c.step_sa[steps].tolist(), batch.step_traj[steps].tolist(), strict=True):
        bit = bit_of_traj[i]
        own[s] = own.get(s, 0) | bit
        own_sa[sa] = own_sa.get(sa, 0) | bit
        if x < S:
            succ.setdefault(s, set()).add(x)
            next_of_sa.setdefault(sa, set()).add(x)
    eligible = [sa for k, sa in zip(steps.tolist(), c.step_sa[steps].tolist(), strict=True)
                if c.gate[batch.step_state[k]]]
    hops = [own]  # hops[h][s]: trajectories visiting a state reachable from s in at most h steps
    out: dict[str, float] = {}
    for K in depths:
        key = "inf" if K is None else str(K)
        if not eligible:
            out[key] = 0.0
            continue
        if K is None:
            reach = _full_reach(own, succ)
        else:
            while len(hops) < K:
                prev = hops[-1]
                hops.append({s: b | _union(prev, succ.get(s, ())) for s, b in own.items()})
            reach = hops[K - 1] if K > 0 else {}
        count = {sa: (own_sa[sa] | _union(reach, next_of_sa.get(sa, ())) if K != 0 else own_sa[sa]).bit_count()
                 for sa in set(eligible)}
        out[key] = sum(count[sa] for sa in eligible) / len(eligible)
    return out


def _union(bits: dict[int, int], keys: Iterable[int]) -> int:
    u = 0
    for k in keys:
        u |= bits[k]
    return u


def _full_reach(own: dict[int, int], succ: dict[int, set[int]]) -> dict[int, int]:
    """For each state, the union of ``own`` over every state reachable from it (itself included)."""
    from graphlib import TopologicalSorter

    from scipy.sparse.csgraph import connected_components

    states = list(own)
    pos = {s: j for j, s in enumerate(states)}
    rows = [pos[s] for s in states for _ in succ.get(s, ())]
    cols = [pos[x] for s in states for x in succ.get(s, ())]
    graph = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(states), len(states)))
    _, label = connected_components(graph, directed=True, connection="strong")
    comp_bits: dict[int, int] = {}
    comp_succ: dict[int, set[int]] = {}
    for s, comp in zip(states, label.tolist(), strict=True):
        comp_bits[comp] = comp_bits.get(comp, 0) | own[s]
        deps = comp_succ.setdefault(comp, set())
        deps.update(int(label[pos[x]]) for x in succ.get(s, ()))
        deps.discard(comp)
    reach: dict[int, int] = {}
    for comp in TopologicalSorter(comp_succ).static_order():  # successors first
        reach[comp] = comp_bits[comp] | _union(reach, comp_succ[comp])
    return {s: reach[comp] for s, comp in zip(states, label.tolist(), strict=True)}


def explain(batch: StepBatch, *, beta: float = 0.98, depth: Any = None, sigma_min: float = 0.1,
            coverage_depths: Sequence[int | None] = (0, 1, 2, 3, None), **_: Any) -> list[GroupExplanation]:
    """Per group: V and sigma and gate per anchor, mu, Q, Q - V and step credit per (anchor, action), coverage."""
    c = closure(batch, beta=beta, depth=depth, sigma_min=sigma_min)
    visits = np.bincount(batch.step_state, minlength=batch.n_states)
    states_of = _by_group(batch.state_group, batch.n_groups)
    pairs_of = _by_group(batch.state_group[c.sa_state], batch.n_groups)
    out = []
    for g, idx in enumerate(batch.group_trajectories()):
        st = tuple({"anchor": _jsonable(batch.state_anchor[s]), "V": float(c.V[s]), "sigma": float(c.sigma[s]),
                    "gate": bool(c.gate[s]), "visits": int(visits[s])} for s in states_of[g].tolist())
        pairs = tuple({"anchor": _jsonable(batch.state_anchor[c.sa_state[p]]), "action": batch.actions[c.sa_action[p]],
                       "count": int(c.count[p]), "mu": float(c.mu[p]), "Q": float(c.Q[p]), "A": float(c.A[p]),
                       "A_step": float(c.A_step[p])} for p in pairs_of[g].tolist())
        out.append(GroupExplanation(batch.group_ids[g], len(idx), st, pairs, _coverage(batch, c, idx, coverage_depths)))
    return out


def _by_group(group_of: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Indices of the items of each group, in input order (one stable sort, not a scan per group)."""
    order = np.argsort(group_of, kind="stable")
    return np.split(order, np.cumsum(np.bincount(group_of, minlength=n_groups))[:-1])


def _jsonable(anchor: Hashable) -> Any:
    if isinstance(anchor, tuple) and len(anchor) == 2 and anchor[0] == "json":
        import json

        return json.loads(anchor[1])
    return anchor if isinstance(anchor, (str, int, float, bool)) or anchor is None else repr(anchor)


#: The options of ``abc train --preset``: the paper's on the ``paper`` base. On the CPU demo's, CRBC's step credit in
#: value units: Eq. 13's floor sigma_min set to the return's range (success in {0, 1}), so no state's Q - V is
#: scaled up beyond the value scale; the per-anchor normalisation with the paper's floor 0.1 makes a gap of a few
#: hundredths (noise at G = 8) as loud as one of a half, and on seed 4 left CRBC +5.1 points where GRPO gained
#: +25.6 (docs/benchmarks.md).
PRESETS = {
    "paper": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 0.1},
    "cpu-demo": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 1.0},
}


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("crbc", crbc, bounds=BOUNDS, explain=explain, label="CRBC", presets=PRESETS)
