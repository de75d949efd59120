"""Exact per-process caches of Fast Downward's PDDL translation and of the game-logic parse: cheap loads and resets
of ``abc/ALFWorld-v0``.

Why: after :mod:`.fastparse`, a step takes a few ms but a load + reset about 1.4 s, nearly all of it in
``fast_downward.pddl2sas`` (the translator's grounding, ``instantiate.explore``, and SAS encoding). TextWorld's
``PddlState.__init__`` calls it twice, once plain (``self.task, self.sas``: the task's actions, types, objects and
initial facts are read, the SAS text is loaded into the engine) and once ``optimize=True`` (only the SAS text is
kept, for the planner); ``PddlEnv.load`` builds a ``PddlState`` and so does every ``PddlEnv.reset``. A load + reset
therefore translates the same problem four times, and a group of G rollouts resetting one game in one process
does it 4G times, with the same result every time.

What: ``fast_downward.pddl2sas(domain, problem, verbose=False, optimize=False)`` is replaced (in the
``fast_downward`` package namespace, where ``PddlState`` looks it up at call time) by one that serves the result
from :data:`TRANSLATIONS`, a per-process LRU of :data:`CACHE_SIZE` translations keyed on the exact domain text, the
exact problem text and ``optimize``: everything the translation reads. (The translator's options are set by
``pddl2sas`` itself from ``optimize`` on every call, and the translation is deterministic within a process; the
tests check that a second translation of a game gives the same bytes.)

Why it is exact:

* The SAS text is a ``str`` (immutable): the cached one is handed out as is.
* The task (``fast_downward.translate.pddl.Task``, mutable) is never shared. The cache stores it pickled (bytes);
  every hit gets a new object graph from ``pickle.loads``, and the translated task itself goes to the caller of the
  miss that made it. On a miss the pickle is accepted only if unpickling it and pickling again gives the same
  bytes, so a copy holds the same values, in the same order in every list, dict and set, with the same sharing
  between objects as the task the translator returned (the stored ``hash`` fields of its conditions included: they
  were computed in this process). Otherwise (or if pickling fails) nothing is cached and the result is returned as
  the plain call returns it.
* The call's lasting side effects on the process are replayed on a hit: ``pddl2sas`` sets ``sys.argv`` to
  ``["translate.py", "domain", "task"]`` and sets the translator's ``options`` module; a hit sets ``sys.argv`` the
  same way and restores the ``options`` values the miss left (both as recorded right after the miss).
* ``verbose=True`` (``TW_PDDL_DEBUG``), non-``str`` inputs or other arguments bypass the cache.

The second cache, :data:`GRAMMARS` (same bound), serves ``textworld.envs.pddl.logic._parse_and_convert(text,
rule_name=...)``, the tatsu parse of the game's ``grammar`` text (its actions and text grammar) that ``GameLogic``
makes on every ``PddlEnv.load`` (16 ms with fastparse's symbol cache, ~70 ms without), keyed on the text and the
rule name, the same way: stored pickled (accepted only if re-pickling gives the same bytes), every call gets a new
unpickled ``(actions, grammar)``. The one difference to a fresh parse that pickling cannot keep: in a fresh parse
every symbol's empty ``context`` is the constructors' shared default dict, in a copy a dict shared by that copy
only; textgen never mutates a context in place (it rebinds ``symbol.context``, and ``replace`` deep-copies a rule's
symbols before use), so nothing can observe it.

Memory: a translation entry is the pickled task (~70-90 KB for a generated game) plus the SAS text (~0.4-0.8 MB),
plus the key's domain and problem texts (~50-65 KB): 0.5 MB on average over the benchmark's games, at most ~1 MB, so
the default 32 translations (16 games, two each) hold at most a few tens of MB per process. A training group
resetting one game G times needs 2 entries. A grammar entry is ~20 KB plus its ~13 KB key.

How it is applied: :func:`install` (once per process, from ``make_engine``) puts the replacement in place; it
serves from the cache only while the ``fastparse`` flag is set, i.e. inside ``load``/``reset``/``step`` of an engine
built by ``make_engine`` with ``fast_parse`` on. Every other caller of ``pddl2sas`` in the process gets the plain
function. Nothing is installed when ``fast_downward_textworld`` or textworld is not a version this was checked
against (:data:`TESTED_FAST_DOWNWARD`, ``fastparse.TESTED_TEXTWORLD``): the engine then translates every time,
without an error (:func:`unavailable_reason` says why).

Switch: off with everything else in ``fastparse`` (``fast_parse=False``, ``ABC_ALFWORLD_FASTPARSE=0``); or alone,
keeping the step speedups, with ``ABC_ALFWORLD_RESETCACHE=0`` (``false``/``off``/``no``), read at every
translation.
"""

from __future__ import annotations

import inspect
import pickle
import sys
import threading
from collections.abc import Callable
from typing import Any

from .fastparse import ACTIVE, MISS, TESTED_TEXTWORLD, CacheGroup, LRUCache, env_switch

__all__ = ["CACHE_SIZE", "ENV_VAR", "GRAMMARS", "TESTED_FAST_DOWNWARD", "TRANSLATIONS", "cache_info", "clear",
           "enabled", "install", "unavailable_reason", "uninstall"]

ENV_VAR = "ABC_ALFWORLD_RESETCACHE"
#: ``fast_downward_textworld`` versions whose ``pddl2sas`` this was read against and tested with.
TESTED_FAST_DOWNWARD = ("20.6.4",)
#: translations kept per process (a game needs two: plain and optimized).
CACHE_SIZE = 32
TRANSLATIONS = LRUCache(CACHE_SIZE)
GRAMMARS = LRUCache(CACHE_SIZE)
_CACHES = CacheGroup(translations=TRANSLATIONS, grammars=GRAMMARS)
#: hits, misses, size and bound of the translation and grammar caches
cache_info = _CACHES.info
#: empty both caches and reset their counters
clear = _CACHES.clear


def enabled() -> bool:
    """False when ``$ABC_ALFWORLD_RESETCACHE`` is ``0``, ``false``, ``off`` or ``no``; else True."""
    return env_switch(ENV_VAR)


_installed: dict[str, Any] = {}
_reason: str | None = None
_lock = threading.Lock()


def unavailable_reason() -> str | None:
    """Why :func:`install` declined (``None`` when it installed, or was not tried yet)."""
    return _reason


def _version(dist: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def install() -> bool:
    """Replace ``fast_downward.pddl2sas`` and textworld's PDDL-logic parse by the caching ones (once per process).

    :return: True when installed; False (nothing changed) on an untested fast_downward/textworld or other internals.
    """
    global _reason
    with _lock:
        if _installed:
            return True
        try:
            import fast_downward
            import textworld
            from textworld.envs.pddl import logic as pddl_logic
        except ImportError as exc:  # pragma: no cover - the engine itself needs these
            _reason = f"fast_downward/textworld not importable: {exc}"
            return False
        versions = (_version("fast_downward_textworld"), getattr(textworld, "__version__", "?"))
        if versions[0] not in TESTED_FAST_DOWNWARD or versions[1] not in TESTED_TEXTWORLD:
            _reason = (f"fast_downward_textworld {versions[0]} / textworld {versions[1]} is not a tested pair "
                       f"({', '.join(TESTED_FAST_DOWNWARD)} / {', '.join(TESTED_TEXTWORLD)})")
            return False
        original: Any = getattr(fast_downward, "pddl2sas", None)
        try:
            params = list(inspect.signature(original).parameters) if callable(original) else []
        except (TypeError, ValueError):  # pragma: no cover
            params = []
        parse: Any = getattr(pddl_logic, "_parse_and_convert", None)
        if params != ["domain", "problem", "verbose", "optimize"] or \
                getattr(pddl_logic, "fast_downward", None) is not fast_downward or not callable(parse) or \
                not hasattr(pddl_logic, "GameLogic"):
            _reason = "fast_downward.pddl2sas or textworld's use of it differs from the tested one"
            return False
        fast_downward.pddl2sas = _caching_pddl2sas(original)  # type: ignore[union-attr]
        pddl_logic._parse_and_convert = _caching_logic_parse(parse)
        _installed.update(module=fast_downward, original=original, logic=pddl_logic, parse=parse)
        _reason = None
        return True


def uninstall() -> None:
    """Put the plain ``pddl2sas`` and logic parse back (for tests); the caches are kept."""
    with _lock:
        if _installed:
            _installed["module"].pddl2sas = _installed["original"]
            _installed["logic"]._parse_and_convert = _installed["parse"]
            _installed.clear()


_ATOMIC = (str, int, float, bool, type(None))


#: the translator's options module; imported by the first translation (importing it parses ``sys.argv``)
_OPTIONS = "fast_downward.translate.options"


def _options_state() -> dict[str, Any]:
    """The translator's option values (the public plain values of its ``options`` module, once imported)."""
    options = sys.modules.get(_OPTIONS)
    if options is None:
        return {}
    return {k: v for k, v in vars(options).items() if not k.startswith("_") and type(v) in _ATOMIC}


def _caching_pddl2sas(original: Callable[..., Any]) -> Callable[..., Any]:
    def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: Any = False) -> Any:
        if not ACTIVE.get() or verbose or type(domain) is not str or type(problem) is not str or \
                type(optimize) is not bool or not enabled():
            return original(domain, problem, verbose=verbose, optimize=optimize)
        key = (domain, problem, optimize)
        entry = TRANSLATIONS.get(key)
        if entry is MISS:
            task, sas = original(domain, problem, verbose=verbose, optimize=optimize)
            blob = _pickled_if_exact(task)
            if blob is not None and type(sas) is str:
                TRANSLATIONS.put(key, (blob, sas, list(sys.argv), _options_state()))
            return task, sas
        blob, sas, argv, state = entry
        sys.argv = list(argv)
        if state:  # the miss imported the options module: it is in sys.modules
            vars(sys.modules[_OPTIONS]).update(state)
        return pickle.loads(blob), sas

    pddl2sas.__wrapped__ = original  # type: ignore[attr-defined]
    return pddl2sas



def _pickled_if_exact(value: Any) -> bytes | None:
    """``value`` pickled, if unpickling and pickling again gives the same bytes; else ``None``."""
    try:
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        return blob if pickle.dumps(pickle.loads(blob), protocol=pickle.HIGHEST_PROTOCOL) == blob else None
    except Exception:
        return None


def _caching_logic_parse(original: Callable[..., Any]) -> Callable[..., Any]:
    def parse_and_convert(*args: Any, **kwargs: Any) -> Any:
        rule_name = kwargs.get("rule_name")
        if not ACTIVE.get() or len(args) != 1 or type(args[0]) is not str or set(kwargs) != {"rule_name"} or \
                type(rule_name) is not str or not enabled():
            return original(*args, **kwargs)
        key = (rule_name, args[0])
        blob = GRAMMARS.get(key)
        if blob is MISS:
            result = original(*args, **kwargs)
            blob = _pickled_if_exact(result)
            if blob is not None:
                GRAMMARS.put(key, blob)
            return result
        return pickle.loads(blob)

    parse_and_convert.__wrapped__ = original  # type: ignore[attr-defined]
    return parse_and_convert
