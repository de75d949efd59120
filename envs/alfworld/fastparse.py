"""Exact speedups for TextWorld's PDDL text generation: the only place ``abc/ALFWorld-v0`` patches textworld.

Why: after every command, ``PddlEnv._gather_infos`` derives the text of each admissible command through the game's
context-sensitive grammar (``textworld.envs.pddl.textgen.ContextSensitiveGrammar.derive``). Each ``derive`` first
parses its start text (``"go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]"``,
``"#GotoLocation.feedback#"``) with a tatsu parser, every rule condition and ``{... | query}`` it meets is parsed
again with the logic parser (``Rule.parse_conjunctive_query``), and every symbol gets a ``copy_context`` whose
``copy.deepcopy`` of the variables and mapping is the next biggest cost. There are only a few dozen distinct texts,
but they are parsed thousands of times per episode: about 70% of step time went into tatsu, 25% into deepcopy.

What (three replacements in the ``textgen`` module namespace, each on only inside :func:`active`):

* ``textgen._parse_and_convert(text, rule_name=...)`` -> the list of ``Symbol`` objects, cached in :data:`SYMBOLS`
  keyed on the parser object, the rule name and the text: the result depends on nothing else (not on the game,
  its grammar rules or its state; those are read only later, when the symbols are derived). The cache keeps one
  parsed copy and hands out a fresh copy of it on every call, because ``derive`` mutates the symbols it gets (it
  sets their ``context``). The copy rebuilds every ``Symbol`` object and shares only the immutable strings and the
  empty ``context`` dicts that a fresh parse shares too (the constructors' default argument), so it is what a
  fresh parse returns. A parse that yields anything else (an unknown type, a non-empty context) is not cached, a
  parse that raises is not cached, and a traced parse (``TW_CSG_TRACE``) bypasses the cache.
* ``Rule.parse_conjunctive_query(text)`` as ``textgen`` calls it -> the tuple of predicates, cached in
  :data:`QUERIES` keyed on the logic parser and the text. Every call still gets a new ``Rule("query", predicates,
  [])``, as the original builds it; only the ``Predicate`` value objects are shared (they have no mutating
  method, and ``State.all_assignments``, the only reader here, only reads them).
* ``textgen.copy_context(context)``: the same dict, with the same deep copies of ``variables`` and ``mapping``
  made by a specialised copier for ``EntityInfo``/``Placeholder``/``Variable`` that does what ``copy.deepcopy``
  does for these ``__slots__`` classes (see :func:`_context_copier`); anything else still goes to ``deepcopy``.

Both caches are per-process LRUs of :data:`CACHE_SIZE` entries (forked workers get their own copy).

How it is applied: :func:`install` puts the three in place once per process; they check a ``contextvars`` flag and
call textworld's own functions unless it is set, and :func:`engine_class` gives the ``PddlEnv`` subclass whose
``load``/``reset``/``step`` run with the flag set (per thread, per engine). Everyone else in the process (an
engine built with the speedup off, other textworld users) runs the unchanged textworld code. Nothing is installed
when the textworld version is not one this was checked against (:data:`TESTED_TEXTWORLD`) or the internals are not
the expected ones: the engine is then the plain ``PddlEnv``, without an error (:func:`unavailable_reason` says why).

Switch: ``ABC_ALFWORLD_FASTPARSE=0`` (or ``false``/``off``/``no``) turns it off by default for the process;
``gym.make("abc/ALFWorld-v0", fast_parse=False)`` or ``make_engine(fast_parse=False)`` for one env.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

__all__ = ["ACTIVE", "CACHE_SIZE", "ENV_VAR", "MISS", "QUERIES", "SYMBOLS", "TESTED_TEXTWORLD", "CacheGroup",
           "LRUCache", "active", "cache_info", "clear", "enabled_by_default", "engine_class", "env_switch", "install",
           "unavailable_reason"]

ENV_VAR = "ABC_ALFWORLD_FASTPARSE"
#: textworld versions whose ``textgen``/``logic`` internals this module was read against and tested with.
TESTED_TEXTWORLD = ("1.7.0",)
#: entries per cache. A game's grammar has ~100 distinct texts, shared by all ALFWorld games except the one task
#: text per game; an entry is a few small objects (< 2 KB), so a full cache holds a few MB.
CACHE_SIZE = 2048

#: whether the caches answer in this context (set by :func:`active`; the reset cache reads it too)
ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("abc_alfworld_fastparse", default=False)
#: the sentinel :meth:`LRUCache.get` returns for a key it does not hold
MISS = object()


class LRUCache:
    """A bounded, thread-safe least-recently-used map with hit/miss counters (per process; forks get a copy)."""

    def __init__(self, maxsize: int = CACHE_SIZE) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self.maxsize = maxsize
        self.hits = self.misses = 0
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value stored under ``key`` (now the most recently used) or the module's ``MISS`` sentinel."""
        with self._lock:
            value = self._data.get(key, MISS)
            if value is MISS:
                self.misses += 1
            else:
                self.hits += 1
                self._data.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value``; the least recently used entry goes when the cache is full."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def info(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize}


class CacheGroup:
    """Named caches reported and emptied together (each speedup module exports its group's ``info``/``clear``)."""

    def __init__(self, **caches: LRUCache) -> None:
        self.caches = caches

    def info(self) -> dict[str, dict[str, int]]:
        """Hits, misses, size and bound of each cache."""
        return {name: cache.info() for name, cache in self.caches.items()}

    def clear(self) -> None:
        """Empty every cache and reset its counters."""
        for cache in self.caches.values():
            cache.clear()


SYMBOLS = LRUCache()
QUERIES = LRUCache()
_CACHES = CacheGroup(symbols=SYMBOLS, queries=QUERIES)
#: hits, misses, size and bound of both caches
cache_info = _CACHES.info
#: empty both caches and reset their counters
clear = _CACHES.clear


def env_switch(name: str) -> bool:
    """False when environment variable ``name`` is ``0``, ``false``, ``off`` or ``no``; else (also unset) True."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "off", "no")


def enabled_by_default() -> bool:
    """False when ``$ABC_ALFWORLD_FASTPARSE`` is ``0``, ``false``, ``off`` or ``no``; else True."""
    return env_switch(ENV_VAR)


@contextlib.contextmanager
def active(on: bool = True) -> Iterator[None]:
    """Within this block (this thread/context only), the installed textgen parse calls use the caches."""
    token = ACTIVE.set(on)
    try:
        yield
    finally:
        ACTIVE.reset(token)


# -- installation -----------------------------------------------------------------------------------------------
_installed: dict[str, Any] = {}
_reason: str | None = None
_install_lock = threading.Lock()


def unavailable_reason() -> str | None:
    """Why :func:`install` declined (``None`` when it installed, or was not tried yet)."""
    return _reason


def install() -> bool:
    """Install the cached parse functions into ``textworld.envs.pddl.textgen`` (once per process).

    :return: True when installed; False (and nothing changed) when textworld's version or internals differ from
        the ones this module was written for.
    """
    global _reason
    with _install_lock:
        if _installed:
            return True
        try:
            import textworld
            import textworld.logic as logic
            from textworld.envs.pddl import textgen
        except ImportError as exc:  # pragma: no cover - the engine itself needs these
            _reason = f"textworld not importable: {exc}"
            return False
        version = getattr(textworld, "__version__", "?")
        if version not in TESTED_TEXTWORLD:
            _reason = f"textworld {version} is not a tested version ({', '.join(TESTED_TEXTWORLD)})"
            return False
        needed = ("_parse_and_convert", "_PARSER", "Rule", "Symbol", "TerminalSymbol", "NonterminalSymbol",
                  "EvalSymbol", "ListSymbol", "ConditionalSymbol", "ContextSensitiveGrammar")
        missing = [n for n in needed if not hasattr(textgen, n)]
        if missing or textgen.Rule is not logic.Rule or not hasattr(logic, "_PARSER") or \
                not callable(getattr(logic, "_parse_and_convert", None)) or \
                not hasattr(logic.Rule, "parse_conjunctive_query"):
            _reason = f"textworld {version} internals differ (missing {missing or 'logic parser hooks'})"
            return False
        fast_copy = _context_copier(textgen)
        if fast_copy is None:
            _reason = f"textworld {version} internals differ (entity/placeholder/variable copy protocol)"
            return False
        symbol_types = (textgen.TerminalSymbol, textgen.NonterminalSymbol, textgen.EvalSymbol, textgen.ListSymbol,
                        textgen.ConditionalSymbol)
        original_parse = textgen._parse_and_convert
        original_rule = textgen.Rule
        symbols_cache = _symbols_parser(textgen, original_parse, symbol_types)
        textgen._parse_and_convert = symbols_cache
        textgen.Rule = _query_rule_class(original_rule, logic)
        original_copy = textgen.copy_context
        textgen.copy_context = fast_copy
        _installed.update(textgen=textgen, parse=original_parse, rule=original_rule, copy_context=original_copy)
        _reason = None
        return True


def uninstall() -> None:
    """Put textworld's own functions back (for tests); the caches are kept."""
    with _install_lock:
        if _installed:
            textgen = _installed["textgen"]
            textgen._parse_and_convert = _installed["parse"]
            textgen.Rule = _installed["rule"]
            textgen.copy_context = _installed["copy_context"]
            _installed.clear()


def _symbols_parser(textgen: Any, original: Callable[..., Any], symbol_types: tuple[type, ...]) -> Callable[..., Any]:
    inits = [getattr(cls, "__init__") for cls in symbol_types]  # noqa: B009
    shared_defaults = {id(init.__defaults__[0]) for init in inits if getattr(init, "__defaults__", None)}
    base = textgen.Symbol

    def cacheable(symbol: Any) -> bool:
        if type(symbol) not in symbol_types:
            return False
        for value in vars(symbol).values():
            if isinstance(value, base):
                if not cacheable(value):
                    return False
            elif isinstance(value, dict):
                if value or id(value) not in shared_defaults:
                    return False
            elif value is not None and type(value) is not str:
                return False
        return True

    def clone(symbol: Any) -> Any:
        new = object.__new__(type(symbol))
        for name, value in vars(symbol).items():
            setattr(new, name, clone(value) if isinstance(value, base) else value)
        return new

    def parse_and_convert(*args: Any, **kwargs: Any) -> Any:
        rule_name = kwargs.get("rule_name")
        if not ACTIVE.get() or len(args) != 1 or type(args[0]) is not str or type(rule_name) is not str or \
                kwargs.get("trace") or set(kwargs) - {"rule_name", "trace"}:
            return original(*args, **kwargs)
        key = (textgen._PARSER, rule_name, args[0])
        cached = SYMBOLS.get(key)
        if cached is MISS:
            result = original(*args, **kwargs)
            if type(result) is list and all(cacheable(s) for s in result):
                SYMBOLS.put(key, [clone(s) for s in result])
            return result
        return [clone(s) for s in cached]

    parse_and_convert.__wrapped__ = original  # type: ignore[attr-defined]
    return parse_and_convert


def _query_rule_class(rule: Any, logic: Any) -> type:
    class QueryCachingRule(rule):  # type: ignore[misc, valid-type]
        """``textworld.logic.Rule`` whose ``parse_conjunctive_query`` reuses parsed predicates (see module doc)."""

        @classmethod
        def parse_conjunctive_query(cls, expr: str) -> Any:
            if not ACTIVE.get() or type(expr) is not str:
                return rule.parse_conjunctive_query(expr)
            key = (logic._PARSER, expr)
            predicates = QUERIES.get(key)
            if predicates is MISS:
                made = rule.parse_conjunctive_query(expr)
                QUERIES.put(key, made.preconditions)  # a tuple of Predicate value objects
                return made
            return rule("query", predicates, [])

    QueryCachingRule.__name__ = QueryCachingRule.__qualname__ = "Rule"
    QueryCachingRule.__module__ = rule.__module__
    return QueryCachingRule


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _context_copier(textgen: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """``textgen.copy_context`` with the same deep copies, made faster for the three value classes it copies.

    ``copy_context`` deep-copies ``variables`` (name -> ``EntityInfo``) and ``mapping`` (``Placeholder`` ->
    ``Variable``) with ``copy.deepcopy``; these are ``__slots__`` classes using the default pickle protocol, for
    which ``deepcopy`` builds ``cls.__new__(cls)`` and sets each set slot (``copyreg._slotnames`` order) to the
    deep copy of its value, sharing one memo. This does exactly that without the generic machinery: atomic values
    (``str``, ``int``, ``float``, ``bool``, ``None``) are shared as ``deepcopy`` shares them, repeated objects are
    copied once (the memo), and any other value goes to ``copy.deepcopy`` with the same memo. ``None`` when the
    classes do not use the default protocol (then nothing is installed).
    """
    import copy
    import copyreg

    try:
        from textworld.generator.game import EntityInfo
        from textworld.logic import Placeholder, Variable
    except ImportError:  # pragma: no cover - textworld 1.7 has them
        return None
    original = textgen.copy_context
    slots: dict[Any, tuple[str, ...]] = {}
    for cls in (EntityInfo, Placeholder, Variable):
        default_protocol = (cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
                            and getattr(cls, "__getstate__", object.__getstate__) is object.__getstate__
                            and not hasattr(cls, "__setstate__") and not hasattr(cls, "__deepcopy__")
                            and cls not in copyreg.dispatch_table and "__slots__" in vars(cls)
                            and cls.__mro__ == (cls, object))
        if not default_protocol:
            return None
        slots[cls] = tuple(copyreg._slotnames(cls))  # type: ignore[attr-defined]

    def deep(x: Any, memo: dict[int, Any]) -> Any:
        cls: Any = type(x)
        if cls in _ATOMIC:
            return x
        made = memo.get(id(x), memo)
        if made is not memo:
            return made
        names = slots.get(cls)
        if names is None:
            return copy.deepcopy(x, memo)
        y = cls.__new__(cls)
        memo[id(x)] = y
        for name in names:
            try:
                value = getattr(x, name)
            except AttributeError:  # an unset slot is left unset, as deepcopy leaves it
                continue
            setattr(y, name, value if type(value) in _ATOMIC else deep(value, memo))
        return y

    def deep_dict(d: Any) -> Any:
        if type(d) is not dict:
            return copy.deepcopy(d)
        memo: dict[int, Any] = {}
        y: dict[Any, Any] = {}
        memo[id(d)] = y
        for key, value in d.items():
            key = key if type(key) in _ATOMIC else deep(key, memo)
            y[key] = value if type(value) in _ATOMIC else deep(value, memo)
        return y

    def copy_context(context: Any) -> Any:
        if not ACTIVE.get():
            return original(context)
        return {
            "state": context["state"],
            "facts": context["facts"],
            "variables": deep_dict(context["variables"]),
            "mapping": deep_dict(context["mapping"]),
            "entity_infos": context["entity_infos"],
        }

    copy_context.__wrapped__ = original  # type: ignore[attr-defined]
    return copy_context


def engine_class(pddl_env: type) -> type:
    """The subclass of ``pddl_env`` (TextWorld's ``PddlEnv``) whose ``load``/``reset``/``step`` use the caches."""
    cls = _engine_classes.get(pddl_env)
    if cls is None:
        class FastParsePddlEnv(pddl_env):  # type: ignore[misc, valid-type]
            """``PddlEnv`` running its text generation with the exact parse caches of ``fastparse`` on."""

            def load(self, *args: Any, **kwargs: Any) -> Any:
                with active():
                    return super().load(*args, **kwargs)

            def reset(self, *args: Any, **kwargs: Any) -> Any:
                with active():
                    return super().reset(*args, **kwargs)

            def step(self, *args: Any, **kwargs: Any) -> Any:
                with active():
                    return super().step(*args, **kwargs)

        cls = _engine_classes[pddl_env] = FastParsePddlEnv
    return cls


_engine_classes: dict[type, type] = {}
