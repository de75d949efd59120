"""A PettingZoo ``ParallelEnv`` view of one rollout group: agents ``rollout_0..G-1`` play G copies of one task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ...family import find_family

__all__ = ["GroupParallelEnv"]


def _base() -> type:
    try:
        from pettingzoo import ParallelEnv
    except ImportError as exc:  # pragma: no cover
        raise ImportError("the PettingZoo view needs pettingzoo: pip install 'agentbench-crbc[multiagent]'") from exc
    return ParallelEnv  # type: ignore[no-any-return]


class GroupParallelEnv(_base()):  # type: ignore[misc]
    """G copies of ``env_id`` reset with one seed; each agent sends its env's action text (the env answers invalid
    text as an unknown command). An agent leaves ``agents`` when its copy terminates or truncates; ``infos`` carry
    the env's info (anchor, admissible actions, success...).

    :param env_id: a Gymnasium id or a registered family's name (its default id).
    :param group_size: G.
    :param make_env: a zero-argument factory replacing ``gymnasium.make(env_id, **env_kwargs)``.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "abc_group_v0", "render_modes": []}

    def __init__(self, env_id: str, group_size: int = 8, *, env_kwargs: dict[str, Any] | None = None,
                 make_env: Callable[[], Any] | None = None) -> None:
        from .workers import EnvRecipe

        found = find_family(env_id)
        self.env_id = found.env_id if found is not None else env_id
        make = make_env if make_env is not None else EnvRecipe(self.env_id, dict(env_kwargs or {}))
        self.possible_agents = [f"rollout_{i}" for i in range(group_size)]
        self.agents: list[str] = []
        self._envs = {a: make() for a in self.possible_agents}
        first = self._envs[self.possible_agents[0]]
        self._obs_space = first.observation_space
        self._act_space = first.action_space
        self.render_mode = None

    def observation_space(self, agent: str) -> Any:
        return self._obs_space

    def action_space(self, agent: str) -> Any:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset every copy with the same ``seed`` (one task for the whole group)."""
        if seed is None:
            import numpy as np

            seed = int(np.random.default_rng().integers(2**31))
        self.agents = list(self.possible_agents)
        obs, infos = {}, {}
        for a in self.agents:
            obs[a], info = self._envs[a].reset(seed=seed, options=options)
            infos[a] = dict(info)
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        obs, rew, term, trunc, infos = {}, {}, {}, {}, {}
        for a in list(self.agents):
            if a not in actions:
                continue
            o, r, te, tr, info = self._envs[a].step(actions[a])
            obs[a], rew[a], term[a], trunc[a], infos[a] = o, float(r), bool(te), bool(tr), dict(info)
        self.agents = [a for a in self.agents if not (term.get(a) or trunc.get(a))]
        return obs, rew, term, trunc, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
