"""Numpy renderings of a cell-code grid: RGB sprites (what a vision-language model sees), tiny RGB, text."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .level import SYMBOLS

__all__ = ["TINY_COLORS", "render_rgb", "render_text", "render_tiny", "sprites"]

#: One colour per cell code (gym-sokoban's tiny palette): wall, floor, target, box on target, box, player,
#: player on target.
TINY_COLORS = np.array(
    [
        [0, 0, 0],
        [243, 248, 238],
        [254, 126, 125],
        [254, 95, 56],
        [142, 121, 56],
        [160, 212, 56],
        [219, 212, 56],
    ],
    dtype=np.uint8,
)

_FLOOR = np.array([52, 52, 60])
_TARGET = np.array([220, 60, 60])
_BOX = np.array([196, 140, 62])
_BOX_EDGE = np.array([110, 70, 25])
_BOX_DONE = np.array([90, 190, 90])
_PLAYER = np.array([70, 150, 235])
_SKIN = np.array([250, 210, 170])


@lru_cache(maxsize=8)
def sprites(px: int = 16) -> np.ndarray:
    """The (7, px, px, 3) uint8 sprite of each cell code (read-only, cached)."""
    y, x = (np.mgrid[0:px, 0:px] + 0.5) / px
    ring = np.abs(np.hypot(x - 0.5, y - 0.5) - 0.3) < 0.08
    out = np.empty((7, px, px, 3), dtype=np.float64)
    # Wall: bricks with mortar lines, half-brick offset on alternate rows.
    mortar = (np.abs((y * 4) % 1) < 0.16) | (np.abs(((x * 2) + 0.5 * (np.floor(y * 4) % 2)) % 1) < 0.08)
    out[0] = np.where(mortar[..., None], [150, 150, 150], [150, 62, 40])
    out[1] = _FLOOR
    out[2] = np.where(ring[..., None], _TARGET, _FLOOR)
    crate = (np.abs(x - 0.5) < 0.42) & (np.abs(y - 0.5) < 0.42)
    edge = crate & (
        (np.abs(x - 0.5) > 0.32) | (np.abs(y - 0.5) > 0.32) | (np.abs(x - y) < 0.08) | (np.abs(x + y - 1) < 0.08)
    )
    for code, fill, under in ((3, _BOX_DONE, out[2]), (4, _BOX, out[1])):
        out[code] = np.where(crate[..., None], fill, under)
        out[code][edge] = _BOX_EDGE
    head = np.hypot(x - 0.5, y - 0.27) < 0.15
    body = (np.abs(x - 0.5) < 0.22) & (y > 0.45) & (y < 0.92)
    for code, under in ((5, out[1]), (6, out[2])):
        out[code] = under
        out[code][body] = _PLAYER
        out[code][head] = _SKIN
    result = out.astype(np.uint8)
    result.setflags(write=False)
    return result


def render_rgb(codes: np.ndarray, px: int = 16) -> np.ndarray:
    """A fresh (height*px, width*px, 3) uint8 image of a (height, width) code grid."""
    h, w = codes.shape
    tiles = sprites(px)[codes]  # (h, w, px, px, 3)
    return np.ascontiguousarray(tiles.transpose(0, 2, 1, 3, 4)).reshape(h * px, w * px, 3)


def render_tiny(codes: np.ndarray, scale: int = 1) -> np.ndarray:
    """A fresh (height*scale, width*scale, 3) uint8 image with one flat colour per cell."""
    img = TINY_COLORS[codes]
    if scale > 1:
        img = img.repeat(scale, axis=0).repeat(scale, axis=1)
    return img


def render_text(codes: np.ndarray) -> str:
    """The symbol grid of a code grid (:data:`~.level.SYMBOLS`), one line per row."""
    return "\n".join("".join([SYMBOLS[c] for c in row]) for row in codes.tolist())
