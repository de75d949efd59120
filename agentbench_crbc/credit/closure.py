"""CRBC's Bellman closure (Ren et al., arXiv 2609.35082): a batch's rollouts merged into one empirical process.

Each group's rollouts are merged into one empirical process over anchors with absorbing boundaries z+ (V = 1) and
z- (V = 0) (Eq. 1, 5); its behaviour-policy Bellman fixed point is one sparse linear solve (Eqs. 8-9) for the whole
batch (the groups form a block-diagonal system); Q = B V (Eq. 7); finite depth K iterates from the visit-local
values (Eqs. 6, 10); the per-pair credit is the gated, sigma-normalised Q - V (Eq. 13). Shared by the methods that
need state values (``crbc``, ``gated_bepo``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components
from scipy.sparse.linalg import gmres, splu

from ..errors import CreditError, OptionError
from .batch import StepBatch, dense_unique

__all__ = ["DIRECT_FILL_LIMIT", "FAILURE", "GMRES_RTOL", "MAX_DEPTH", "SUCCESS", "Closure", "check_beta", "closure",
           "closure_from_transitions", "parse_depth"]

#: Boundary markers for :func:`closure_from_transitions`.
SUCCESS = "<z+>"
FAILURE = "<z->"


#: The direct solve is used while the strongly connected components of the closure graph (where LU fill can happen)
#: hold at most this many entries as dense blocks (sum of squared sizes); beyond it, the fill of an LU factor can
#: approach that bound (a group with anchors revisited at random: 32k steps took 33 s), so GMRES solves instead.
DIRECT_FILL_LIMIT = 2_000_000
#: GMRES stops at this relative residual (LU's own accuracy on these systems is about 1e-15 to 1e-13).
GMRES_RTOL = 1e-13


#: The deepest finite K: each level is one sparse product, and at beta = 0.98, beta^1000 < 2e-9 (use inf instead).
MAX_DEPTH = 1000
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


def check_beta(beta: float) -> float:
    """``beta`` as a float, if it lies in (0, 1]."""
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


@dataclass(frozen=True, eq=False)
class _Transitions:
    """Flat transitions ``state --action--> nxt`` over ``n_states`` states and ``n_actions`` actions; ``nxt`` uses
    ``n_states`` for z+ and ``n_states + 1`` for z-."""

    state: np.ndarray
    action: np.ndarray
    nxt: np.ndarray
    n_states: int
    n_actions: int


def _solve(tr: _Transitions, G: np.ndarray | None, *, beta: float, depth: int | None, sigma_min: float,
           label: Callable[[int], Hashable] | None = None, order: np.ndarray | None = None) -> Closure:
    """Core of CRBC on flat transitions.

    ``G`` (realised returns beta^(T-t+1) R per transition) is needed only for finite depth. ``order`` (one number
    per state, optional) only affects speed: the solve eliminates states in decreasing ``order``.
    """
    state, action, nxt, S, n_actions = tr.state, tr.action, tr.nxt, tr.n_states, tr.n_actions
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
        V_r = _solve_linear(A_mat, b_r)
        if not np.isfinite(V_r).all():
            raise CreditError("crbc: the closure system is numerically singular; use beta < 1")
    else:
        V_r = np.zeros(0)
    V_ext = np.concatenate([V_r, [1.0, 0.0]])
    return factor[:S] * V_ext[pos[jump[:S]]]


def _solve_linear(A: sp.csc_matrix, b: np.ndarray) -> np.ndarray:
    """Solve ``A x = b`` for the closure system in near-linear time for any anchor graph.

    Rollout graphs are tree-like with small loops: LU fill stays inside the strongly connected components, so the
    direct solve (SuperLU, the columns in the caller's order) is exact and fastest. When the components are large (a
    group whose anchors recur at random forms one giant component and the factor becomes dense), restarted GMRES
    solves it instead: ``A = I - beta W`` with ``W`` sub-stochastic has its spectrum in a disc around 1 of radius
    beta, and the iteration converges in a few dozen products (each O(edges)); its residual is checked, and if it
    did not converge the direct solve with a fill-reducing (COLAMD) order runs.
    """
    n = A.shape[0]
    n_comp, label = connected_components(A, directed=True, connection="strong")
    sizes = np.bincount(label, minlength=n_comp).astype(np.float64)
    if float(np.dot(sizes, sizes)) <= DIRECT_FILL_LIMIT:
        # panel_size=1: these factors are thin, and SuperLU's default panels of 12 columns doubled the time here
        return splu(A, permc_spec="NATURAL", panel_size=1).solve(b)  # type: ignore[no-any-return]
    from threadpoolctl import threadpool_limits

    A_csr = A.tocsr()
    # one BLAS thread: GMRES's level-2 products are small, and a threaded OpenBLAS under load made them 50-500x slower
    with threadpool_limits(limits=1, user_api="blas"):
        x, _ = gmres(A_csr, b, rtol=GMRES_RTOL, atol=0.0, restart=min(n, 100), maxiter=20)
    scale = max(float(np.linalg.norm(b)), 1e-300)
    if np.isfinite(x).all() and float(np.linalg.norm(A_csr @ x - b)) <= 1e3 * GMRES_RTOL * scale:
        return x  # type: ignore[no-any-return]
    return splu(A, permc_spec="COLAMD").solve(b)  # type: ignore[no-any-return]


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
    beta, K = check_beta(beta), parse_depth(depth)
    if sigma_min <= 0:
        raise OptionError(f"crbc: option sigma_min={sigma_min!r} must be > 0")
    G = _realised_returns(batch, beta) if K is not None else None
    first_t = None
    if K is None:  # first-visit time of each state: a fill-reducing elimination order for the solve
        first_t = np.empty(batch.n_states, dtype=np.int64)
        first_t[batch.step_state[::-1]] = batch.step_t[::-1]
    tr = _Transitions(batch.step_state, batch.step_action, batch.step_next, batch.n_states, len(batch.actions))
    return _solve(tr, G, beta=beta, depth=K, sigma_min=sigma_min, label=lambda i: batch.state_anchor[i], order=first_t)


def closure_from_transitions(transitions: Iterable[tuple[Hashable, str, Hashable]], *, beta: float = 0.98,
                             sigma_min: float = 0.1) -> tuple[dict[Hashable, float], dict[tuple[Hashable, str], float]]:
    """Full closure over explicit ``(anchor, action, successor)`` triples, where a successor is an anchor or
    :data:`SUCCESS` / :data:`FAILURE`. Returns ``(V, A_step)`` keyed by anchor and by (anchor, action).

    Unlike rollout records, such input can leave a state with no way to a boundary; at beta = 1 that raises
    :class:`CreditError`.
    """
    beta = check_beta(beta)
    ids: dict[Hashable, int] = {}
    acts: dict[str, int] = {}
    trip = [(ids.setdefault(s, len(ids)), acts.setdefault(a, len(acts)), x) for s, a, x in transitions]
    for _, _, x in trip:
        if x not in (SUCCESS, FAILURE):
            ids.setdefault(x, len(ids))
    S = len(ids)
    nxt = np.asarray([S if x == SUCCESS else S + 1 if x == FAILURE else ids[x] for _, _, x in trip], dtype=np.int64)
    tr = _Transitions(np.asarray([t[0] for t in trip], dtype=np.int64),
                      np.asarray([t[1] for t in trip], dtype=np.int64), nxt, S, len(acts))
    c = _solve(tr, None, beta=beta, depth=None, sigma_min=sigma_min, label=list(ids).__getitem__)
    names, anames = list(ids), list(acts)
    V = {names[i]: float(c.V[i]) for i in range(S)}
    A = {(names[s], anames[a]): float(v)
         for s, a, v in zip(c.sa_state.tolist(), c.sa_action.tolist(), c.A_step.tolist(), strict=True)}
    return V, A
