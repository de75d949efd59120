"""Enumerated task graphs to MDP dicts, with behaviour policies built from the exact remaining optimal distance."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .mdp import MdpError

__all__ = ["FAILURE", "POLICIES", "SUCCESS", "TaskGraph", "distances", "reachable"]

#: Behaviour policy kinds: ``eps`` (1 - eps uniform over optimal moves, eps uniform over all) and ``boltzmann``
#: (softmax of minus the remaining optimal distance after the move, over a temperature).
POLICIES = ("eps", "boltzmann")

SUCCESS, FAILURE = "__success__", "__failure__"


@dataclass
class TaskGraph:
    """States, their actions and outcome distributions, and the intended (no-slip) successor for distances.

    ``moves[state]`` maps each action name to ``(outcome distribution, intended successor)``; the successors
    :data:`SUCCESS` and :data:`FAILURE` are the terminals.
    """

    start: str
    anchors: dict[str, str] = field(default_factory=dict)
    moves: dict[str, dict[str, tuple[dict[str, float], str]]] = field(default_factory=dict)

    def to_dict(self, *, name: str, horizon: int, policy: str = "eps", eps: float = 0.2,
                temperature: float = 1.0) -> dict[str, Any]:
        """The MDP in the JSON schema, with the chosen behaviour policy."""
        if policy not in POLICIES:
            raise MdpError(f"policy={policy!r}; choose one of {', '.join(POLICIES)}")
        dist = distances(self.moves)
        cap = horizon + 1  # a move into a dead state is as bad as running out of steps
        states: dict[str, Any] = {}
        for s, acts in self.moves.items():
            d_next = {a: min(dist.get(nxt, math.inf), cap) for a, (_, nxt) in acts.items()}
            if policy == "eps":
                best = min(d_next.values())
                opt = [a for a, d in d_next.items() if d == best and best < min(dist.get(s, math.inf), cap)]
                n = len(acts)
                probs = {a: eps / n + ((1 - eps) / len(opt) if a in opt else 0.0) if opt else 1 / n for a in acts}
            else:
                lo = min(d_next.values())
                w = {a: math.exp(-(d - lo) / temperature) for a, d in d_next.items()}
                z = math.fsum(w.values())
                probs = {a: v / z for a, v in w.items()}
            states[s] = {"anchor": self.anchors.get(s, s),
                         "actions": {a: {"policy": probs[a], "next": out} for a, (out, _) in acts.items()}}
        return {"name": name, "horizon": horizon, "start": {self.start: 1.0}, "success": [SUCCESS],
                "failure": [FAILURE], "states": states}


def distances(moves: Mapping[str, Mapping[str, tuple[Any, str]]]) -> dict[str, float]:
    """Fewest intended moves from each state to success (backward breadth-first search); unreachable: absent."""
    back: dict[str, list[str]] = {}
    for s, acts in moves.items():
        for _, nxt in acts.values():
            back.setdefault(nxt, []).append(s)
    dist: dict[str, float] = {SUCCESS: 0}
    queue = deque([SUCCESS])
    while queue:
        x = queue.popleft()
        for prev in back.get(x, ()):
            if prev not in dist:
                dist[prev] = dist[x] + 1
                queue.append(prev)
    return dist


def reachable(start: str, successors: Callable[[str], Iterable[str]]) -> list[str]:
    """States reachable from ``start`` in breadth-first order; ``successors(state) -> Sequence[str]``."""
    seen = {start}
    order = [start]
    queue = deque([start])
    while queue:
        for nxt in successors(queue.popleft()):
            if nxt not in seen and nxt not in (SUCCESS, FAILURE):
                seen.add(nxt)
                order.append(nxt)
                queue.append(nxt)
    return order

