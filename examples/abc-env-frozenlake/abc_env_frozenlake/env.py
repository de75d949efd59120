"""``FrozenLakeText``: Gymnasium's FrozenLake on a generated map per seed, as a text grid with word actions."""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv, generate_random_map

from agentbench_crbc.anchors import AnchorRegistry

__all__ = ["ACTIONS", "ANCHORS", "FrozenLakeText"]

#: FrozenLake's action indices, as words.
ACTIONS = ("left", "down", "right", "up")

#: The anchor extractors, by name: ``fn(env) -> hashable``, the state key that step-level credit groups the
#: visits of a group's rollouts by. ``gym.make(ENV_ID, anchor=name)`` picks one; the family's ``anchors`` lists
#: the names, the first the default. ``cell``: the agent's cell index (the map is fixed within a group, so this is
#: the whole state); ``text``: the grid with the agent, which also tells maps apart.
ANCHORS = AnchorRegistry("frozenlake", {"cell": lambda env: env.cell, "text": lambda env: env._obs()})


class FrozenLakeText(gym.Env[str, str]):
    """Walk from ``S`` to the goal ``G`` over frozen ``F`` cells without falling into a hole ``H``.

    ``reset(seed=s)`` plays the map ``generate_random_map(size, p, seed=s)`` (always solvable), so a seed is a
    task and equal seeds are equal tasks. The observation is the grid with the agent as ``A``; an action is one of
    ``left``/``down``/``right``/``up``; other text is answered ``Nothing happens.`` without moving. ``info``:
    ``anchor`` (the state key of the ``anchor`` extractor, by default the cell index), ``admissible_actions``,
    ``subtask`` (``4x4``), ``success``, ``action_valid``, ``map`` (the map rows). Reward 1 on reaching the goal; a
    hole ends the episode with 0.

    :param size: the map side.
    :param p: the probability that a generated cell is frozen.
    :param is_slippery: FrozenLake's slippery ice (moves go sideways with probability 2/3).
    :param anchor: the anchor extractor's name (:data:`ANCHORS`: ``cell`` or ``text``).
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(self, size: int = 4, p: float = 0.8, is_slippery: bool = False, anchor: str = "cell") -> None:
        self.size = size
        self.p = p
        self.is_slippery = is_slippery
        self.anchor = ANCHORS.extractor(anchor)  # an unknown name lists the registered ones
        self.observation_space = spaces.Text(max_length=(size + 1) * size + 32, charset=string.printable)
        self.action_space = spaces.Text(max_length=64, charset=string.printable)
        self.lake: FrozenLakeEnv | None = None
        self.desc: list[str] = []
        self.cell = 0

    def _obs(self) -> str:
        rows = [list(r) for r in self.desc]
        rows[self.cell // self.size][self.cell % self.size] = "A"
        return "\n".join("".join(r) for r in rows)

    def _info(self, valid: bool = True) -> dict[str, Any]:
        here = self.desc[self.cell // self.size][self.cell % self.size]
        return {"anchor": self.anchor(self), "admissible_actions": list(ACTIONS), "subtask": f"{self.size}x{self.size}",
                "success": here == "G", "action_valid": valid, "map": tuple(self.desc)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = int(seed) if seed is not None else int(self.np_random.integers(2**31))
        self.desc = generate_random_map(self.size, p=self.p, seed=task)
        self.lake = FrozenLakeEnv(desc=self.desc, is_slippery=self.is_slippery)
        cell, _ = self.lake.reset(seed=task)
        self.cell = int(cell)
        return self._obs(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self.lake is not None, "call reset() first"
        word = str(action).strip().lower()
        if word not in ACTIONS:
            return "Nothing happens.", 0.0, False, False, self._info(valid=False)
        cell, reward, terminated, truncated, _ = self.lake.step(ACTIONS.index(word))
        self.cell = int(cell)
        return self._obs(), float(reward), bool(terminated), bool(truncated), self._info()
