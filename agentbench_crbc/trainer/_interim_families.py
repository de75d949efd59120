"""INTERIM (delete at merge): the built-in families' specs until ``envs/*/family.py`` register the real ones.

Used only when the plugin host has no family at all (a branch without the families' entry points); the trainer
then reads these specs through the same :class:`~agentbench_crbc.family.EnvFamily` fields it reads from the real
ones. The lead deletes this module and the one call in :mod:`agentbench_crbc.trainer.families` at merge time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..family import EnvFamily, EnvId, is_heldout

__all__ = ["INTERIM_FAMILIES", "sokoban_imitation", "sokoban_task_key"]

_SOKO = "agentbench_crbc.envs.sokoban.env:SokobanEnv"
_SOKO_IDS = {"abc/Sokoban-v0": (6, 1, 15, "rgb"), "abc/SokobanText-v0": (6, 1, 15, "text"),
             "abc/SokobanTiny-v0": (6, 1, 15, "tiny_rgb"), "abc/Sokoban-7x7-2b-v0": (7, 2, 30, "rgb"),
             "abc/SokobanText-7x7-2b-v0": (7, 2, 30, "text"), "abc/Sokoban-10x10-3b-v0": (10, 3, 100, "rgb"),
             "abc/Sokoban-10x10-4b-v0": (10, 4, 120, "rgb")}


def sokoban_task_key(env: Any) -> str | None:
    """The level's canonical form over the 8 symmetries, or None."""
    level = getattr(env.unwrapped, "level", None)
    if level is None:
        return None
    from agentbench_crbc.envs.sokoban.level import canonical_key

    return canonical_key(level)


def sokoban_imitation(env_id: str, env_kwargs: dict[str, Any], build_prompt: Callable[[Any, dict], tuple[int, ...]],
                      *, seeds: Sequence[int], pool: int, augment: bool, all_optimal: bool
                      ) -> tuple[Callable[[np.random.Generator], tuple[tuple[int, ...], str]], int]:
    """Every state along a solver-optimal plan of each training level; samples a random symmetry of a state and a
    target drawn from all its optimal actions (mapped alike)."""
    import gymnasium as gym

    from agentbench_crbc.envs.sokoban.level import dihedral, dihedral_action
    from agentbench_crbc.envs.sokoban.solver import next_level, optimal_actions, solve

    env = gym.make(env_id, **env_kwargs)
    states: list[Any] = []
    for seed in seeds:
        env.reset(seed=int(seed))
        if is_heldout(sokoban_task_key(env)):
            continue
        level = env.unwrapped.level  # type: ignore[attr-defined]
        plan = solve(level) or []
        for a in plan:
            states.append(level)
            level = next_level(level, a)
        if len(states) >= pool:
            break
    env.close()
    opt = [sorted(optimal_actions(s)) for s in states]
    prompt_cache: dict[Any, tuple[int, ...]] = {}

    def sample(rng: np.random.Generator) -> tuple[tuple[int, ...], str]:
        i = int(rng.integers(len(states)))
        k = int(rng.integers(8)) if augment else 0
        acts = opt[i] if all_optimal else opt[i][:1]
        a = acts[int(rng.integers(len(acts)))]
        if (i, k) not in prompt_cache:
            lvl = dihedral(states[i], k) if k else states[i]
            prompt_cache[(i, k)] = build_prompt(lvl.to_text(), {"text": lvl.to_text()})
        return prompt_cache[(i, k)], dihedral_action(a, k) if k else a

    return sample, len(states)


def _table(steps: int) -> dict[str, Any]:
    """What ``--env NAME`` changes in the CPU demo (a tiny model, no warm start: an end-to-end smoke run)."""
    return {"env": {"max_steps": steps, "template": "paper"},
            "rollout": {"max_prompt_tokens": 1024, "max_response_tokens": 24}, "sft": {"steps": 0}}


INTERIM_FAMILIES: tuple[EnvFamily, ...] = (
    EnvFamily(name="sokoban", label="Sokoban", default_id="abc/SokobanText-v0",
              ids=tuple(EnvId(i, _SOKO, steps, {"size": size, "num_boxes": boxes, "max_steps": steps, "obs_mode": mode},
                              observation="text" if mode == "text" else "rgb")
                        for i, (size, boxes, steps, mode) in _SOKO_IDS.items()),
              expert="agentbench_crbc.envs.sokoban.solver:expert_policy",
              task_key="agentbench_crbc.trainer._interim_families:sokoban_task_key",
              imitation="agentbench_crbc.trainer._interim_families:sokoban_imitation"),
    EnvFamily(name="alfworld", label="ALFWorld", default_id="abc/ALFWorld-v0",
              ids=(EnvId("abc/ALFWorld-v0", "agentbench_crbc.envs.alfworld.env:ALFWorldEnv", 50),),
              expert="agentbench_crbc.envs.alfworld.expert:expert_policy", extra="alfworld", training=_table(50)),
    EnvFamily(name="webshop", label="WebShop", default_id="abc/WebShop-v0",
              ids=(EnvId("abc/WebShop-v0", "agentbench_crbc.envs.webshop.env:WebShopEnv", 15,
                         {"mode": "text", "split": "train", "anchor": "page"}),),
              expert="agentbench_crbc.envs.webshop.oracle:oracle_policy", extra="webshop", training=_table(15)),
)
