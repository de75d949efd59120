"""Sokoban levels as hashable records: text symbols, actions, dihedral symmetries and canonical keys."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentbench_crbc.errors import ConfigError

__all__ = [  # noqa: RUF022  (plain sorted(), as tests/test_exports.py checks)
    "ACTIONS",
    "CODE_BOX",
    "CODE_BOX_ON_TARGET",
    "CODE_FLOOR",
    "CODE_PLAYER",
    "CODE_PLAYER_ON_TARGET",
    "CODE_TARGET",
    "CODE_WALL",
    "Level",
    "SYMBOLS",
    "canonical_key",
    "dihedral",
    "dihedral_action",
    "parse_action",
]

#: The four actions, in gym-sokoban's order (its actions 1-4).
ACTIONS: tuple[str, ...] = ("up", "down", "left", "right")
_ACTION_INDEX = {a: i for i, a in enumerate(ACTIONS)}
_VECTORS = ((-1, 0), (1, 0), (0, -1), (0, 1))

# Cell codes, as gym-sokoban numbers its room (plus 6 for the player standing on a target).
CODE_WALL, CODE_FLOOR, CODE_TARGET, CODE_BOX_ON_TARGET, CODE_BOX, CODE_PLAYER, CODE_PLAYER_ON_TARGET = range(7)

#: Text symbol of each cell code: the symbols of the paper's (and verl-agent's) Sokoban prompt.
SYMBOLS: tuple[str, ...] = ("#", "_", "O", "√", "X", "P", "S")
# Accepted when parsing: the paper's symbols and the XSB community format.
_PARSE = {s: c for c, s in enumerate(SYMBOLS)} | {
    " ": CODE_FLOOR,
    "-": CODE_FLOOR,
    ".": CODE_TARGET,
    "*": CODE_BOX_ON_TARGET,
    "$": CODE_BOX,
    "@": CODE_PLAYER,
    "+": CODE_PLAYER_ON_TARGET,
}


def parse_action(action: object) -> int | None:
    """The index in :data:`ACTIONS` of ``action`` (case and outer whitespace ignored), or None if invalid."""
    if not isinstance(action, str):
        return None
    return _ACTION_INDEX.get(action.strip().lower())


@dataclass(frozen=True, slots=True)
class Level:
    """A Sokoban state: static map (walls, targets) and movable parts, as flat row-major cell indices.

    :param shape: (height, width) of the grid; the outer ring must be wall.
    :param walls: indices of wall cells.
    :param targets: indices of box targets (as many as boxes).
    :param boxes: indices of boxes.
    :param player: index of the player.
    """

    shape: tuple[int, int]
    walls: frozenset[int]
    targets: frozenset[int]
    boxes: frozenset[int]
    player: int

    def __post_init__(self) -> None:
        h, w = self.shape
        if h < 3 or w < 3:
            raise ConfigError(f"a level needs at least 3x3 cells, got {h}x{w}")
        ring = {i for i in range(h * w) if i // w in (0, h - 1) or i % w in (0, w - 1)}
        if not ring <= self.walls:
            raise ConfigError("the outer ring of a level must be wall ('#'): surround the level with walls")
        if not self.boxes or len(self.boxes) != len(self.targets):
            raise ConfigError(
                f"a level needs as many targets as boxes (>= 1), got {len(self.targets)} and {len(self.boxes)}"
            )
        occupied = self.walls & (self.boxes | self.targets | {self.player})
        if occupied or self.player in self.boxes:
            raise ConfigError("boxes, targets and the player must stand on floor cells, one thing per cell")

    @classmethod
    def unchecked(
        cls,
        shape: tuple[int, int],
        walls: frozenset[int],
        targets: frozenset[int],
        boxes: frozenset[int],
        player: int,
    ) -> Level:
        """Build without validation (for states reached by legal moves from a valid level)."""
        level = object.__new__(cls)
        for name, value in zip(cls.__slots__, (shape, walls, targets, boxes, player), strict=True):
            object.__setattr__(level, name, value)
        return level

    @property
    def solved(self) -> bool:
        """Whether every box is on a target."""
        return self.boxes == self.targets

    @property
    def player_rc(self) -> tuple[int, int]:
        """The player's (row, column)."""
        return divmod(self.player, self.shape[1])

    def codes(self) -> np.ndarray:
        """The (height, width) uint8 grid of cell codes (``CODE_*``)."""
        h, w = self.shape
        grid = np.full(h * w, CODE_FLOOR, dtype=np.uint8)
        grid[list(self.walls)] = CODE_WALL
        grid[list(self.targets)] = CODE_TARGET
        for b in self.boxes:
            grid[b] = CODE_BOX_ON_TARGET if b in self.targets else CODE_BOX
        grid[self.player] = CODE_PLAYER_ON_TARGET if self.player in self.targets else CODE_PLAYER
        return grid.reshape(h, w)

    def to_text(self) -> str:
        """The symbol grid (:data:`SYMBOLS`), one line per row."""
        return "\n".join("".join(SYMBOLS[c] for c in row) for row in self.codes().tolist())

    @classmethod
    def from_codes(cls, grid: np.ndarray) -> Level:
        """The level of a (height, width) grid of cell codes."""
        grid = np.asarray(grid)
        flat = grid.ravel().tolist()
        players = [i for i, c in enumerate(flat) if c in (CODE_PLAYER, CODE_PLAYER_ON_TARGET)]
        if len(players) != 1:
            raise ConfigError(f"a level needs exactly one player, found {len(players)}")
        return cls(
            shape=(int(grid.shape[0]), int(grid.shape[1])),
            walls=frozenset(i for i, c in enumerate(flat) if c == CODE_WALL),
            targets=frozenset(
                i for i, c in enumerate(flat) if c in (CODE_TARGET, CODE_BOX_ON_TARGET, CODE_PLAYER_ON_TARGET)
            ),
            boxes=frozenset(i for i, c in enumerate(flat) if c in (CODE_BOX, CODE_BOX_ON_TARGET)),
            player=players[0],
        )

    @classmethod
    def from_text(cls, text: str) -> Level:
        """Parse a symbol grid: the paper's symbols (:data:`SYMBOLS`) or XSB (``#@+$*. ``); rows are lines."""
        rows = [r for r in text.strip("\n").split("\n")]
        width = max(len(r) for r in rows)
        try:
            grid = np.array([[_PARSE[s] for s in r.ljust(width, "#")] for r in rows], dtype=np.uint8)
        except KeyError as e:
            raise ConfigError(
                f"unknown Sokoban symbol {e.args[0]!r}; use {' '.join(SYMBOLS)} (wall, floor, "
                "target, box on target, box, player, player on target) or XSB"
            ) from None
        return cls.from_codes(grid)


def _transform(grid: np.ndarray, k: int) -> np.ndarray:
    if not 0 <= k < 8:
        raise ConfigError(f"a dihedral symmetry is numbered 0..7, got {k}")
    if k >= 4:
        grid = grid.T
    return np.rot90(grid, k % 4)


def dihedral(level: Level, k: int) -> Level:
    """The level under symmetry ``k`` of the 8 of the square: ``k % 4`` quarter turns counter-clockwise, after
    a transpose when ``k >= 4``; ``k = 0`` is the identity."""
    return Level.from_codes(np.ascontiguousarray(_transform(level.codes(), k)))


def dihedral_action(action: str, k: int) -> str:
    """The action that does in ``dihedral(level, k)`` what ``action`` does in ``level``."""
    index = parse_action(action)
    if index is None:
        raise ConfigError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    dr, dc = _VECTORS[index]
    if k >= 4:
        dr, dc = dc, dr
    for _ in range(k % 4):  # a counter-clockwise quarter turn maps (r, c) -> (W-1-c, r): vectors (dr, dc) -> (-dc, dr)
        dr, dc = -dc, dr
    return ACTIONS[_VECTORS.index((dr, dc))]


def canonical_key(level: Level) -> str:
    """The smallest text form of ``level`` over the 8 dihedral symmetries: equal keys mean the same puzzle up
    to rotation and reflection, so train and held-out splits can be made disjoint by key."""
    grid = level.codes()
    return min("\n".join("".join(SYMBOLS[c] for c in row) for row in _transform(grid, k).tolist()) for k in range(8))
