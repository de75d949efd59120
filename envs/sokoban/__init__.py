"""Gymnasium-native Sokoban (pixel and text) with a seeded generator, an optimal solver and anchor extractors.

``import agentbench_crbc.envs`` registers the ids; everything else is imported on first use::

    env = gymnasium.make("abc/Sokoban-v0")            # 6x6, 1 box, 15 steps, RGB (the paper's setting)
    env = gymnasium.make("abc/SokobanText-v0")        # the same levels as a symbol grid
    env = gymnasium.make("abc/Sokoban-v0", size=8, num_boxes=2, max_steps=40, max_episode_steps=40)
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ACTIONS",
    "ENV_IDS",
    "Level",
    "SokobanEnv",
    "canonical_key",
    "dihedral",
    "dihedral_action",
    "expert_policy",
    "generate_level",
    "optimal_actions",
    "register_envs",
    "solve",
    "task_key",
]

from .family import SOKOBAN

#: id -> (size, boxes, step limit, observation mode), derived from the family spec (:data:`family.SOKOBAN`).
ENV_IDS: dict[str, tuple[int, int, int, str]] = {
    i.id: (i.kwargs["size"], i.kwargs["num_boxes"], i.max_episode_steps, i.kwargs["obs_mode"]) for i in SOKOBAN.ids
}

_LAZY = {
    "ACTIONS": "level",
    "Level": "level",
    "canonical_key": "level",
    "dihedral": "level",
    "dihedral_action": "level",
    "SokobanEnv": "env",
    "generate_level": "generator",
    "expert_policy": "solver",
    "optimal_actions": "solver",
    "solve": "solver",
    "task_key": "tasks",
}


def register_envs() -> None:
    """Register the ``abc/Sokoban*`` ids not registered yet (string entry points: imports nothing heavy)."""
    from agentbench_crbc.family import register_gym_ids

    register_gym_ids(SOKOBAN)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
