"""The real ALFWorld text engine: TextWorld's PDDL environment behind ALFWorld's own wrappers (imported lazily)."""

from __future__ import annotations

from typing import Any

from agentbench_crbc.errors import EnvError

__all__ = ["make_engine"]


def make_engine() -> Any:
    """A fresh ``PddlEnv`` wrapped by ALFWorld's ``AlfredDemangler`` and ``AlfredInfos``, as ``AlfredTWEnv`` builds it.

    The state carries ``won``, ``admissible_commands``, ``extra.gamefile`` and (always, from ``PddlEnv``) the raw
    ``_facts`` and ``_entity_infos`` that the anchor extractors read, so no extra engine work is requested.
    """
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs import PddlEnv
    except ImportError as exc:
        raise EnvError("ALFWorld needs the alfworld and textworld packages: "
                       "pip install 'agentbench-crbc[alfworld]'") from exc
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    return AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
