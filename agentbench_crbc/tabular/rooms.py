"""A generic fetch-and-place MDP (the ``rooms`` fidelity setting): rooms with receptacles, loops, revisits, dead ends.

It belongs to no environment family and reads nothing from one: its words (``go to``, ``take``, ``put``,
receptacle names) only make the states readable; the structure is what the fidelity benchmark measures.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .graph import FAILURE, SUCCESS, TaskGraph, reachable
from .mdp import MdpError

__all__ = ["ANCHORS", "rooms_graph", "rooms_mdp_dict"]

#: ``state``: one anchor per state; ``observation``: what the agent sees (where it is, what it holds, whether the
#: object lies here), so states that differ only in where an unseen object lies share an anchor (coarse anchors).
ANCHORS = ("state", "observation")

_ROOMS = ("kitchen", "livingroom", "bedroom", "bathroom", "office", "hallway", "pantry", "study")
_KINDS = ("countertop", "cabinet", "drawer", "shelf", "sinkbasin", "fridge", "desk", "sofa", "dresser", "sidetable",
          "stoveburner", "microwave")
_OBJECTS = ("apple", "mug", "book", "keychain", "spraybottle", "pencil", "tomato", "cd")
_MIDDLE = "middle"
_TRAP = "cellar"


def rooms_graph(seed: int, *, rooms: int = 2, receptacles: int = 3, slip: float = 0.0, trap: bool = True,
                anchors: str = "state") -> TaskGraph:
    """A seeded put-the-object task: the object lies on one receptacle, the goal is to put it in another one.

    Each room has ``receptacles`` receptacles and a middle (where one arrives from the room next door); rooms
    form a corridor. ``look`` and ``examine`` never change the state (action loops); ``put`` into the garbage can
    destroys the object (a failure terminal); with ``trap`` the cellar door off the first room locks behind the
    agent (a dead end that is not terminal: the episode runs out of steps). With probability ``slip`` a moving
    action does nothing.
    """
    if rooms < 1 or receptacles < 1 or rooms > len(_ROOMS):
        raise MdpError(f"rooms must be in 1..{len(_ROOMS)} and receptacles >= 1, got {rooms} and {receptacles}")
    if not 0.0 <= slip < 1.0:
        raise MdpError(f"slip must be in [0, 1), got {slip}")
    if anchors not in ANCHORS:
        raise MdpError(f"anchors={anchors!r}; choose one of {', '.join(ANCHORS)}")
    rng = np.random.default_rng(seed)
    names = list(_ROOMS[:rooms])
    kinds = [str(k) for k in rng.permutation(_KINDS)]
    places: dict[str, list[str]] = {}
    counter: dict[str, int] = {}
    for i, room in enumerate(names):
        places[room] = []
        for j in range(receptacles):
            kind = kinds[(i * receptacles + j) % len(kinds)]
            counter[kind] = counter.get(kind, 0) + 1
            places[room].append(f"{kind} {counter[kind]}")
    places[names[-1]].append("garbagecan 1")
    spots = [p for r in names for p in places[r] if p != "garbagecan 1"]
    if len(spots) < 2:
        raise MdpError("the task needs at least two receptacles besides the garbage can")
    obj = str(rng.choice(_OBJECTS))
    src, goal = (spots[i] for i in rng.choice(len(spots), size=2, replace=False))

    def name(room: str, loc: str, where: str) -> str:
        return f"{room}|{loc}|{where}"

    def anchor(room: str, loc: str, where: str) -> str:
        if anchors == "state":
            return name(room, loc, where)
        held = f" You hold the {obj}." if where == "hand" else ""
        seen = f" You see the {obj}." if where == loc else ""
        return f"You are in the {room}, at the {loc}.{held}{seen}"

    def moves(state: str) -> dict[str, tuple[dict[str, float], str]]:
        room, loc, where = state.split("|")
        out: dict[str, tuple[dict[str, float], str]] = {"look": ({state: 1.0}, state)}
        if room == _TRAP:
            out["go to door"] = ({state: 1.0}, state)  # locked
            return out

        def go(nxt: str) -> tuple[dict[str, float], str]:
            return ({nxt: 1.0 - slip, state: slip} if slip else {nxt: 1.0}), nxt

        for p in places[room]:
            if p != loc:
                out[f"go to {p}"] = go(name(room, p, where))
        i = names.index(room)
        for j in (i - 1, i + 1):
            if 0 <= j < len(names):
                out[f"go to {names[j]}"] = go(name(names[j], _MIDDLE, where))
        if trap and i == 0:
            out[f"go to {_TRAP}"] = go(name(_TRAP, _MIDDLE, where))
        if loc != _MIDDLE:
            out[f"examine {loc}"] = ({state: 1.0}, state)
            if where == loc:
                out[f"take {obj} from {loc}"] = go(name(room, loc, "hand"))
            elif where == "hand":
                target = SUCCESS if loc == goal else FAILURE if loc == "garbagecan 1" else name(room, loc, loc)
                out[f"put {obj} in/on {loc}"] = go(target)
        return out

    start = name(names[0], _MIDDLE, src)
    graph = TaskGraph(start=start)
    table: dict[str, dict[str, tuple[dict[str, float], str]]] = {}

    def successors(state: str) -> list[str]:
        table[state] = moves(state)
        return [nxt for _, nxt in table[state].values()]

    for s in reachable(start, successors):
        graph.moves[s] = table[s]
        room, loc, where = s.split("|")
        graph.anchors[s] = anchor(room, loc, where)
    return graph


def rooms_mdp_dict(seed: int, *, rooms: int = 2, receptacles: int = 3, horizon: int = 20, slip: float = 0.0,
                   trap: bool = True, anchors: str = "state", policy: str = "eps", eps: float = 0.2,
                   temperature: float = 1.0) -> dict[str, Any]:
    """The task's MDP in the JSON schema, with the chosen behaviour policy."""
    graph = rooms_graph(seed, rooms=rooms, receptacles=receptacles, slip=slip, trap=trap, anchors=anchors)
    label = f"rooms-{rooms}x{receptacles}-s{seed}" + ("-obs" if anchors == "observation" else "")
    return graph.to_dict(name=label, horizon=horizon, policy=policy, eps=eps, temperature=temperature)
