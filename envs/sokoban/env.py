"""``abc/Sokoban-v0``: Gymnasium-native Sokoban with gym-sokoban's rules, text actions, rgb/text obs."""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agentbench_crbc.errors import ConfigError

from .anchors import get_anchor_extractor
from .generator import generate_level, generate_level_in_range
from .level import (
    ACTIONS,
    CODE_BOX,
    CODE_BOX_ON_TARGET,
    CODE_FLOOR,
    CODE_PLAYER,
    CODE_PLAYER_ON_TARGET,
    CODE_TARGET,
    CODE_WALL,
    SYMBOLS,
    Level,
    parse_action,
)
from .render import render_rgb, render_text, render_tiny
from .solver import solution_length
from .tasks import plan_subtask

__all__ = [
    "OBS_MODES",
    "REWARD_BOX_OFF_TARGET",
    "REWARD_BOX_ON_TARGET",
    "REWARD_SOLVED",
    "REWARD_STEP",
    "SUBTASK_BY",
    "VIEWS",
    "SokobanEnv",
    "SokobanOptions",
]

# gym-sokoban's rewards.
REWARD_STEP = -0.1
REWARD_BOX_ON_TARGET = 1.0
REWARD_BOX_OFF_TARGET = -1.0
REWARD_SOLVED = 10.0
OBS_MODES = ("rgb", "text", "tiny_rgb")
VIEWS = ("board", "egocentric")
#: What ``info["subtask"]`` names: the level's optimal plan length (``plan``) or the board's size and boxes (``size``).
SUBTASK_BY = ("plan", "size")
_BOX_OVER = np.array([0, CODE_BOX, CODE_BOX_ON_TARGET], dtype=np.uint8)  # floor/target -> box code
_PLAYER_OVER = np.array([0, CODE_PLAYER, CODE_PLAYER_ON_TARGET], dtype=np.uint8)



def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


#: The largest side of a level, wall ring included: boards to 128 x 128 build and reset in well under a second
#: (10001 ran past 60 s); the benchmark's are 6 to 10.
MAX_SIZE = 128
#: The most pixels a cell may take in the ``rgb`` / ``tiny_rgb`` observations.
MAX_CELL_PX = 64

#: The longest level the generator walks to (``max_steps``, ``min_moves``, ``max_moves``): far past any solvable
#: benchmark level, and short enough that a reset returns (10**12 made it walk forever).
MAX_MOVES = 10_000


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """A whole number in ``[low, high]`` (numpy integers accepted), in Gymnasium's expected-vs-actual style."""
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        shown = repr(value) if not _is_int(value) or abs(int(value)) < 10**30 else "a huge integer"
        raise ConfigError(f"Expect `{name}` to be {bound}, actually: {shown}")
    return int(value)


def _check_size(size: Any) -> tuple[int, int]:
    """``size``: one int or an (height, width) pair of ints, each in ``[4, MAX_SIZE]`` (the wall ring included)."""
    pair = (size, size) if _is_int(size) else tuple(size) if isinstance(size, (tuple, list)) else None
    if pair is None or len(pair) != 2 or not all(_is_int(v) and 4 <= v <= MAX_SIZE for v in pair):
        shown = repr(size) if len(repr(size)) <= 60 else repr(size)[:57] + "..."
        raise ConfigError(f"Expect `size` to be an integer in [4, {MAX_SIZE}] or a (height, width) pair of them (the "
                          f"wall ring included), actually: {shown}")
    return int(pair[0]), int(pair[1])


@dataclass(frozen=True)
class SokobanOptions:
    """The options of :class:`SokobanEnv` (``env.kwargs``; ``render_mode`` is Gymnasium's own).

    :param size: (height, width) with the wall ring, or one int for a square.
    :param num_boxes: boxes (and targets) per level.
    :param max_steps: every generated level is solvable within this many moves (register the same number as
        ``max_episode_steps``); None lifts the bound.
    :param min_moves: difficulty: generated levels need at least this many moves to solve (optimal plan length).
    :param max_moves: difficulty: generated levels need at most this many moves (capped by ``max_steps``); None
        and ``min_moves`` 1 keep the plain generator's levels.
    :param obs_mode: ``rgb`` (sprites, ``cell_px`` pixels a cell), ``text`` (symbol grid) or ``tiny_rgb``
        (one pixel a cell, times ``tiny_scale``).
    :param view: what the ``text`` observation shows: ``board`` (the symbol grid) or ``egocentric`` (the grid
        re-centred on the player: a square of side ``2 r + 1``, ``r = max(height, width) - 3``, which covers the
        whole inside of the wall ring from any cell, with cells off the board shown as walls). In an egocentric
        view "a box just above me with a target above it" is always the same cells, a pattern a small model learns
        from reward in minutes (the CPU demo's); ``info["text"]`` is always the board.
    :param subtask: what ``info["subtask"]`` names (the leaderboard's columns): ``plan``, the optimal plan length of
        the level at reset (:func:`~.tasks.plan_subtask`: ``1 move`` ... ``4 moves``, ``5-8 moves``...), or
        ``size``, the board and its boxes (``6x6-1box``). Default: ``plan`` up to 2 boxes on boards up to 10 x 10
        (a solve takes under 0.1 s there; 10 x 10 with 4 boxes took up to 12 s a level), else ``size``.
    :param anchor: anchor extractor name (``state``, ``pixels``, ``text``; see :mod:`.anchors`).
    :param level: a fixed level (text or :class:`Level`) to play on every reset instead of generated ones.
    """

    size: int | tuple[int, int] = 6
    num_boxes: int = 1
    max_steps: int | None = 15
    obs_mode: str = "rgb"
    anchor: str = "state"
    level: str | Level | None = None
    cell_px: int = 16
    tiny_scale: int = 1
    min_moves: int = 1
    max_moves: int | None = None
    view: str = "board"
    subtask: str | None = None


class SokobanEnv(gym.Env[Any, str]):
    """Push every box onto a target. Actions are the words up, down, left, right (case-insensitive); any other
    text moves nothing, costs the step penalty and sets ``info["action_valid"] = False``.

    Rewards (gym-sokoban's): -0.1 a step, +1 for a box pushed onto a target, -1 for one pushed off, +10 when
    all boxes are on targets, which terminates the episode. Truncation comes from Gymnasium's TimeLimit.

    :param options: the level's shape, difficulty, observation and anchor (:class:`SokobanOptions`); its fields
        may be given as keywords instead (as ``gym.make`` passes them), each replacing the record's.
    :param render_mode: ``rgb_array``, ``ansi`` or ``human`` (a pygame window).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array", "ansi", "human"], "render_fps": 4}

    #: the record of this env's options (``env.kwargs`` names its fields)
    options_type: ClassVar[type] = SokobanOptions

    def __init__(self, options: SokobanOptions | None = None, *, render_mode: str | None = None,
                 **fields: Any) -> None:
        o = dataclasses.replace(options or SokobanOptions(), **fields)
        size, num_boxes, max_steps, obs_mode, anchor = o.size, o.num_boxes, o.max_steps, o.obs_mode, o.anchor
        level, cell_px, tiny_scale, min_moves, max_moves = o.level, o.cell_px, o.tiny_scale, o.min_moves, o.max_moves
        view, subtask = o.view, o.subtask
        if obs_mode not in OBS_MODES:
            raise ConfigError(f"obs_mode={obs_mode!r}; choose one of {', '.join(OBS_MODES)}")
        if view not in VIEWS:
            raise ConfigError(f"view={view!r}; choose one of {', '.join(VIEWS)}")
        if subtask is not None and subtask not in SUBTASK_BY:
            raise ConfigError(f"subtask={subtask!r}; choose one of {', '.join(SUBTASK_BY)} (or None: by the board)")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode={render_mode!r}; choose one of {self.metadata['render_modes']} or None")
        self._fixed_level = Level.from_text(level) if isinstance(level, str) else level
        if self._fixed_level is not None:  # a given level sets its own size (it may be smaller than generated ones)
            size, num_boxes = self._fixed_level.shape, len(self._fixed_level.boxes)
            h, w = int(size[0]), int(size[1])
        else:
            h, w = _check_size(size)
        self.shape = (h, w)
        self.num_boxes = _check_int("num_boxes", num_boxes, 1, h * w)
        self.max_steps = None if max_steps is None else _check_int("max_steps", max_steps, 1, MAX_MOVES)
        cell_px = _check_int("cell_px", cell_px, 1, MAX_CELL_PX)
        tiny_scale = _check_int("tiny_scale", tiny_scale, 1, MAX_CELL_PX)
        self.min_moves = _check_int("min_moves", min_moves, 1, MAX_MOVES)
        self.max_moves = None if max_moves is None else _check_int("max_moves", max_moves, self.min_moves, MAX_MOVES)
        if self.max_steps is not None:  # no level is longer than the step bound
            self.max_moves = self.max_steps if self.max_moves is None else min(self.max_moves, self.max_steps)
            if self.min_moves > self.max_moves:
                raise ConfigError(f"Expect `min_moves` to be <= max_steps={self.max_steps}, actually: {min_moves!r}")
        self.obs_mode = obs_mode
        self.view = view
        self.anchor_name = anchor
        self._anchor = get_anchor_extractor(anchor)
        self.render_mode = render_mode
        self.cell_px = int(cell_px)
        self.tiny_scale = int(tiny_scale)
        self.subtask_by = subtask or ("plan" if self.num_boxes <= 2 and max(h, w) <= 10 else "size")
        self.subtask = f"{h}x{w}-{self.num_boxes}box"
        self.action_space = spaces.Text(max_length=64, charset=string.printable)
        if obs_mode == "rgb":
            self.observation_space = spaces.Box(0, 255, (h * self.cell_px, w * self.cell_px, 3), np.uint8)
        elif obs_mode == "tiny_rgb":
            self.observation_space = spaces.Box(0, 255, (h * self.tiny_scale, w * self.tiny_scale, 3), np.uint8)
        else:
            side = 2 * self._radius() + 1 if view == "egocentric" else 0
            self.observation_space = spaces.Text(max_length=side * (side + 1) if side else h * (w + 1), min_length=1,
                                                 charset="".join(SYMBOLS) + "\n")
        self._deltas = (-w, w, -1, 1)
        self._window: Any = None
        self._set_level(self._fixed_level or generate_level(0, size=self.shape, num_boxes=1, max_moves=None))

    # -- state ---------------------------------------------------------------------------------------------
    def _set_level(self, level: Level) -> None:
        if level.shape != self.shape:
            raise ConfigError(
                f"a {level.shape[0]}x{level.shape[1]} level does not fit this {self.shape[0]}x"
                f"{self.shape[1]} env; make the env with size={level.shape} or level=..."
            )
        self.initial_level = level
        self._walls = level.walls
        self._free = [i not in level.walls for i in range(level.shape[0] * level.shape[1])]
        self._targets = level.targets
        self.boxes: set[int] = set(level.boxes)
        self.player: int = level.player
        self._on_target = len(self.boxes & self._targets)
        fixed = np.full(level.shape[0] * level.shape[1], CODE_FLOOR, dtype=np.uint8)
        fixed[list(level.walls)] = CODE_WALL
        fixed[list(level.targets)] = CODE_TARGET
        self._fixed = fixed
        if self.subtask_by == "plan":
            self.subtask = plan_subtask(solution_length(level))

    @property
    def level(self) -> Level:
        """The current state as a :class:`Level` (what the solver and ``expert_policy`` plan from)."""
        return Level.unchecked(self.shape, self._walls, self._targets, frozenset(self.boxes), self.player)

    def codes(self) -> np.ndarray:
        """A fresh (height, width) uint8 grid of cell codes of the current state."""
        grid = self._fixed.copy()
        boxes = list(self.boxes)
        grid[boxes] = _BOX_OVER[self._fixed[boxes]]
        grid[self.player] = _PLAYER_OVER[self._fixed[self.player]]
        return grid.reshape(self.shape)

    @property
    def text(self) -> str:
        """The symbol grid of the current state."""
        return render_text(self.codes())

    def _radius(self) -> int:
        return max(self.shape) - 3

    def egocentric_codes(self) -> np.ndarray:
        """A fresh ``(2r+1, 2r+1)`` code grid centred on the player (see ``view``); off-board cells are walls."""
        r = self._radius()
        h, w = self.shape
        out = np.full((2 * r + 1, 2 * r + 1), CODE_WALL, dtype=np.uint8)
        py, px = divmod(self.player, w)
        codes = self.codes()
        y0, x0 = max(py - r, 0), max(px - r, 0)
        y1, x1 = min(py + r + 1, h), min(px + r + 1, w)
        out[y0 - py + r:y1 - py + r, x0 - px + r:x1 - px + r] = codes[y0:y1, x0:x1]
        return out

    def rgb_frame(self) -> np.ndarray:
        """A fresh RGB frame (sprites) of the current state."""
        return render_rgb(self.codes(), self.cell_px)

    # -- gymnasium API -------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start a level: ``options={"level": text_or_Level}`` plays that one, else the fixed level if the env
        has one, else a level generated from the env's seeded ``np_random`` (one seed, one level anywhere)."""
        super().reset(seed=seed)
        chosen = (options or {}).get("level", self._fixed_level)
        if isinstance(chosen, str):
            chosen = Level.from_text(chosen)
        if chosen is None:
            chosen = self._generate()
        self._set_level(chosen)
        obs, info = self._observe(True, False)
        if self.render_mode == "human":
            self.render()
        return obs, info

    def _generate(self) -> Level:
        """A level from ``np_random``: the plain generator's, or one in the ``min_moves..max_moves`` range."""
        if self.min_moves == 1 and self.max_moves == self.max_steps:
            return generate_level(self.np_random, size=self.shape, num_boxes=self.num_boxes, max_moves=self.max_steps)
        return generate_level_in_range(self.np_random, size=self.shape, num_boxes=self.num_boxes,
                                       min_moves=self.min_moves, max_moves=self.max_moves, walk_moves=self.max_steps)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        index = parse_action(action)
        if self._on_target == self.num_boxes:  # already solved: a step after termination pays nothing
            obs, info = self._observe(index is not None, False)
            return obs, 0.0, True, False, info
        reward = REWARD_STEP
        pushed = False
        if index is not None:
            d = self._deltas[index]
            nxt = self.player + d
            if self._free[nxt]:
                if nxt in self.boxes:
                    beyond = nxt + d
                    if self._free[beyond] and beyond not in self.boxes:
                        self.boxes.remove(nxt)
                        self.boxes.add(beyond)
                        self.player = nxt
                        pushed = True
                        change = (beyond in self._targets) - (nxt in self._targets)
                        if change:
                            self._on_target += change
                            reward += REWARD_BOX_ON_TARGET if change > 0 else REWARD_BOX_OFF_TARGET
                else:
                    self.player = nxt
        solved = self._on_target == self.num_boxes
        if solved:
            reward += REWARD_SOLVED
        obs, info = self._observe(index is not None, pushed)
        if self.render_mode == "human":
            self.render()
        return obs, reward, solved, False, info

    def _observe(self, valid: bool, pushed: bool) -> tuple[Any, dict[str, Any]]:
        codes = self.codes()
        text = render_text(codes)
        if self.obs_mode == "rgb":
            obs: Any = render_rgb(codes, self.cell_px)
        elif self.obs_mode == "tiny_rgb":
            obs = render_tiny(codes, self.tiny_scale)
        else:
            obs = render_text(self.egocentric_codes()) if self.view == "egocentric" else text
        info = {
            "anchor": self._anchor(self),
            "admissible_actions": list(ACTIONS),
            "subtask": self.subtask,
            "success": self._on_target == self.num_boxes,
            "action_valid": valid,
            "text": text,
            "boxes_on_target": self._on_target,
            "pushed_box": pushed,
        }
        return obs, info

    def render(self) -> Any:
        """``rgb_array``: the sprite frame; ``ansi``: the text grid; ``human``: draw in a pygame window."""
        if self.render_mode == "ansi":
            return self.text
        if self.render_mode == "rgb_array":
            return self.rgb_frame()
        if self.render_mode == "human":
            from .play import Window

            if self._window is None:
                self._window = Window(caption="abc Sokoban", fps=self.metadata["render_fps"])
            self._window.show(self.rgb_frame())
        return None

    def close(self) -> None:
        if self._window is not None:
            self._window.close()
            self._window = None
