"""The real ALFWorld text engine: TextWorld's PDDL environment behind ALFWorld's own wrappers (imported lazily)."""

from __future__ import annotations

from typing import Any

from agentbench_crbc.errors import EnvError

__all__ = ["make_engine", "uses_fast_parse"]


def make_engine(fast_parse: bool | None = None) -> Any:
    """A fresh ``PddlEnv`` wrapped by ALFWorld's ``AlfredDemangler`` and ``AlfredInfos``, as ``AlfredTWEnv`` builds it.

    The state carries ``won``, ``admissible_commands``, ``extra.gamefile`` and (always, from ``PddlEnv``) the raw
    ``_facts`` and ``_entity_infos`` that the anchor extractors read, so no extra engine work is requested.

    :param fast_parse: run the engine with the exact text-generation speedups of :mod:`.fastparse` (parse caches
        and a faster identical context copy: byte-identical output, steps several times faster) and the exact
        per-process PDDL translation cache of :mod:`.resetcache` (repeated loads/resets of a game are cheap;
        ``$ABC_ALFWORLD_RESETCACHE=0`` turns off only that); ``None`` (default)
        follows ``$ABC_ALFWORLD_FASTPARSE`` (on unless ``0``/``false``/``off``/``no``). When the installed
        textworld is not one they were checked against, the plain ``PddlEnv`` is used, without an error.
    """
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs import PddlEnv
    except ImportError as exc:
        raise EnvError("ALFWorld needs the alfworld and textworld packages: "
                       "pip install 'agentbench-crbc[alfworld]'") from exc
    from . import fastparse, resetcache

    if fast_parse is None:
        fast_parse = fastparse.enabled_by_default()
    engine_cls = PddlEnv
    if fast_parse and fastparse.install():
        resetcache.install()  # the translation cache rides on the same flag; declines quietly on its own
        engine_cls = fastparse.engine_class(PddlEnv)
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    return AlfredInfos(AlfredDemangler(engine_cls(infos), shuffle=False))


def uses_fast_parse(engine: Any) -> bool:
    """Whether ``engine`` (from :func:`make_engine`, wrapped or not) runs with the :mod:`.fastparse` speedups."""
    from . import fastparse

    while vars(engine).get("_wrapped_env") is not None:  # textworld wrappers forward attribute reads
        engine = vars(engine)["_wrapped_env"]
    return type(engine) in fastparse._engine_classes.values()
