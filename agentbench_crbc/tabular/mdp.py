"""A finite MDP with success/failure terminals and a behaviour policy, loaded from the documented JSON schema.

Schema (``docs/fidelity.md``)::

    {"horizon": 10, "start": {"s0": 1.0}, "success": ["goal"], "failure": ["pit"],
     "states": {"s0": {"anchor": "s0", "actions": {"left":  {"policy": 0.5, "next": {"s1": 1.0}},
                                                   "right": {"policy": 0.5, "next": {"s0": 0.3, "goal": 0.7}}}}}}

Every problem raises :class:`MdpError`, one line naming the JSON path (``states.s0.actions.left.next``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError
from ..io import read_json

__all__ = ["MAX_CELLS", "MAX_HORIZON", "TOLERANCE", "MdpError", "TabularMDP", "load_mdp", "mdp_from_dict"]

#: Policies and transition rows must sum to 1 within this.
TOLERANCE = 1e-9
#: The longest horizon accepted (the paper's envs use 15-50 steps).
MAX_HORIZON = 100_000
#: Exact DP holds Q as (horizon + 1) x states x actions float64s: at most this many cells (about 800 MB).
MAX_CELLS = 100_000_000


class MdpError(ConfigError):
    """A tabular MDP file or dict that breaks the schema; the message names the JSON path."""


@dataclass(frozen=True, eq=False)
class TabularMDP:
    """A finite-horizon MDP: non-terminal states ``0..S-1``, the success sink ``S`` and the failure sink ``S+1``.

    Actions are padded to ``A = max actions per state``; ``mask[s, a]`` marks real ones.

    :param name: a label for tables.
    :param horizon: T; running out of steps is failure, as in the environments.
    :param states: names of the non-terminal states.
    :param anchors: the anchor of each state (states may share one: coarse anchors).
    :param actions: each state's action names.
    :param policy: ``(S, A)`` behaviour policy pi(a|s), 0 on padding.
    :param start: ``(S,)`` start distribution.
    :param transitions: CSR ``(S * A, S + 2)``: row ``s * A + a`` is P(. | s, a); padding rows are empty.
    :param success: names of the success terminals (all map to the sink ``S``).
    :param failure: names of the failure terminals (sink ``S + 1``).
    """

    name: str
    horizon: int
    states: tuple[str, ...]
    anchors: tuple[str, ...]
    actions: tuple[tuple[str, ...], ...]
    policy: np.ndarray
    start: np.ndarray
    transitions: sp.csr_matrix
    success: tuple[str, ...] = ()
    failure: tuple[str, ...] = ()

    @property
    def n_states(self) -> int:
        """S, the number of non-terminal states."""
        return len(self.states)

    @property
    def n_actions(self) -> int:
        """A, the padded action count."""
        return int(self.policy.shape[1])

    @property
    def mask(self) -> np.ndarray:
        """``(S, A)`` bool: which padded actions exist."""
        counts = np.fromiter(map(len, self.actions), dtype=np.int64, count=self.n_states)
        return np.arange(self.n_actions)[None, :] < counts[:, None]

    def with_policy(self, policy: np.ndarray, name: str | None = None) -> TabularMDP:
        """The same MDP with another behaviour policy (``(S, A)``, rows summing to 1 over real actions)."""
        policy = np.asarray(policy, dtype=np.float64)
        if policy.shape != self.policy.shape:
            raise MdpError(f"policy shape {policy.shape} must be {self.policy.shape}")
        return TabularMDP(name or self.name, self.horizon, self.states, self.anchors, self.actions, policy,
                          self.start, self.transitions, self.success, self.failure)

    def to_dict(self) -> dict[str, Any]:
        """The JSON schema form (``mdp_from_dict(m.to_dict())`` rebuilds an equal MDP)."""
        A = self.n_actions
        names = [*self.states, self.success[0] if self.success else "__success__",
                 self.failure[0] if self.failure else "__failure__"]
        P = self.transitions
        states: dict[str, Any] = {}
        for s, sname in enumerate(self.states):
            acts: dict[str, Any] = {}
            for a, aname in enumerate(self.actions[s]):
                lo, hi = P.indptr[s * A + a], P.indptr[s * A + a + 1]
                nxt = {names[j]: float(p) for j, p in zip(P.indices[lo:hi].tolist(), P.data[lo:hi].tolist(),
                                                           strict=True)}
                acts[aname] = {"policy": float(self.policy[s, a]), "next": nxt}
            states[sname] = {"anchor": self.anchors[s], "actions": acts}
        start = {self.states[s]: float(p) for s in np.flatnonzero(self.start).tolist() for p in [self.start[s]]}
        return {"name": self.name, "horizon": self.horizon, "start": start,
                "success": list(self.success) or ["__success__"], "failure": list(self.failure) or ["__failure__"],
                "states": states}


def _fail(path: str, message: str) -> MdpError:
    return MdpError(f"{path}: {message}" if path else message)


def _prob(value: Any, path: str) -> float:
    if isinstance(value, int) and not isinstance(value, bool) and not -2 <= value <= 2:  # 400 digits: no float
        raise _fail(path, f"must be a probability in [0, 1], got an integer of {len(str(abs(value)))} digits")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(path, f"must be a finite number, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise _fail(path, f"must be a probability in [0, 1], got {value!r}")
    return float(value)


def _obj(value: Any, path: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"must be an object of {what}, got {type(value).__name__}")
    if not value:
        raise _fail(path, f"is empty; give at least one of {what}")
    return value


def _sums_to_one(total: float, path: str, what: str) -> None:
    if abs(total - 1.0) > TOLERANCE:
        raise _fail(path, f"{what} sum to {total:.12g}, must sum to 1 (within {TOLERANCE:g})")


def _action(aspec: Any, ahere: str, index: Mapping[str, int], terminal_col: Mapping[str, int]
            ) -> tuple[float, list[int], list[float]]:
    """One action of the schema: its policy probability, and the columns (a state's index, or a terminal's sink)
    and probabilities of its next states."""
    if not isinstance(aspec, Mapping) or set(aspec) != {"policy", "next"}:
        raise _fail(ahere, "must be an object with exactly 'policy' and 'next'")
    prob = _prob(aspec["policy"], f"{ahere}.policy")
    nxt = _obj(aspec["next"], f"{ahere}.next", "next states")
    cols, probs = [], []
    for target, p in nxt.items():
        if target in index:
            cols.append(index[target])
        elif target in terminal_col:
            cols.append(terminal_col[target])
        else:
            raise _fail(f"{ahere}.next.{target}", f"state {target!r} is not listed in states, success or failure")
        probs.append(_prob(p, f"{ahere}.next.{target}"))
    _sums_to_one(math.fsum(probs), f"{ahere}.next", "transition probabilities")
    return prob, cols, probs


def mdp_from_dict(data: Any, *, source: str = "", name: str | None = None) -> TabularMDP:
    """Validate and build a :class:`TabularMDP` from the JSON schema; errors name ``source`` and the JSON path.

    Only states reachable from ``start`` must be listed; listed but unreachable states are kept.
    """
    def where(path: str) -> str:
        return f"{source}: {path}" if source else path

    if not isinstance(data, Mapping):
        raise MdpError(f"{source or 'mdp'}: the top level must be a JSON object, got {type(data).__name__}")
    allowed = {"name", "horizon", "start", "success", "failure", "states"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _fail(where(unknown[0]), f"unknown key; allowed: {', '.join(sorted(allowed))}")
    for key in ("horizon", "start", "states"):
        if key not in data:
            raise _fail(where(key), "missing; see docs/fidelity.md for the schema")
    horizon = data["horizon"]
    if isinstance(horizon, bool) or not isinstance(horizon, int) or not 1 <= horizon <= MAX_HORIZON:
        shown = horizon if not isinstance(horizon, int) or len(str(horizon)) < 30 else \
            f"an integer of {len(str(abs(horizon)))} digits"
        raise _fail(where("horizon"), f"must be an integer in [1, {MAX_HORIZON}], got {shown!r}")
    terminals: dict[str, str] = {}
    for kind in ("success", "failure"):
        names = data.get(kind, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _fail(where(kind), f"must be a list of state names, got {names!r}")
        for i, n in enumerate(names):
            if n in terminals:
                raise _fail(where(f"{kind}[{i}]"), f"{n!r} is listed twice among the terminals")
            terminals[n] = kind
    states_in = _obj(data["states"], where("states"), "states")
    for n in states_in:
        if n in terminals:
            raise _fail(where(f"states.{n}"), f"{n!r} is also a {terminals[n]} terminal; terminals have no actions")
    states = tuple(states_in)
    index = {n: i for i, n in enumerate(states)}
    S = len(states)
    sink = {"success": S, "failure": S + 1}
    anchors: list[str] = []
    actions: list[tuple[str, ...]] = []
    rows: list[tuple[int, int, list[int], list[float]]] = []
    pols: list[list[float]] = []
    for sname, spec in states_in.items():
        here = where(f"states.{sname}")
        if not isinstance(spec, Mapping):
            raise _fail(here, f"must be an object with 'actions' (and 'anchor'), got {type(spec).__name__}")
        extra = sorted(set(spec) - {"anchor", "actions"})
        if extra:
            raise _fail(f"{here}.{extra[0]}", "unknown key; allowed: actions, anchor")
        anchor = spec.get("anchor", sname)
        if not isinstance(anchor, str):
            raise _fail(f"{here}.anchor", f"must be a string, got {anchor!r}")
        acts = _obj(spec.get("actions"), f"{here}.actions", "actions")
        pol: list[float] = []
        for aname, aspec in acts.items():
            ahere = f"{here}.actions.{aname}"
            prob, cols, probs = _action(aspec, ahere, index, {t: sink[k] for t, k in terminals.items()})
            pol.append(prob)
            rows.append((index[sname], len(pol) - 1, cols, probs))
        _sums_to_one(math.fsum(pol), f"{here}.actions", "policy probabilities")
        anchors.append(anchor)
        actions.append(tuple(acts))
        pols.append(pol)
    start_in = _obj(data["start"], where("start"), "start states")
    start = np.zeros(S)
    for sname, p in start_in.items():
        if sname not in index:
            raise _fail(where(f"start.{sname}"), f"{sname!r} must be a listed non-terminal state")
        start[index[sname]] = _prob(p, where(f"start.{sname}"))
    _sums_to_one(math.fsum(start.tolist()), where("start"), "start probabilities")
    A = max(map(len, actions))
    if (horizon + 1) * S * A > MAX_CELLS:
        raise _fail(where("horizon"), f"{horizon} steps x {S} states x {A} actions is more than exact DP's "
                                      f"{MAX_CELLS:,} cells; shorten the horizon or split the MDP")
    policy = np.zeros((S, A))
    for s, pol in enumerate(pols):
        policy[s, :len(pol)] = pol
    r_idx = [s * A + a for s, a, cols, _ in rows for _ in cols]
    c_idx = [c for *_, cols, _ in rows for c in cols]
    vals = [p for *_, probs in rows for p in probs]
    P = sp.csr_matrix((vals, (r_idx, c_idx)), shape=(S * A, S + 2))
    P.sum_duplicates()
    P.sort_indices()
    label = name or str(data.get("name") or (Path(source).stem if source else "mdp"))
    return TabularMDP(label, horizon, states, tuple(anchors), tuple(actions), policy, start, P,
                      tuple(n for n, k in terminals.items() if k == "success"),
                      tuple(n for n, k in terminals.items() if k == "failure"))


def load_mdp(path: str | Path) -> TabularMDP:
    """Read a JSON file in the schema; a missing file, bad JSON or a schema break raises :class:`MdpError`."""
    path = Path(path)
    data = read_json(path, error=MdpError)
    return mdp_from_dict(data, source=str(path))
