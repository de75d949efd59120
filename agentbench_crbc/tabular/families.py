"""Named MDP settings for the fidelity benchmark: ``rooms``, each environment family's tabular twin, JSON files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .mdp import MdpError, TabularMDP, load_mdp, mdp_from_dict
from .rooms import rooms_mdp_dict

__all__ = ["Setting", "fidelity_settings", "learning_task", "tabular_families"]

#: The generic fetch-and-place MDP (:mod:`.rooms`, no environment family's); the others are families' tabular twins.
ROOMS = "rooms"


@dataclass(frozen=True)
class Setting:
    """One MDP with one behaviour policy, under a short label for tables (``family/label``)."""

    family: str
    label: str
    build: Callable[[], dict[str, Any]]

    def mdp(self) -> TabularMDP:
        """Build (and validate) the MDP."""
        return mdp_from_dict(self.build(), name=f"{self.family}/{self.label}")


def _rooms(label: str, **kw: Any) -> Setting:
    return Setting("rooms", label, lambda: rooms_mdp_dict(0, **kw))


_ROOMS_SMALL = {"rooms": 2, "receptacles": 3, "horizon": 20}
_ROOMS_OBS = {"rooms": 3, "receptacles": 4, "horizon": 20, "slip": 0.1, "anchors": "observation"}

_ROOMS_SETTINGS: dict[str, dict[str, list[Setting]]] = {
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
_ROOMS_LEARNING = {
    "rooms": _rooms("4x5obs-learn", rooms=4, receptacles=5, horizon=25, slip=0.1, anchors="observation",
                    policy="boltzmann", temperature=1.5),
}


def _twins() -> dict[str, Any]:
    """Family name -> its tabular twin (``{"quick": [(label, build)], "full": [...], "learn": (label, build)}``)."""
    from ..host import get_host

    return {fam.name: fam.load("tabular") for fam in get_host().families if fam.tabular is not None}


def tabular_families() -> tuple[str, ...]:
    """The families with settings: every environment family with a tabular twin (by name), then ``rooms``; any
    JSON file in the schema is a family of its own (``--family path.json``)."""
    return (*_twins(), ROOMS)


def _twin_setting(family: str, entry: tuple[str, Callable[[], dict[str, Any]]]) -> Setting:
    label, build = entry
    return Setting(family, label, build)


def _json_setting(path: str) -> Setting:
    file = Path(path)
    if not file.is_file():
        raise MdpError(f"--family {path}: not a built-in family ({', '.join(tabular_families())}) nor a JSON file")
    mdp = load_mdp(file)  # validate now: a bad file fails before any work
    return Setting(file.stem, mdp.name, lambda: mdp.to_dict())


def fidelity_settings(family: str, mode: str) -> list[Setting]:
    """The settings of ``family`` (``rooms``, an environment family with a tabular twin, or a JSON path) in
    ``mode`` (``quick`` or ``full``)."""
    if family in _ROOMS_SETTINGS:
        return _ROOMS_SETTINGS[family][mode]
    twins = _twins()
    if family in twins:
        return [_twin_setting(family, e) for e in twins[family][mode]]
    return [_json_setting(family)]


def learning_task(family: str) -> Setting | None:
    """The learning task of a named family (None for JSON files: their behaviour policy is the start)."""
    if family in _ROOMS_LEARNING:
        return _ROOMS_LEARNING[family]
    learn = _twins().get(family, {}).get("learn")
    return _twin_setting(family, learn) if learn is not None else None
