"""Sokoban's tabular twin: a level from the generator, every reachable state enumerated with the env's rules."""

from __future__ import annotations

from functools import partial
from typing import Any

from agentbench_crbc.tabular.graph import SUCCESS, TaskGraph, distances, reachable
from agentbench_crbc.tabular.mdp import MdpError

__all__ = ["TWIN", "sokoban_graph", "sokoban_mdp_dict"]


def sokoban_graph(seed: int, *, size: int = 6, boxes: int = 1, max_moves: int | None = None) -> TaskGraph:
    """Enumerate the level ``generate_level(seed, size=size, num_boxes=boxes)``: states are the symbol grids (the
    env's ``text`` anchor), actions the four moves, solved grids the success terminal. Deadlocks are not terminal,
    as in the env: an episode in one runs out of steps."""
    from .generator import generate_level
    from .level import ACTIONS, Level
    from .solver import next_level

    start = generate_level(seed, size=size, num_boxes=boxes, max_moves=max_moves)
    levels: dict[str, Level] = {start.to_text(): start}
    nexts: dict[str, list[str]] = {}

    def successors(name: str) -> list[str]:
        level = levels[name]
        out = []
        for i in range(len(ACTIONS)):
            nxt = next_level(level, i)
            key = SUCCESS if nxt.solved else nxt.to_text()
            if key != SUCCESS:
                levels.setdefault(key, nxt)
            out.append(key)
        nexts[name] = out
        return out

    graph = TaskGraph(start=start.to_text())
    for name in reachable(graph.start, successors):
        graph.moves[name] = {a: ({nxt: 1.0}, nxt) for a, nxt in zip(ACTIONS, nexts[name], strict=True)}
    return graph


def sokoban_mdp_dict(seed: int, *, size: int = 6, boxes: int = 1, horizon: int = 15, min_moves: int = 1,
                     policy: str = "eps", eps: float = 0.2, temperature: float = 1.0) -> dict[str, Any]:
    """The MDP of the first level from ``seed`` on whose optimal solution takes at least ``min_moves`` moves
    (``horizon`` = the env's step limit; levels are solvable within it), in the JSON schema."""
    for seed in range(seed, seed + 1000):  # noqa: B020  the seed actually used names the MDP
        graph = sokoban_graph(seed, size=size, boxes=boxes, max_moves=horizon)
        if distances(graph.moves).get(graph.start, 0) >= min_moves:
            break
    else:
        raise MdpError(f"no {size}x{size} level with {boxes} boxes needing >= {min_moves} moves in 1000 seeds")
    return graph.to_dict(name=f"sokoban-{size}x{size}-{boxes}box-s{seed}", horizon=horizon, policy=policy, eps=eps,
                         temperature=temperature)


def _sok(label: str, **kw: Any) -> tuple[str, Any]:
    return label, partial(sokoban_mdp_dict, 0, **kw)


_SOKOBAN_66 = {"size": 6, "boxes": 1, "horizon": 15, "min_moves": 10}
_SOKOBAN_77 = {"size": 7, "boxes": 2, "horizon": 20, "min_moves": 8}

#: The fidelity benchmark's settings (``quick``/``full``: ``(label, build() -> MDP dict)``) and learning task.
TWIN: dict[str, Any] = {
    "quick": [_sok("6x6-eps0.3", **_SOKOBAN_66, eps=0.3)],
    "full": [_sok("6x6-eps0.2", **_SOKOBAN_66, eps=0.2), _sok("6x6-eps0.5", **_SOKOBAN_66, eps=0.5),
             _sok("6x6-boltz0.5", **_SOKOBAN_66, policy="boltzmann", temperature=0.5),
             _sok("6x6-boltz1", **_SOKOBAN_66, policy="boltzmann", temperature=1.0),
             _sok("6x6-boltz2", **_SOKOBAN_66, policy="boltzmann", temperature=2.0),
             _sok("7x7x2-eps0.3", **_SOKOBAN_77, eps=0.3),
             _sok("7x7x2-boltz1", **_SOKOBAN_77, policy="boltzmann", temperature=1.0)],
    "learn": _sok("7x7x2-learn", **_SOKOBAN_77, policy="boltzmann", temperature=1.5),
}
