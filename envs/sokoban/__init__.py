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
]

_ENTRY_POINT = "agentbench_crbc.envs.sokoban.env:SokobanEnv"

#: id -> (size, boxes, step limit, observation mode).
ENV_IDS: dict[str, tuple[int, int, int, str]] = {
    "abc/Sokoban-v0": (6, 1, 15, "rgb"),
    "abc/SokobanText-v0": (6, 1, 15, "text"),
    "abc/SokobanTiny-v0": (6, 1, 15, "tiny_rgb"),
    "abc/Sokoban-7x7-2b-v0": (7, 2, 30, "rgb"),
    "abc/SokobanText-7x7-2b-v0": (7, 2, 30, "text"),
    "abc/Sokoban-10x10-3b-v0": (10, 3, 100, "rgb"),
    "abc/Sokoban-10x10-4b-v0": (10, 4, 120, "rgb"),
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
}


def register_envs() -> None:
    """Register the ``abc/Sokoban*`` ids not registered yet (string entry points: imports nothing heavy)."""
    import gymnasium

    for env_id, (size, boxes, steps, obs_mode) in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point=_ENTRY_POINT,
                max_episode_steps=steps,
                kwargs={"size": size, "num_boxes": boxes, "max_steps": steps, "obs_mode": obs_mode},
            )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
