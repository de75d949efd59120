"""A tiny test-double env: walk right along a corridor to the goal; optional crash/raise at a given step."""

from __future__ import annotations

import os
import string
import time
from typing import Any

import gymnasium as gym
from gymnasium import spaces

ACTIONS = ("left", "right", "stay")


class Corridor(gym.Env[str, str]):
    """Positions 0..length; ``right`` moves towards the goal (reward 1 and success on arrival), ``left`` away,
    ``stay`` stays; unknown text is answered ``Nothing happens.`` with ``action_valid=False``. The seed picks the
    start (0 or 1). ``crash_at``/``raise_at``: at that step index the process dies (``os._exit``) or the env raises.
    ``nan_at``: that step pays a NaN reward; ``admissible``: what ``info['admissible_actions']`` holds; ``delay``:
    seconds every step sleeps (a slow or hung env).
    """

    def __init__(self, length: int = 4, crash_at: int | None = None, raise_at: int | None = None,
                 crash_seed: int | None = None, nan_at: int | None = None, admissible: Any = None,
                 delay: float = 0.0) -> None:
        self.length = length
        self.nan_at = nan_at
        self.admissible = admissible
        self.delay = delay
        self.crash_at = crash_at
        self.raise_at = raise_at
        self.crash_seed = crash_seed
        self.observation_space = spaces.Text(max_length=200, charset=string.printable)
        self.action_space = spaces.Text(max_length=200, charset=string.printable)
        self.pos = 0
        self.t = 0
        self.seed_ = 0

    def _info(self, valid: bool = True) -> dict[str, Any]:
        admissible = list(ACTIONS) if self.admissible is None else self.admissible
        return {"anchor": self.pos, "admissible_actions": admissible, "subtask": "walk",
                "success": self.pos == self.length, "action_valid": valid}

    def _obs(self) -> str:
        return "".join("A" if i == self.pos else ("G" if i == self.length else "_") for i in range(self.length + 1))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.seed_ = seed or 0
        self.pos = (seed or 0) % 2
        self.t = 0
        return self._obs(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        hit = self.crash_seed is None or self.crash_seed == self.seed_
        if self.crash_at is not None and self.t == self.crash_at and hit:
            os._exit(3)
        if self.raise_at is not None and self.t == self.raise_at and hit:
            raise RuntimeError("toy env exploded")
        time.sleep(self.delay)
        nan = self.nan_at is not None and self.t == self.nan_at
        self.t += 1
        valid = action in ACTIONS
        if action == "right":
            self.pos += 1
        elif action == "left":
            self.pos = max(self.pos - 1, 0)
        done = self.pos == self.length
        reward = float("nan") if nan else (1.0 if done else 0.0)
        return (self._obs() if valid else "Nothing happens."), reward, done, False, self._info(valid)


def expert_policy(env: Any) -> Any:
    """Always walk right."""
    return lambda obs, info: "right"


class MakeCorridor:
    """Picklable factory."""

    def __init__(self, **kw: Any) -> None:
        self.kw = kw

    def __call__(self) -> gym.Env:
        return Corridor(**self.kw)
