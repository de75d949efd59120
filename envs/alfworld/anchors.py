"""ALFWorld anchor extractors: ``paper`` (CRBC's anchor, default), ``observation`` (verl-agent's) and ``state``.

Each extractor maps ``(observation, view)`` to a string key; equal keys mean "the same decision point" for
step-level credit. ``view`` is an :class:`EngineView` of the engine state after the step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentbench_crbc.anchors import AnchorRegistry
from agentbench_crbc.io import json_text

__all__ = ["ANCHOR_EXTRACTORS", "EXTRACTORS", "EngineView", "get_extractor", "item_states", "register_anchor_extractor"]

# Predicates that change during play (the rest of the PDDL state is the static room description).
_DYNAMIC = ("atlocation", "holds", "inreceptacle", "opened", "isclean", "ishot", "iscool", "ison", "istoggled",
            "issliced")
_FLAGS = ("isclean", "ishot", "iscool", "ison", "istoggled", "issliced")


@dataclass(frozen=True, slots=True)
class EngineView:
    """What the extractors read: readable dynamic facts, the agent's location and load, sorted admissible commands.

    :param facts: sorted ``pred(arg, ...)`` strings of the dynamic predicates, with engine names (``apple 1``).
    :param location: receptacles at the agent's location, comma-joined (``"middle of room"`` before moving).
    :param held: the held object's name, ``""`` when the hands are empty.
    :param items: per object, ``(name, container, flags)`` with container a receptacle name or ``"agent"``.
    :param admissible: sorted admissible commands without ``help``.
    """

    facts: tuple[str, ...]
    location: str
    held: str
    items: tuple[tuple[str, str, tuple[str, ...]], ...]
    admissible: tuple[str, ...]

    @classmethod
    def from_state(cls, state: Any, admissible: Iterable[str]) -> EngineView:
        """Build the view from a TextWorld game state (its raw ``_facts`` and ``_entity_infos``)."""
        infos = state["_entity_infos"]

        def name(var: Any) -> str:
            info = infos.get(var.name)
            return info.name.strip() if info is not None and info.name else var.name

        facts, at_loc, recep_locs = [], "", {}
        container: dict[str, str] = {}
        flags: dict[str, list[str]] = {}
        held = ""
        for f in state["_facts"]:
            pred = f.name
            if pred == "receptacleatlocation":
                recep_locs.setdefault(f.arguments[1].name, []).append(name(f.arguments[0]))
                continue
            if pred not in _DYNAMIC:
                continue
            args = [name(a) for a in f.arguments]
            if pred == "atlocation":
                at_loc = f.arguments[1].name
                args = [args[0], f.arguments[1].name]
            elif pred == "holds":
                held = args[1]
                container[args[1]] = "agent"
            elif pred == "inreceptacle":
                container[args[0]] = args[1]
            elif pred in _FLAGS:
                flags.setdefault(args[0], []).append(pred)
            facts.append(f"{pred}({', '.join(args)})")
        location = ", ".join(sorted(recep_locs.get(at_loc, []))) or "middle of room"
        items = tuple(sorted((obj, where, tuple(sorted(flags.get(obj, ())))) for obj, where in container.items()))
        return cls(tuple(sorted(facts)), location, held, items, tuple(admissible))


def item_states(view: EngineView) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{object: (container, flags)}`` of a view, to diff against the state at reset."""
    return {name: (where, flags) for name, where, flags in view.items}


def paper_anchor(observation: str, view: EngineView, initial: dict[str, Any] | None = None) -> str:
    """CRBC's ALFWorld anchor: observation + location + held item + item-transition record + admissible commands.

    The item-transition record lists every object whose container or state flags differ from the reset state, so
    two orders of the same moves meet at one anchor.
    """
    before = initial or {}
    record = [[obj, where, list(flags)] for obj, (where, flags) in sorted(item_states(view).items())
              if before.get(obj) != (where, flags)]
    return json_text([observation, view.location, view.held, record, list(view.admissible)],
                      separators=(",", ":"))


def observation_anchor(observation: str, view: EngineView, initial: dict[str, Any] | None = None) -> str:
    """The raw observation text (verl-agent's GiGPO anchor)."""
    return observation


def state_anchor(observation: str, view: EngineView, initial: dict[str, Any] | None = None) -> str:
    """The canonical dynamic facts of the game state (agent location, held item, placements, object states)."""
    return "\n".join(view.facts)


Extractor = Callable[[str, EngineView, "dict[str, Any] | None"], str]
#: name -> extractor ``fn(observation, view, initial) -> str``; add your own with :func:`register_anchor_extractor`.
ANCHOR_EXTRACTORS = AnchorRegistry("ALFWorld", {"paper": paper_anchor, "observation": observation_anchor,
                                                "state": state_anchor})
EXTRACTORS = ANCHOR_EXTRACTORS
register_anchor_extractor = ANCHOR_EXTRACTORS.register
get_extractor = ANCHOR_EXTRACTORS.extractor
