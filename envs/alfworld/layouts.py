"""Room layouts shipped in the ``alfworld`` wheel, the six task families and the train/valid room splits."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from agentbench_crbc.errors import EnvError
from agentbench_crbc.io import read_json

__all__ = [
    "PAPER_NAMES",
    "SPLITS",
    "TASK_TYPES",
    "Layout",
    "load_layout",
    "scenes_for",
    "task_type_of",
]

#: ALFWorld's task types, in ALFWorld's numbering order (1..6).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
#: The names the papers (and the leaderboard) use for them.
PAPER_NAMES = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
SPLITS = ("train", "valid_seen", "valid_unseen")

# Room types per task family, as ALFRED's ``constants.GOALS_VALID``.
_ROOMS = {
    "pick_and_place_simple": ("Kitchen", "LivingRoom", "Bedroom", "Bathroom"),
    "pick_two_obj_and_place": ("Kitchen", "LivingRoom", "Bedroom", "Bathroom"),
    "look_at_obj_in_light": ("LivingRoom", "Bedroom"),
    "pick_clean_then_place_in_recep": ("Kitchen", "Bathroom"),
    "pick_heat_then_place_in_recep": ("Kitchen",),
    "pick_cool_then_place_in_recep": ("Kitchen",),
}
_ROOM_BASE = {"Kitchen": 0, "LivingRoom": 200, "Bedroom": 300, "Bathroom": 400}


def task_type_of(name: str) -> str:
    """ALFWorld's task type for an ALFWorld or paper name (``"pick2"`` -> ``"pick_two_obj_and_place"``)."""
    if name in TASK_TYPES:
        return name
    for full, short in PAPER_NAMES.items():
        if name == short:
            return full
    from agentbench_crbc.errors import ConfigError

    raise ConfigError(f"unknown ALFWorld task type {name!r}; choose from "
                      f"{', '.join(PAPER_NAMES.values())} (or ALFWorld's names {', '.join(TASK_TYPES)})")


def scenes_for(split: str, task_type: str) -> tuple[int, ...]:
    """Floor plans a split draws rooms from for one task family.

    ``train`` and ``valid_seen`` use ALFRED's 24 training rooms of each room type (7-30); ``valid_unseen`` uses the
    6 held-out ones (1-6), so its rooms never appear in training. Look tasks keep only rooms with a desk lamp.
    """
    if split not in SPLITS:
        from agentbench_crbc.errors import ConfigError

        raise ConfigError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    numbers = range(1, 7) if split == "valid_unseen" else range(7, 31)
    scenes = tuple(_ROOM_BASE[room] + n for room in _ROOMS[task_type] for n in numbers)
    if task_type == "look_at_obj_in_light":
        scenes = tuple(s for s in scenes if "DeskLamp" in load_layout(s).object_types)
    return scenes


@dataclass(frozen=True, slots=True)
class Layout:
    """One room: object types present, receptacle ids with their interaction pose, reachable floor points."""

    scene: int
    object_types: tuple[str, ...]
    receptacles: tuple[tuple[str, tuple[float, float, int, int]], ...]
    points: tuple[tuple[float, float], ...]


def _layout_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        from agentbench_crbc.errors import EnvError

        raise EnvError("ALFWorld needs the alfworld package: pip install 'agentbench-crbc[alfworld]'")
    return Path(next(iter(spec.submodule_search_locations))) / "gen" / "layouts"


@functools.lru_cache(maxsize=256)
def load_layout(scene: int) -> Layout:
    """Read ``FloorPlan{scene}-objects.json``, ``-openable.json`` and ``-layout.npy`` from the alfworld wheel."""
    import numpy as np

    folder = _layout_dir()
    objects = read_json(folder / f"FloorPlan{scene}-objects.json", error=EnvError)
    openable = read_json(folder / f"FloorPlan{scene}-openable.json", error=EnvError)
    points = np.load(folder / f"FloorPlan{scene}-layout.npy")
    receps = tuple(sorted((k, (float(v[0]), float(v[1]), int(v[2]), int(v[3]))) for k, v in openable.items()))
    pts = tuple(sorted((float(x), float(z)) for x, z in points))
    return Layout(scene, tuple(sorted(set(objects))), receps, pts)
