"""Sokoban's imitation data: every state along optimal plans, drawn under the 8 symmetries with all optimal targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agentbench_crbc.family import is_heldout

__all__ = ["imitation_data"]


def imitation_data(env_id: str, env_kwargs: dict[str, Any],
                   build_prompt: Callable[[Any, dict[str, Any]], tuple[int, ...]], *, seeds: Sequence[int],
                   pool: int, augment: bool, all_optimal: bool
                   ) -> tuple[Callable[[np.random.Generator], tuple[tuple[int, ...], str]], int]:
    """Solver-labelled states from the training levels of ``seeds`` (held-out levels skipped, by task key).

    ``sample(rng)`` draws a stored state, with ``augment`` one of its 8 symmetries, and an optimal action (with
    ``all_optimal`` any of them, else the first in sorted order), mapped alike; it returns the prompt ids
    ``build_prompt(grid, {"text": grid})`` gives and the action's text.

    :returns: ``(sample, number_of_states)``.
    """
    import gymnasium as gym

    from agentbench_crbc.family import ensure_gym_ids

    from .level import dihedral, dihedral_action
    from .solver import next_level, optimal_actions, solve
    from .tasks import task_key

    ensure_gym_ids()
    env = gym.make(env_id, **env_kwargs)
    states: list[Any] = []
    for seed in seeds:
        env.reset(seed=int(seed))
        if is_heldout(task_key(env)):
            continue
        level = env.unwrapped.level  # type: ignore[attr-defined]
        plan = solve(level) or []
        for a in plan:  # every state along an optimal plan
            states.append(level)
            level = next_level(level, a)
        if len(states) >= pool:
            break
    env.close()
    opt = [sorted(optimal_actions(s)) for s in states]
    prompt_cache: dict[tuple[int, int], tuple[int, ...]] = {}

    def sample(rng: np.random.Generator) -> tuple[tuple[int, ...], str]:
        i = int(rng.integers(len(states)))
        k = int(rng.integers(8)) if augment else 0
        acts = opt[i] if all_optimal else opt[i][:1]
        a = acts[int(rng.integers(len(acts)))]
        key = (i, k)
        if key not in prompt_cache:
            lvl = dihedral(states[i], k) if k else states[i]
            prompt_cache[key] = tuple(build_prompt(lvl.to_text(), {"text": lvl.to_text()}))
        return prompt_cache[key], dihedral_action(a, k) if k else a

    return sample, len(states)
