"""CRBC: Cross-Rollout Bellman Closure (Ren et al., arXiv 2609.35082), step credit Q - V on the merged group.

Each group's rollouts are merged into one empirical process over anchors with absorbing boundaries z+ (V = 1) and
z- (V = 0) (Eq. 1, 5); its behaviour-policy Bellman fixed point is one sparse linear solve (Eqs. 8-9) for the whole
batch (the groups form a block-diagonal system); Q = B V (Eq. 7); finite depth K iterates from the visit-local
values (Eqs. 6, 10); the step credit is the gated, sigma-normalised Q - V (Eq. 13), added to the trajectory
advantage (Eq. 14).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.linalg import splu

from agentbench_crbc import hookimpl
from agentbench_crbc.batch import StepBatch, dense_unique
from agentbench_crbc.errors import CreditError, OptionError
from agentbench_crbc.host import Bound, CreditRegister
from agentbench_crbc.stats import episode_advantage

__all__ = [
    "BOUNDS",
    "FAILURE",
    "MAX_DEPTH",
    "SUCCESS",
    "Closure",
    "GroupExplanation",
    "closure",
    "closure_from_transitions",
    "crbc",
    "explain",
    "parse_depth",
]

#: Boundary markers for :func:`closure_from_transitions`.
SUCCESS = "<z+>"
FAILURE = "<z->"


#: The deepest finite K: each level is one sparse product, and at beta = 0.98, beta^1000 < 2e-9 (use inf instead).
MAX_DEPTH = 1000
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


def parse_depth(depth: Any) -> int | None:
    """``None``, ``"inf"`` or ``inf`` mean full closure; otherwise an int 0 <= K <= ``MAX_DEPTH``."""
    if depth is None or (isinstance(depth, str) and depth.strip().lower() in ("inf", "infinity", "full")):
        return None
    if isinstance(depth, float) and math.isinf(depth) and depth > 0:
        return None
    if isinstance(depth, float) and depth.is_integer():
        depth = int(depth)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise OptionError(f"crbc: option depth={depth!r} must be an integer in [0, {MAX_DEPTH}], or null/inf for "
                          "the full closure")
    return depth


def _check_beta(beta: float) -> float:
    if not 0.0 < beta <= 1.0:
        raise OptionError(f"crbc: option beta={beta!r} must lie in (0, 1]")
    return float(beta)


@dataclass(frozen=True, eq=False)
class Closure:
    """The solved empirical process of a batch.

    ``V`` per state; per observed (state, action) pair ``sa_state``, ``sa_action``, ``count``, ``mu`` (Eq. 5),
    ``Q`` (Eq. 7), ``A = Q - V`` and the step credit ``A_step`` (Eq. 13); ``sigma`` and ``gate`` per state;
    ``step_sa`` maps each step to its pair.
    """

    V: np.ndarray
    Q: np.ndarray
    A: np.ndarray
    A_step: np.ndarray
    mu: np.ndarray
    count: np.ndarray
    sigma: np.ndarray
    gate: np.ndarray
    sa_state: np.ndarray
    sa_action: np.ndarray
    step_sa: np.ndarray


def _solve(state: np.ndarray, action: np.ndarray, nxt: np.ndarray, n_states: int, n_actions: int,
           G: np.ndarray | None, *, beta: float, depth: int | None, sigma_min: float,
           label: Callable[[int], Hashable] | None = None, order: np.ndarray | None = None) -> Closure:
    """Core of CRBC on flat transition arrays; ``nxt`` uses ``n_states`` for z+ and ``n_states + 1`` for z-.

    ``G`` (realised returns beta^(T-t+1) R per transition) is needed only for finite depth. ``order`` (one number
    per state, optional) only affects speed: the solve eliminates states in decreasing ``order``.
    """
    S = n_states
    n_s = np.bincount(state, minlength=S).astype(np.float64)
    uniq, step_sa = dense_unique(state * max(n_actions, 1) + action, S * max(n_actions, 1))
    sa_state, sa_action = uniq // max(n_actions, 1), uniq % max(n_actions, 1)
    n_sa = np.bincount(step_sa).astype(np.float64)
    inv_ns = 1.0 / np.maximum(n_s, 1.0)
    if depth is None:
        if beta == 1.0:
            _check_reaches_boundary(nxt, state, S, label)
        V = _closure_values(state, nxt, n_s, beta, order)
        V_prev = V
    else:
        if G is None:
            raise CreditError("crbc: finite depth needs realised returns")
        V0 = np.bincount(state, weights=G, minlength=S) * inv_ns  # Eq. 6
        if depth == 0:
            Q = np.bincount(step_sa, weights=G) / n_sa
            return _finish(Q, V0, step_sa, sa_state, sa_action, n_sa, n_s, S, sigma_min)
        inner = nxt < S
        rows = state[inner]
        M = sp.csr_matrix((inv_ns[rows], (rows, nxt[inner])), shape=(S, S))
        b = beta * np.bincount(state[nxt == S], minlength=S) * inv_ns  # beta * sum_a mu P(z+|s,a)
        V_prev, V = V0, V0
        for _ in range(depth):  # V_K = T^K V0 (Eq. 10)
            V_prev, V = V, beta * (M @ V) + b
    V_ext = np.concatenate([V_prev, [1.0, 0.0]])
    Q = beta * np.bincount(step_sa, weights=V_ext[nxt]) / n_sa  # Q_K = B V_{K-1}; full closure: Q = B V
    return _finish(Q, V, step_sa, sa_state, sa_action, n_sa, n_s, S, sigma_min)


def _closure_values(state: np.ndarray, nxt: np.ndarray, n_s: np.ndarray, beta: float,
                    order: np.ndarray | None = None, eliminate: bool = True) -> np.ndarray:
    """Solve (I - beta M) V = b (Eq. 9) exactly, after eliminating states with a single successor.

    A state whose every visit leads to the same node x has V(s) = beta V(x). Such states cannot form a cycle (a
    trajectory entering one would never end), so pointer jumping maps each to the first node with two or more
    successors (or a boundary) at depth k, giving V(s) = beta^k V(end). Only branching states enter the sparse solve,
    one LU factorisation (SuperLU) with the columns in decreasing ``order`` (default: decreasing state id). For
    rollouts, ordering by first-visit time is a cheap fill-reducing order: late states lie near the boundaries, and
    eliminating them first keeps the factors nearly as sparse as COLAMD does (8.2k vs 7.4k nonzeros on the paper
    batch, 18.1k in natural order), without COLAMD's ordering cost.
    """
    S = len(n_s)  # n_s: visits per state, already counted by the caller
    inv_ns = 1.0 / np.maximum(n_s, 1.0)
    ref = np.zeros(S, dtype=np.int64)
    ref[state[::-1]] = nxt[::-1]  # first successor of each state
    branching = np.bincount(state, weights=nxt != ref[state], minlength=S) > 0
    if not eliminate:
        branching[:] = True
    visited = n_s > 0  # a never-left state (explicit transitions only) has V = 0
    nodes = np.arange(S + 2)
    jump = np.concatenate([np.where(branching, nodes[:S], np.where(visited, ref, S + 1)), [S, S + 1]])
    depth = np.concatenate([(~branching & visited).astype(np.float64), [0.0, 0.0]])
    for _ in range(int(np.log2(S + 2)) + 2):  # pointer doubling: O(log(longest chain)) rounds
        nj = jump[jump]
        if np.array_equal(nj, jump):
            break
        depth, jump = depth + depth[jump], nj
    else:  # a deterministic cycle (possible only in explicit transition sets): solve without elimination
        return _closure_values(state, nxt, n_s, beta, order, eliminate=False)
    factor = np.power(beta, depth)
    R = np.flatnonzero(branching)
    R = R[::-1] if order is None else R[np.argsort(-order[R], kind="stable")]
    pos = np.full(S + 2, -1, dtype=np.int64)
    pos[R] = np.arange(len(R))
    pos[S], pos[S + 1] = len(R), len(R) + 1
    from_r = branching[state]
    r_rows, r_x = pos[state[from_r]], nxt[from_r]
    end, w = pos[jump[r_x]], inv_ns[state[from_r]] * factor[r_x]
    n = len(R)
    b_r = beta * np.bincount(r_rows[end == n], weights=w[end == n], minlength=n)
    inner = end < n
    if n:
        diag = np.arange(n)
        A_mat = sp.csc_matrix((np.concatenate([-beta * w[inner], np.ones(n)]),
                               (np.concatenate([r_rows[inner], diag]), np.concatenate([end[inner], diag]))),
                              shape=(n, n))
        # panel_size=1: these factors are thin, and SuperLU's default panels of 12 columns doubled the time here
        V_r = splu(A_mat, permc_spec="NATURAL", panel_size=1).solve(b_r)
        if not np.isfinite(V_r).all():
            raise CreditError("crbc: the closure system is numerically singular; use beta < 1")
    else:
        V_r = np.zeros(0)
    V_ext = np.concatenate([V_r, [1.0, 0.0]])
    return factor[:S] * V_ext[pos[jump[:S]]]


def _finish(Q: np.ndarray, V: np.ndarray, step_sa: np.ndarray, sa_state: np.ndarray, sa_action: np.ndarray,
            n_sa: np.ndarray, n_s: np.ndarray, S: int, sigma_min: float) -> Closure:
    A = Q - V[sa_state]
    mu = n_sa / n_s[sa_state]
    sigma = np.sqrt(np.bincount(sa_state, weights=mu * A * A, minlength=S))  # Eq. 13
    gate = np.bincount(sa_state, minlength=S) >= 2
    A_step = np.where(gate[sa_state], A / np.maximum(sigma[sa_state], sigma_min), 0.0)
    return Closure(V=V, Q=Q, A=A, A_step=A_step, mu=mu, count=n_sa, sigma=sigma, gate=gate,
                   sa_state=sa_state, sa_action=sa_action, step_sa=step_sa)


def _check_reaches_boundary(nxt: np.ndarray, state: np.ndarray, S: int,
                            label: Callable[[int], Hashable] | None) -> None:
    """At beta = 1, I - M is invertible iff every state with outgoing transitions can reach a boundary."""
    # both boundaries become node S; search backwards from it
    reverse = sp.csr_matrix((np.ones(len(state)), (np.minimum(nxt, S), state)), shape=(S + 1, S + 1))
    reached = np.zeros(S + 1, dtype=bool)
    reached[breadth_first_order(reverse, S, directed=True, return_predecessors=False)] = True
    stuck = np.flatnonzero(~reached[:S] & (np.bincount(state, minlength=S) > 0))
    if len(stuck):
        name = label(int(stuck[0])) if label is not None else int(stuck[0])
        raise CreditError(
            f"crbc: anchor {name!r} never reaches a success or failure boundary, so I - M is singular at beta=1; "
            "end every trajectory at a boundary (truncation counts as failure) or use beta < 1")


def _realised_returns(batch: StepBatch, beta: float) -> np.ndarray:
    T = batch.traj_len[batch.step_traj]
    return np.power(beta, (T - batch.step_t + 1).astype(np.float64)) * batch.traj_success[batch.step_traj]


def closure(batch: StepBatch, *, beta: float = 0.98, depth: Any = None, sigma_min: float = 0.1) -> Closure:
    """Solve the batch's empirical processes (all groups at once) at ``depth`` (``None`` = full closure)."""
    beta, K = _check_beta(beta), parse_depth(depth)
    if sigma_min <= 0:
        raise OptionError(f"crbc: option sigma_min={sigma_min!r} must be > 0")
    G = _realised_returns(batch, beta) if K is not None else None
    first_t = None
    if K is None:  # first-visit time of each state: a fill-reducing elimination order for the solve
        first_t = np.empty(batch.n_states, dtype=np.int64)
        first_t[batch.step_state[::-1]] = batch.step_t[::-1]
    return _solve(batch.step_state, batch.step_action, batch.step_next, batch.n_states, len(batch.actions), G,
                  beta=beta, depth=K, sigma_min=sigma_min, label=lambda i: batch.state_anchor[i], order=first_t)


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


def closure_from_transitions(transitions: Iterable[tuple[Hashable, str, Hashable]], *, beta: float = 0.98,
                             sigma_min: float = 0.1) -> tuple[dict[Hashable, float], dict[tuple[Hashable, str], float]]:
    """Full closure over explicit ``(anchor, action, successor)`` triples, where a successor is an anchor or
    :data:`SUCCESS` / :data:`FAILURE`. Returns ``(V, A_step)`` keyed by anchor and by (anchor, action).

    Unlike rollout records, such input can leave a state with no way to a boundary; at beta = 1 that raises
    :class:`CreditError`.
    """
    beta = _check_beta(beta)
    ids: dict[Hashable, int] = {}
    acts: dict[str, int] = {}
    trip = [(ids.setdefault(s, len(ids)), acts.setdefault(a, len(acts)), x) for s, a, x in transitions]
    for _, _, x in trip:
        if x not in (SUCCESS, FAILURE):
            ids.setdefault(x, len(ids))
    S = len(ids)
    nxt = np.asarray([S if x == SUCCESS else S + 1 if x == FAILURE else ids[x] for _, _, x in trip], dtype=np.int64)
    c = _solve(np.asarray([t[0] for t in trip], dtype=np.int64), np.asarray([t[1] for t in trip], dtype=np.int64),
               nxt, S, len(acts), None, beta=beta, depth=None, sigma_min=sigma_min, label=list(ids).__getitem__)
    names, anames = list(ids), list(acts)
    V = {names[i]: float(c.V[i]) for i in range(S)}
    A = {(names[s], anames[a]): float(v)
         for s, a, v in zip(c.sa_state.tolist(), c.sa_action.tolist(), c.A_step.tolist(), strict=True)}
    return V, A


# -- diagnostics ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupExplanation:
    """CRBC diagnostics of one group: values, per-pair credit, and evidence coverage by depth.

    ``coverage[K]`` is the mean, over eligible visits (visits of gated-on anchors), of how many of the group's
    rollouts the visit's Q can draw on after K backups (``"inf"``: the full closure), as the paper's Figure 5.
    """

    group: str
    n_rollouts: int
    states: tuple[dict[str, Any], ...]
    pairs: tuple[dict[str, Any], ...]
    coverage: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "n_rollouts": self.n_rollouts, "states": list(self.states),
                "pairs": list(self.pairs), "coverage": self.coverage}


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


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("crbc", crbc, bounds=BOUNDS)
