"""A greedy Sokoban demonstrator: walk to the nearest push that brings a box closer to a free target, never plan."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .level import ACTIONS, Level

__all__ = ["greedy_action", "greedy_plan", "greedy_policy"]


def _walk(level: Level, deltas: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """Cells the player reaches without pushing: cell -> (distance, index of the first action on a shortest walk)."""
    start = level.player
    out: dict[int, tuple[int, int]] = {start: (0, -1)}
    queue = deque([start])
    while queue:
        x = queue.popleft()
        dist, first = out[x]
        for a, d in enumerate(deltas):
            y = x + d
            if y not in level.walls and y not in level.boxes and y not in out:
                out[y] = (dist + 1, a if first < 0 else first)
                queue.append(y)
    return out


def greedy_action(level: Level) -> str | None:
    """The greedy demonstrator's action in ``level``, or None when it is stuck (or the level is solved).

    Of every push the player can walk to that moves a box not on a target one cell closer (Manhattan distance) to
    its nearest free target, take the one with the shortest walk (ties: the box with the lowest index, then the
    action order); walk toward it, or push when there. It ignores walls between box and target and never looks
    ahead, so it pushes boxes into dead ends that an optimal solver walks around: a reasonable but suboptimal
    policy that imitation can copy and RL can surpass.
    """
    w = level.shape[1]
    deltas = (-w, w, -1, 1)
    free_targets = sorted(level.targets - level.boxes)
    if not free_targets:
        return None

    def gap(cell: int) -> int:
        r, c = divmod(cell, w)
        return min(abs(r - t // w) + abs(c - t % w) for t in free_targets)

    reach = _walk(level, deltas)
    best: tuple[int, int, int] | None = None  # (walk distance, box, action)
    for box in sorted(level.boxes - level.targets):
        now = gap(box)
        for a, d in enumerate(deltas):
            stand, dest = box - d, box + d
            if stand not in reach or dest in level.walls or dest in level.boxes or gap(dest) >= now:
                continue
            cand = (reach[stand][0], box, a)
            if best is None or cand < best:
                best = cand
    if best is None:
        return None
    dist, box, a = best
    stand = box - deltas[a]
    return ACTIONS[a] if dist == 0 else ACTIONS[reach[stand][1]]


def greedy_plan(level: Level, *, max_steps: int = 100) -> tuple[list[str], bool]:
    """The greedy demonstrator's actions from ``level`` until it solves the level, gets stuck or uses
    ``max_steps``; returns ``(actions, solved)``."""
    from .solver import next_level

    actions: list[str] = []
    while len(actions) < max_steps and not level.solved:
        a = greedy_action(level)
        if a is None:
            break
        actions.append(a)
        level = next_level(level, a)
    return actions, level.solved


def greedy_policy(env: Any) -> Callable[[Any, dict[str, Any]], str]:
    """The greedy demonstrator for a Sokoban env: ``policy(obs, info) -> action`` from ``env.unwrapped``'s current
    state (``up`` when it is stuck)."""
    base = env.unwrapped

    def policy(obs: Any, info: dict[str, Any]) -> str:
        return greedy_action(base.level) or ACTIONS[0]

    return policy
