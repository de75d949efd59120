"""Move-optimal Sokoban solver (A* over player and boxes, push-distance heuristic) and expert policy."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from agentbench_crbc.errors import ConfigError, EnvError

from .level import ACTIONS, Level, parse_action

__all__ = ["env_optimal_actions", "expert_policy", "next_level", "optimal_actions", "solution_length", "solve"]

_INF = 1 << 30


def _deltas(level: Level) -> tuple[int, int, int, int]:
    w = level.shape[1]
    return (-w, w, -1, 1)


def next_level(level: Level, action: str | int) -> Level:
    """The level after one action (gym-sokoban's rules: walk, or push a box into a free cell, never pull)."""
    index = action if isinstance(action, int) else parse_action(action)
    if index is None or not 0 <= index < 4:
        raise ConfigError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    d = _deltas(level)[index]
    nxt = level.player + d
    if nxt in level.walls:
        return level
    boxes = level.boxes
    if nxt in boxes:
        beyond = nxt + d
        if beyond in level.walls or beyond in boxes:
            return level
        boxes = (boxes - {nxt}) | {beyond}
    return Level.unchecked(level.shape, level.walls, level.targets, boxes, nxt)


def _push_distances(level: Level) -> list[int]:
    """Fewest pushes that bring a box from each cell to a target, ignoring other boxes (_INF: a dead cell)."""
    h, w = level.shape
    free = [i not in level.walls for i in range(h * w)]
    dist = [_INF] * (h * w)
    queue = deque(level.targets)
    for t in level.targets:
        dist[t] = 0
    while queue:
        y = queue.popleft()
        for d in _deltas(level):  # a box at x = y - d is pushed to y by a player standing at x - d
            x = y - d
            if free[x] and free[x - d] and dist[x] == _INF:
                dist[x] = dist[y] + 1
                queue.append(x)
    return dist


def solve(level: Level, *, max_nodes: int = 2_000_000) -> list[str] | None:
    """A shortest plan (fewest moves, pushes included) from ``level`` to all boxes on targets.

    The heuristic, the sum over boxes of push distances to the nearest target, never overestimates and changes
    by at most one per move, so the first plan found is optimal.

    :param max_nodes: expansions before giving up with :class:`EnvError` (bounds time on large levels).
    :returns: the actions, ``[]`` if already solved, ``None`` if the level cannot be solved.
    """
    h, w = level.shape
    free = [i not in level.walls for i in range(h * w)]
    dist = _push_distances(level)
    deltas = _deltas(level)
    goal = sum(1 << t for t in level.targets)
    boxes0 = sum(1 << b for b in level.boxes)
    h0 = sum(dist[b] for b in level.boxes)
    if h0 >= _INF:
        return None
    start = (level.player, boxes0)
    best = {start: 0}
    parent: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}
    heap = [(h0, 0, 0, level.player, boxes0, h0)]
    counter = expanded = 0
    while heap:
        _, neg_g, _, player, boxes, hval = heapq.heappop(heap)
        g = -neg_g
        if best[(player, boxes)] < g:
            continue
        if boxes == goal:
            plan: list[str] = []
            state = (player, boxes)
            while state != start:
                state, a = parent[state]
                plan.append(ACTIONS[a])
            return plan[::-1]
        expanded += 1
        if expanded > max_nodes:
            raise EnvError(
                f"solver gave up after {max_nodes} expansions on a {h}x{w} level with "
                f"{len(level.boxes)} boxes; pass a larger max_nodes"
            )
        for a, d in enumerate(deltas):
            nxt = player + d
            if not free[nxt]:
                continue
            nb, nh = boxes, hval
            if boxes >> nxt & 1:
                beyond = nxt + d
                if not free[beyond] or boxes >> beyond & 1 or dist[beyond] >= _INF:
                    continue
                nb = boxes ^ (1 << nxt) ^ (1 << beyond)
                nh = hval - dist[nxt] + dist[beyond]
            key = (nxt, nb)
            if g + 1 < best.get(key, _INF):
                best[key] = g + 1
                parent[key] = ((player, boxes), a)
                counter += 1
                heapq.heappush(heap, (g + 1 + nh, -(g + 1), counter, nxt, nb, nh))
    return None


@lru_cache(maxsize=65536)
def solution_length(level: Level) -> int | None:
    """Moves of an optimal plan from ``level`` (cached), or None if it cannot be solved."""
    plan = solve(level)
    return None if plan is None else len(plan)


def optimal_actions(level: Level) -> frozenset[str]:
    """Every action that begins some optimal plan from ``level`` (empty if solved or unsolvable); imitation
    targets drawn from this set do not favour one of several equally short plans."""
    n = solution_length(level)
    if not n:
        return frozenset()
    out = set()
    for action in ACTIONS:
        after = next_level(level, action)
        if after != level and solution_length(after) == n - 1:
            out.add(action)
    return frozenset(out)


def env_optimal_actions(env: Any) -> frozenset[str]:
    """The family's ``optimal_actions`` hook: :func:`optimal_actions` of a live env's current level."""
    return optimal_actions(env.unwrapped.level)


def expert_policy(env: Any) -> Callable[[Any, dict[str, Any]], str]:
    """An optimal policy for a Sokoban env: ``policy(obs, info) -> action``, planning from ``env.unwrapped``'s
    current state (re-planning whenever the state is not the one its plan expected)."""
    base = env.unwrapped
    cache: dict[Level, str] = {}

    def policy(obs: Any, info: dict[str, Any]) -> str:
        level = base.level
        if level not in cache:
            cache.clear()
            plan = solve(level)
            if not plan:
                return ACTIONS[0]
            state = level
            for action in plan:
                cache[state] = action
                state = next_level(state, action)
        return cache[level]

    return policy
