"""Sokoban's task key (the level's canonical form, hashed into held-out splits) and its subtasks (plan lengths)."""

from __future__ import annotations

from typing import Any

__all__ = ["PLAN_SUBTASKS", "SIZE_SUBTASKS", "plan_subtask", "task_key"]

#: A level's subtask on the boards: the length of its optimal plan, exact to 4 moves (the CPU demo's levels), then
#: in doubling ranges; "0 moves" for a level given already solved, "unsolvable" for one that cannot be.
PLAN_SUBTASKS = ("0 moves", "1 move", "2 moves", "3 moves", "4 moves", "5-8 moves", "9-16 moves", "17-32 moves",
                 "33+ moves", "unsolvable")
#: The size-and-boxes subtasks of the registered ids whose levels take seconds to solve (``subtask="size"``).
SIZE_SUBTASKS = ("10x10-3box", "10x10-4box")


def task_key(env: Any) -> str | None:
    """A key equal for equivalent tasks (the level's canonical form over the 8 symmetries), or None without one."""
    level = getattr(env.unwrapped, "level", None)
    if level is None:
        return None
    from .level import canonical_key

    return canonical_key(level)


def plan_subtask(moves: int | None) -> str:
    """The :data:`PLAN_SUBTASKS` name of an optimal plan of ``moves`` moves (``None``: unsolvable)."""
    if moves is None:
        return "unsolvable"
    if moves <= 4:
        return "1 move" if moves == 1 else f"{moves} moves"
    for low in (5, 9, 17):
        if moves < 2 * low - 1:
            return f"{low}-{2 * low - 2} moves"
    return "33+ moves"
