"""Seeded reverse-play level generator: one seed, one level on every machine; every level is solvable."""

from __future__ import annotations

from collections import deque

import numpy as np

from agentbench_crbc.errors import ConfigError, EnvError

from .level import Level

__all__ = ["generate_level", "generate_level_in_range"]

# gym-sokoban's topology masks: the floor pattern stamped around the random walker.
_MASKS = np.array(
    [
        [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
        [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
        [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
    ],
    dtype=bool,
)
_DIRS = np.array([(1, 0), (0, 1), (-1, 0), (0, -1)])


def _topology(rng: np.random.Generator, h: int, w: int, steps: int, p_change: float) -> np.ndarray:
    """Floor mask of a room carved by a random walk, as gym-sokoban's ``room_topology_generation``."""
    floor = np.zeros((h, w), dtype=bool)
    changes = rng.random(steps) < p_change
    new_dirs = rng.integers(0, 4, size=steps)
    masks = rng.integers(0, len(_MASKS), size=steps)
    direction = _DIRS[rng.integers(0, 4)]
    pos = np.array([rng.integers(1, h - 1), rng.integers(1, w - 1)])
    for s in range(steps):
        if changes[s]:
            direction = _DIRS[new_dirs[s]]
        pos = np.clip(pos + direction, (1, 1), (h - 2, w - 2))
        r, c = int(pos[0]) - 1, int(pos[1]) - 1
        floor[r : r + 3, c : c + 3] |= _MASKS[masks[s]]
    floor[[0, h - 1], :] = False
    floor[:, [0, w - 1]] = False
    return floor


def _reachable(free: bytearray, boxes: dict[int, int], player: int, deltas: tuple[int, ...]) -> dict[int, int]:
    """Cells the player can walk to without pushing, with their distances."""
    dist = {player: 0}
    queue = deque([player])
    while queue:
        x = queue.popleft()
        for d in deltas:
            y = x + d
            if free[y] and y not in boxes and y not in dist:
                dist[y] = dist[x] + 1
                queue.append(y)
    return dist


def _reverse_play(
    rng: np.random.Generator,
    free: bytearray,
    targets: tuple[int, ...],
    player: int,
    deltas: tuple[int, ...],
    width: int,
    max_moves: int,
) -> tuple[int, tuple[int, ...], int] | None:
    """Play backwards from the solved state: walk to a box, pull it one to three cells, repeat within
    ``max_moves`` moves; return the best state with no box on a target as (score, boxes, player), scored as
    gym-sokoban does (box switches x total box displacement). The player then walks to a random cell it can
    reach within the moves left, so the level reads forwards as a walk then the pushes, reversed."""
    target_set = set(targets)
    boxes = list(targets)  # box i started on targets[i]
    where = {b: i for i, b in enumerate(boxes)}
    on_target = len(boxes)
    last, switches, moves = -1, 0, 0
    best: tuple[int, tuple[int, ...], int, int] | None = None
    while moves < max_moves:
        reach = _reachable(free, where, player, deltas)
        options = [
            (b, d)
            for b in where
            for d in deltas
            if b + d in reach and free[b + 2 * d] and b + 2 * d not in where and moves + reach[b + d] + 1 <= max_moves
        ]
        if not options:
            break
        b, d = options[int(rng.integers(len(options)))]
        moves += reach[b + d]
        player = b + d
        i = where[b]
        if i != last:
            switches, last = switches + 1, i
        for _ in range(int(rng.integers(1, 4))):
            if not (free[player + d] and player + d not in where) or moves >= max_moves:
                break
            box = player - d
            del where[box]
            where[player] = i
            boxes[i] = player
            on_target += (player in target_set) - (box in target_set)
            player += d
            moves += 1
            if on_target == 0:
                score = switches * sum(
                    abs(x // width - t // width) + abs(x % width - t % width)
                    for x, t in zip(boxes, targets, strict=True)
                )
                if best is None or (score, moves) > (best[0], best[3]):
                    best = (score, tuple(boxes), player, moves)
    if best is None:
        return None
    score, final, player, used = best
    reach = _reachable(free, dict.fromkeys(final, 0), player, deltas)
    cells = [c for c, n in reach.items() if n <= max_moves - used]
    return score, final, cells[int(rng.integers(len(cells)))]


def generate_level(
    seed: int | np.random.Generator | None = None,
    *,
    size: tuple[int, int] | int = (6, 6),
    num_boxes: int = 1,
    max_moves: int | None = None,
    walks: int = 8,
    p_change_directions: float = 0.35,
    max_attempts: int = 200,
) -> Level:
    """Generate a solvable level by reverse play (gym-sokoban's method, seeded and bounded).

    A random walk carves the room, boxes start on targets, and ``walks`` random backward games (walk to a box,
    pull it) are played; the state with all boxes off target and the highest score (box switches x
    displacement) wins. Reversing the game is a solution, so every level is solvable, in at most ``max_moves``
    moves when given
    (default ``4 * (height + width)``).

    :param seed: an int seed or a ``numpy.random.Generator`` (consumed); no global RNG is touched.
    :param size: (height, width) including the wall ring, or one int for a square.
    :param num_boxes: boxes (and targets).
    :param max_moves: if given, every level is solvable in at most this many moves (the walk is cut there).
    :param walks: backward games played per room (the best is kept); more gives harder levels.
    :returns: the level; raises :class:`EnvError` if no room could be made in ``max_attempts`` tries.
    """
    h, w = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
    if h < 4 or w < 4:
        raise ConfigError(f"size must be at least 4x4 (with the wall ring), got {h}x{w}")
    if num_boxes < 1:
        raise ConfigError(f"num_boxes must be >= 1, got {num_boxes}")
    if max_moves is not None and max_moves < 1:
        raise ConfigError(f"max_moves must be >= 1 or None, got {max_moves}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    cap = max_moves or 4 * (h + w)
    deltas = (-w, w, -1, 1)
    for _ in range(max_attempts):
        floor = _topology(rng, h, w, int(1.7 * (h + w)), p_change_directions)
        cells = np.flatnonzero(floor)
        if len(cells) < num_boxes + 2:
            continue
        chosen = [int(c) for c in rng.choice(cells, size=num_boxes + 1, replace=False)]
        free = bytearray(floor.ravel().tobytes())
        best: tuple[int, tuple[int, ...], int] | None = None
        for _ in range(walks):
            found = _reverse_play(rng, free, tuple(chosen[1:]), chosen[0], deltas, w, cap)
            if found is not None and (best is None or found[0] > best[0]):  # ties: the earlier game
                best = found
        if best is None:
            continue
        walls = frozenset(range(h * w)) - frozenset(int(c) for c in cells)
        return Level(shape=(h, w), walls=walls, targets=frozenset(chosen[1:]), boxes=frozenset(best[1]), player=best[2])
    raise EnvError(
        f"no {h}x{w} level with {num_boxes} boxes after {max_attempts} rooms; use fewer boxes, a larger "
        "size or a larger max_moves"
    )


def generate_level_in_range(
    rng: np.random.Generator,
    *,
    size: tuple[int, int] | int = (6, 6),
    num_boxes: int = 1,
    min_moves: int = 1,
    max_moves: int | None = None,
    walk_moves: int | None = None,
    max_draws: int = 2000,
) -> Level:
    """A generated level whose optimal solution takes ``min_moves`` to ``max_moves`` moves (a difficulty level).

    Levels of :func:`generate_level` (reverse play cut at ``walk_moves``) outside the range are drawn again from
    the same ``rng``, so the result is the plain generator's distribution restricted to the range, and one
    generator state gives one level on every machine.

    :raises ConfigError: on an empty range; :class:`EnvError` if ``max_draws`` levels all fall outside it.
    """
    from .solver import solution_length

    if min_moves < 1 or (max_moves is not None and max_moves < min_moves):
        raise ConfigError(f"the move range needs 1 <= min_moves <= max_moves, got min_moves={min_moves}, "
                          f"max_moves={max_moves}")
    for _ in range(max_draws):
        level = generate_level(rng, size=size, num_boxes=num_boxes, max_moves=walk_moves)
        n = solution_length(level)
        if n is not None and n >= min_moves and (max_moves is None or n <= max_moves):
            return level
    raise EnvError(f"no level with an optimal solution of {min_moves}..{max_moves} moves in {max_draws} draws; "
                   "widen the range (min_moves / max_moves)")
