"""Sokoban's task key: the level's canonical form over the 8 symmetries, hashed into held-out splits."""

from __future__ import annotations

from typing import Any

__all__ = ["task_key"]


def task_key(env: Any) -> str | None:
    """A key equal for equivalent tasks (the level's canonical form over the 8 symmetries), or None without one."""
    level = getattr(env.unwrapped, "level", None)
    if level is None:
        return None
    from .level import canonical_key

    return canonical_key(level)
