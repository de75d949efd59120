"""Named MDP settings of the built-in families (``sokoban``, ``rooms``) and JSON files, for the fidelity benchmark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .mdp import MdpError, TabularMDP, load_mdp, mdp_from_dict
from .rooms import rooms_mdp_dict
from .sokoban import sokoban_mdp_dict

__all__ = ["FAMILIES", "Setting", "fidelity_settings", "learning_task"]

#: The built-in families; any JSON file in the schema is a family of its own (``--family path.json``).
FAMILIES = ("sokoban", "rooms")


@dataclass(frozen=True)
class Setting:
    """One MDP with one behaviour policy, under a short label for tables (``family/label``)."""

    family: str
    label: str
    build: Callable[[], dict[str, Any]]

    def mdp(self) -> TabularMDP:
        """Build (and validate) the MDP."""
        return mdp_from_dict(self.build(), name=f"{self.family}/{self.label}")


def _sok(label: str, **kw: Any) -> Setting:
    return Setting("sokoban", label, lambda: sokoban_mdp_dict(0, **kw))


def _rooms(label: str, **kw: Any) -> Setting:
    return Setting("rooms", label, lambda: rooms_mdp_dict(0, **kw))


_SOKOBAN_66 = {"size": 6, "boxes": 1, "horizon": 15, "min_moves": 10}
_SOKOBAN_77 = {"size": 7, "boxes": 2, "horizon": 20, "min_moves": 8}
_ROOMS_SMALL = {"rooms": 2, "receptacles": 3, "horizon": 20}
_ROOMS_OBS = {"rooms": 3, "receptacles": 4, "horizon": 20, "slip": 0.1, "anchors": "observation"}

_SETTINGS: dict[str, dict[str, list[Setting]]] = {
    "sokoban": {
        "quick": [_sok("6x6-eps0.3", **_SOKOBAN_66, eps=0.3)],
        "full": [_sok("6x6-eps0.2", **_SOKOBAN_66, eps=0.2), _sok("6x6-eps0.5", **_SOKOBAN_66, eps=0.5),
                 _sok("6x6-boltz0.5", **_SOKOBAN_66, policy="boltzmann", temperature=0.5),
                 _sok("6x6-boltz1", **_SOKOBAN_66, policy="boltzmann", temperature=1.0),
                 _sok("6x6-boltz2", **_SOKOBAN_66, policy="boltzmann", temperature=2.0),
                 _sok("7x7x2-eps0.3", **_SOKOBAN_77, eps=0.3),
                 _sok("7x7x2-boltz1", **_SOKOBAN_77, policy="boltzmann", temperature=1.0)],
    },
    "rooms": {
        "quick": [_rooms("2x3-eps0.3", **_ROOMS_SMALL, eps=0.3)],
        "full": [_rooms("2x3-eps0.2", **_ROOMS_SMALL, eps=0.2), _rooms("2x3-eps0.5", **_ROOMS_SMALL, eps=0.5),
                 _rooms("2x3-boltz1", **_ROOMS_SMALL, policy="boltzmann", temperature=1.0),
                 _rooms("2x3-boltz2", **_ROOMS_SMALL, policy="boltzmann", temperature=2.0),
                 _rooms("3x4obs-slip-eps0.3", **_ROOMS_OBS, eps=0.3),
                 _rooms("4x5-boltz1", rooms=4, receptacles=5, horizon=25, policy="boltzmann", temperature=1.0)],
    },
}

#: Learning tasks: the MDP and the initial policy (a weak behaviour policy, like an imperfect warm start).
_LEARNING = {
    "sokoban": _sok("7x7x2-learn", **_SOKOBAN_77, policy="boltzmann", temperature=1.5),
    "rooms": _rooms("4x5obs-learn", rooms=4, receptacles=5, horizon=25, slip=0.1, anchors="observation",
                    policy="boltzmann", temperature=1.5),
}


def _json_setting(path: str) -> Setting:
    file = Path(path)
    if not file.is_file():
        raise MdpError(f"--family {path}: not a built-in family ({', '.join(FAMILIES)}) nor a JSON file")
    mdp = load_mdp(file)  # validate now: a bad file fails before any work
    return Setting(file.stem, mdp.name, lambda: mdp.to_dict())


def fidelity_settings(family: str, mode: str) -> list[Setting]:
    """The settings of ``family`` (a built-in name or a JSON path) in ``mode`` (``quick`` or ``full``)."""
    if family in _SETTINGS:
        return _SETTINGS[family][mode]
    return [_json_setting(family)]


def learning_task(family: str) -> Setting | None:
    """The learning task of a built-in family (None for JSON files: their behaviour policy is the start)."""
    return _LEARNING.get(family)
