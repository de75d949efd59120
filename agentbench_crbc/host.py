"""The plugin host: a pluggy manager that loads the ``agentbench_crbc`` entry points and holds the registries."""

from __future__ import annotations

import importlib.metadata as md
import inspect
import logging
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from .errors import DuplicateNameError, OptionError, PluginError, UnknownNameError

if TYPE_CHECKING:
    from .family import EnvFamily

__all__ = [
    "BUILTIN_DISTRIBUTION",
    "Bound",
    "BrokenPlugin",
    "CreditMethod",
    "CreditRegister",
    "EngineRegister",
    "FamilyRegister",
    "GateRegister",
    "Host",
    "PluginManager",
    "RegisteredEngine",
    "RegisteredGate",
    "describe_error",
    "get_host",
    "get_plugin_manager",
    "host_building",
    "options_of",
    "reset_host",
]

log = logging.getLogger(__name__)

BUILTIN_DISTRIBUTION = "agentbench-crbc"


def options_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """A method's (or gate's) options: its keyword-only parameters, and its ordinary parameters with a default
    (``def m(batch, gamma=0.9)``: passed by keyword too, so ``gamma`` is an option, shown and settable)."""
    out: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            out[p.name] = None if p.default is inspect.Parameter.empty else p.default
        elif p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is not inspect.Parameter.empty:
            out[p.name] = p.default
    return out


@dataclass(frozen=True)
class Bound:
    """The allowed values of one option, declared where a plugin registers its method (``bounds={...}``) and
    checked when a config is resolved, before any rollout.

    A number must be finite and lie in the interval (``integer``: a whole number); ``choices`` are allowed besides
    (or, with no interval, instead), e.g. ``Bound(0, 1000, integer=True, choices=(None, "inf"))``. Strings among
    the choices match case-insensitively.
    """

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    choices: tuple[Any, ...] = ()

    @property
    def numeric(self) -> bool:
        return self.integer or not (self.choices and math.isinf(self.lo) and math.isinf(self.hi))

    def __str__(self) -> str:
        parts = []
        if self.numeric:
            kind = "an integer" if self.integer else "a finite number"
            lo = "" if math.isinf(self.lo) else ("(" if self.lo_open else "[") + f"{self.lo:g}"
            hi = "" if math.isinf(self.hi) else f"{self.hi:g}" + (")" if self.hi_open else "]")
            if lo and hi:
                parts.append(f"{kind} in {lo}, {hi}")
            elif lo:
                parts.append(f"{kind} {'>' if self.lo_open else '>='} {self.lo:g}")
            elif hi:
                parts.append(f"{kind} {'<' if self.hi_open else '<='} {self.hi:g}")
            else:
                parts.append(kind)
        if self.choices:
            parts.append("one of " + ", ".join("null" if c is None else repr(c) for c in self.choices))
        return ", or ".join(parts)

    def allows(self, value: Any) -> bool:
        """Whether ``value`` is allowed."""
        for c in self.choices:
            if value is c or (type(value) is type(c) and value == c) or (
                    isinstance(value, str) and isinstance(c, str) and value.strip().lower() == c.lower()):
                return True
        if not self.numeric or isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        try:
            if not math.isfinite(value) or (self.integer and not float(value).is_integer()):
                return False
        except OverflowError:  # an integer of hundreds of digits: beyond every bound
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below


def _shown(value: Any) -> str:
    """``repr(value)`` cut to 60 characters; an integer of hundreds of digits by its size (``repr`` of one over
    4300 digits raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_options(name: str, declared: Mapping[str, Any], bounds: Mapping[str, Bound],
                   options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise OptionError(f"{name}: unknown option {key!r}; options are: {known}")
        default = declared[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            raise OptionError(f"{name}: option {key}={_shown(value)} must be true or false")
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise OptionError(f"{name}: option {key}={_shown(value)} is too large for a number") from None
        if isinstance(default, (int, float)) and not isinstance(default, bool) and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise OptionError(f"{name}: option {key}={_shown(value)} must be a number")
        if isinstance(default, str) and not isinstance(value, str):
            raise OptionError(f"{name}: option {key}={_shown(value)} must be a string")
        bound = bounds.get(key)
        if bound is not None and not bound.allows(value):
            raise OptionError(f"{name}: option {key}={_shown(value)} must be {bound}")
        out[key] = value
    return out


@dataclass(frozen=True)
class CreditMethod:
    """A registered credit assigner: ``fn(group, **options) -> list[ndarray]`` or, when ``batched``,
    ``fn(batch: StepBatch, **options) -> ndarray`` over all steps."""

    name: str
    fn: Callable[..., Any]
    batched: bool
    plugin: str
    distribution: str
    version: str
    options: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""

    bounds: Mapping[str, Bound] = field(default_factory=dict)
    #: ``explain(batch: StepBatch, **options) -> list[GroupExplanation]``, the method's per-group diagnostics
    #: (``abc credit METHOD FILE --explain``), or ``None`` when it has none
    explain: Callable[..., Any] | None = None
    #: the display name on leaderboards and figures (``GiGPO``); the name itself when the plugin gave none
    label: str = ""
    #: the options the method runs with in presets: ``{base: options}`` for every preset built on a base (``paper``,
    #: ``cpu-demo``), ``{"base/family": options}`` for those of one env family (laid over the base's)
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: whether its credit is one value per trajectory (GRPO, RLOO): the baselines step-level methods must beat
    trajectory_level: bool = False

    def preset_options(self, base: str, family: str) -> dict[str, Any]:
        """The options a preset built on ``base`` for env family ``family`` gives this method (empty: its
        defaults)."""
        return {**self.presets.get(base, {}), **self.presets.get(f"{base}/{family}", {})}

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``options`` with ints widened to floats where the default is a float; reject unknown keys, values
        of the wrong type and values outside the method's declared :class:`Bound` (one-line OptionError)."""
        return _check_options(self.name, self.options, self.bounds, options)


@dataclass(frozen=True)
class RegisteredGate:
    """A registered group gate: ``fn(actions: Sequence[Sequence[str]], step: int, **options) -> bool``."""

    name: str
    fn: Callable[..., Any]
    plugin: str
    distribution: str
    version: str
    options: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    bounds: Mapping[str, Bound] = field(default_factory=dict)

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Like :meth:`CreditMethod.check_options`, for the gate's options."""
        return _check_options(self.name, self.options, self.bounds, options)


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to load or register; it is skipped and the others keep working."""

    distribution: str
    entry_point: str
    error: str

    def __str__(self) -> str:
        return f"plugin {self.entry_point!r} of {self.distribution} is broken and was skipped: {self.error}"


def describe_error(exc: BaseException) -> str:
    """``Type: first line of the message``, for one-line reports."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _summary(fn: Callable[..., Any]) -> str:
    doc = (inspect.getdoc(fn) or "").strip().splitlines()
    return doc[0] if doc else ""


class _Register:
    """Shared bookkeeping of a name registry filled by one hook."""

    kind = "item"

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._plugin = "<direct>"
        self._dist = ("<unknown>", "")

    def _bounds(self, name: str, fn: Callable[..., Any], bounds: Mapping[str, Bound] | None) -> dict[str, Bound]:
        out = dict(bounds or {})
        options = options_of(fn)
        for key, bound in out.items():
            if key not in options or not isinstance(bound, Bound):
                raise PluginError(f"{self._plugin}: bounds of {self.kind} {name!r} must map its options "
                                  f"({', '.join(sorted(options)) or 'none'}) to Bound, got {key!r}: {bound!r}")
        return out

    def _claim(self, name: str, fn: Any) -> None:
        if not isinstance(name, str) or not name:
            raise PluginError(f"{self._plugin}: a {self.kind} name must be a non-empty string, got {name!r}")
        if not (name.isascii() and name.isidentifier()):  # names go into run folders, file names and command lines
            raise PluginError(f"{self._plugin}: {self.kind} name {name[:60]!r} is not an identifier; use ASCII "
                              "letters, digits and '_' (not starting with a digit), e.g. 'my_method'")
        if not callable(fn):
            raise PluginError(f"{self._plugin}: {self.kind} {name!r} must be a function, got {type(fn).__name__}")
        if name in self._items:
            first = self._items[name]
            exc = DuplicateNameError(
                f"{self.kind} {name!r} is registered by both {first.plugin} ({first.distribution}) and "
                f"{self._plugin} ({self._dist[0]}); uninstall one or set ABC_DISABLE_PLUGIN_AUTOLOAD=1"
            )
            exc.holder = first  # type: ignore[attr-defined]
            raise exc

    def names(self) -> list[str]:
        return sorted(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def get(self, name: str) -> Any:
        try:
            return self._items[name]
        except KeyError:
            installed = ", ".join(self.names()) or "none"
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; installed: {installed} (see `abc plugins`)"
            ) from None


class CreditRegister(_Register):
    """Registry of credit assigners, passed to ``abc_register_credit_assigners``."""

    kind = "credit method"

    def _put(self, name: str, fn: Callable[..., Any], batched: bool, bounds: Mapping[str, Bound] | None,
             explain: Callable[..., Any] | None, label: str | None, presets: Mapping[str, Mapping[str, Any]] | None,
             trajectory_level: bool) -> None:
        self._claim(name, fn)
        if explain is not None and not callable(explain):
            raise PluginError(f"{self._plugin}: explain of credit method {name!r} must be a function, got "
                              f"{type(explain).__name__}")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise PluginError(f"{self._plugin}: label of credit method {name!r} must be a non-empty string, got "
                              f"{label!r}")
        method = CreditMethod(
            name, fn, batched, self._plugin, self._dist[0], self._dist[1], options_of(fn), _summary(fn),
            self._bounds(name, fn, bounds), explain, label.strip() if label is not None else name,
            {}, bool(trajectory_level),
        )
        self._items[name] = replace(method, presets=self._presets(method, presets or {}))

    def _presets(self, method: CreditMethod, presets: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """``presets`` checked: string keys, each a table of the method's options within its bounds."""
        out: dict[str, dict[str, Any]] = {}
        for key, table in presets.items():
            if not isinstance(key, str) or not key or not isinstance(table, Mapping):
                raise PluginError(f"{self._plugin}: presets of credit method {method.name!r} must map a preset base "
                                  f"('paper', or 'paper/FAMILY' for one env family) to a table of options, got "
                                  f"{key!r}: {table!r}")
            try:
                method.check_options(table)
            except OptionError as exc:
                raise PluginError(f"{self._plugin}: presets[{key!r}] of {exc}") from None
            out[key] = dict(table)  # as given: a preset resolves to the values its plugin wrote
        return out

    def add(self, name: str, fn: Callable[..., Any], *, bounds: Mapping[str, Bound] | None = None,
            explain: Callable[..., Any] | None = None, label: str | None = None,
            presets: Mapping[str, Mapping[str, Any]] | None = None, trajectory_level: bool = False) -> None:
        """Register ``fn(group: Group, **options) -> list[np.ndarray]`` (one array per trajectory) as ``name``.

        :param bounds: the allowed values of options (``{"beta": Bound(0, 1, lo_open=True)}``), checked when a
            config is resolved and before every call.
        :param explain: ``explain(batch: StepBatch, **options) -> list[GroupExplanation]``, what
            ``abc credit NAME FILE --explain`` and :func:`agentbench_crbc.credit.explain` report.
        :param label: the display name on leaderboards and figures (``"GiGPO"``; default: ``name``).
        :param presets: the options the method runs with in ``abc train --preset``: ``{"paper": {...}}`` for every
            preset on the ``paper`` base, ``{"paper/alfworld": {...}}`` for one env family's (laid over the base's).
        :param trajectory_level: its credit is one value per trajectory (a baseline for step-level methods).
        """
        self._put(name, fn, False, bounds, explain, label, presets, trajectory_level)

    def add_batched(self, name: str, fn: Callable[..., Any], *, bounds: Mapping[str, Bound] | None = None,
                    explain: Callable[..., Any] | None = None, label: str | None = None,
            presets: Mapping[str, Mapping[str, Any]] | None = None, trajectory_level: bool = False) -> None:
        """Register ``fn(batch: StepBatch, **options) -> np.ndarray`` (one value per step of the batch); ``bounds``,
        ``explain``, ``label``, ``presets`` and ``trajectory_level`` as in :meth:`add`."""
        self._put(name, fn, True, bounds, explain, label, presets, trajectory_level)


class GateRegister(_Register):
    """Registry of rollout-time group gates, passed to ``abc_register_group_gates``."""

    kind = "group gate"

    def add(self, name: str, fn: Callable[..., Any], *, bounds: Mapping[str, Bound] | None = None) -> None:
        """Register ``fn(actions, step, **options) -> bool`` as ``name``; ``bounds`` as in
        :meth:`CreditRegister.add`."""
        self._claim(name, fn)
        self._items[name] = RegisteredGate(name, fn, self._plugin, self._dist[0], self._dist[1], options_of(fn),
                                           _summary(fn), self._bounds(name, fn, bounds))


@dataclass(frozen=True)
class RegisteredEngine:
    """A registered policy engine: ``factory(request) -> PolicyEngine``, ``factory`` maybe a ``"module:attr"``
    string (imported on first use, so optional engines cost nothing until chosen)."""

    name: str
    factory: Any
    plugin: str
    distribution: str
    version: str
    summary: str = ""
    #: the pip extra the engine needs, named in the error when it is missing
    extra: str | None = None
    #: the ``EngineRequest.options`` keys the factory reads (``rollout.engine_options``, ``--engine-option``),
    #: checked before it is called; ``None``: not declared, every key is passed on unchecked
    options: tuple[str, ...] | None = None
    #: ``(option, default)``: the option that sets the share of GPU memory the engine holds while awake, and its
    #: default beside the trainer (the memory estimate reads it); ``None``: it holds no memory of its own
    gpu_share: tuple[str, float] | None = None

    def load(self) -> Callable[..., Any]:
        """The factory, imported if it was given as a string."""
        from .family import load_ref

        fn = load_ref(self.factory, what=f"rollout engine {self.name!r} factory")
        if not callable(fn):
            raise PluginError(f"rollout engine {self.name!r}: factory {self.factory!r} is not callable")
        return fn  # type: ignore[no-any-return]


@dataclass(frozen=True)
class RegisteredFamily:
    """A registered environment family and the distribution that provided it."""

    name: str
    family: EnvFamily
    plugin: str
    distribution: str
    version: str

    @property
    def summary(self) -> str:
        return f"{self.family.label}: {', '.join(i.id for i in self.family.ids)}"


class FamilyRegister(_Register):
    """Registry of environment families, passed to ``abc_register_env_families``."""

    kind = "env family"

    def add(self, family: EnvFamily) -> None:
        """Register ``family`` (an :class:`~agentbench_crbc.family.EnvFamily`); its ids must not clash with another
        family's."""
        from .family import EnvFamily

        if not isinstance(family, EnvFamily):
            raise PluginError(f"{self._plugin}: register.add() takes an EnvFamily, got {type(family).__name__}")
        self._claim(family.name, lambda: None)
        for other in self._items.values():
            clash = {i.id for i in other.family.ids} & {i.id for i in family.ids}
            if clash:
                exc = DuplicateNameError(
                    f"env id {sorted(clash)[0]!r} is declared by family {other.name!r} of {other.distribution} "
                    f"and by family {family.name!r} of {self._dist[0]}; uninstall one")
                exc.holder = other  # type: ignore[attr-defined]
                raise exc
        _check_ids_are_new(family, self._plugin)
        self._items[family.name] = RegisteredFamily(family.name, family, self._plugin, self._dist[0],
                                                    self._dist[1])

    def __iter__(self) -> Iterator[Any]:  # the specs themselves, sorted by name
        return iter(self._items[n].family for n in self.names())

    def entries(self) -> list[RegisteredFamily]:
        """The registered families with their distributions, sorted by name."""
        return [self._items[n] for n in self.names()]

    def get(self, name: str) -> Any:
        return super().get(name).family


def _check_ids_are_new(family: EnvFamily, plugin: str) -> None:
    """A family may not claim a Gymnasium id that something else registered (``CartPole-v1``): only its own
    earlier registration of the id (the same entry point) is allowed."""
    import gymnasium

    for spec in family.ids:
        known = gymnasium.registry.get(spec.id)
        if known is not None and known.entry_point != spec.entry_point:
            raise DuplicateNameError(f"{plugin}: env family {family.name!r} claims the Gymnasium id {spec.id!r}, "
                                     f"which {known.entry_point!r} already registered; give the family its own "
                                     "ids (a namespace such as 'myfamily/Name-v0')")


class EngineRegister(_Register):
    """Registry of rollout policy engines, passed to ``abc_register_rollout_engines``."""

    kind = "rollout engine"

    def add(self, name: str, factory: Any, *, summary: str = "", extra: str | None = None,
            options: Sequence[str] | None = None, gpu_share: tuple[str, float] | None = None) -> None:
        """Register ``factory(request) -> PolicyEngine`` (a callable or ``"module:attr"``) as ``name``.

        :param options: the option keys the factory reads; any other key in ``rollout.engine_options`` or
            ``--engine-option`` is refused before the engine is built (``None``: every key is passed on).
        :param gpu_share: ``(option, default)`` naming the option that sets the share of GPU memory the engine
            holds while awake (``vllm``: ``("gpu_memory_utilization", 0.4)``), for the trainer's memory estimate.
        """
        if isinstance(options, str):
            raise PluginError(f"rollout engine {name!r}: options must be a sequence of option names, not a string")
        if isinstance(factory, str):
            self._claim(name, lambda: None)
        else:
            self._claim(name, factory)
        if not summary and not isinstance(factory, str):
            summary = _summary(factory)
        self._items[name] = RegisteredEngine(name, factory, self._plugin, self._dist[0], self._dist[1], summary,
                                             extra, None if options is None else tuple(options), gpu_share)

    def entries(self) -> list[RegisteredEngine]:
        """The registered engines, sorted by name."""
        return [self._items[n] for n in self.names()]


def _autoload_disabled() -> bool:
    return os.environ.get("ABC_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in ("", "0", "false", "no")


class PluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers which distribution (name, version) provided each plugin, and which plugins
    failed to load (``broken``)."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.distinfo: dict[str, tuple[str, str]] = {}
        self.broken: list[BrokenPlugin] = []

    def load_isolated(self, name: str, load: Callable[[], Any], dist: tuple[str, str]) -> None:
        """Import and register one plugin; any failure (import error, bad hook signature, ``sys.exit``) is
        recorded in ``broken`` instead of raised. Another distribution's entry point named like a registered
        plugin is kept under ``DIST:NAME``, so a method name clash surfaces when the host is built."""
        if self.is_blocked(name):
            return
        try:
            plugin = load()
            if self.is_registered(plugin):  # one module reached through two entry points
                return
            key = name if self.get_plugin(name) is None else f"{dist[0]}:{name}"
            self.register(plugin, name=key)
        except (Exception, SystemExit) as exc:
            self.broken.append(BrokenPlugin(dist[0], name, describe_error(exc)))
            return
        self.distinfo[key] = dist


def get_plugin_manager(*, autoload: bool = True) -> PluginManager:
    """Build a plugin manager: hookspecs, then the built-ins' and (unless disabled) third parties' entry points.

    The built-ins are listed once, as ``[project.entry-points.agentbench_crbc]`` in pyproject.toml: a source tree
    that was never installed has no entry points (nor the ``plugins``/``envs`` packages, mapped into place by the
    install), which is reported as one broken plugin. ``ABC_DISABLE_PLUGIN_AUTOLOAD=1`` or ``autoload=False``
    keeps only this distribution's own entry points.
    """
    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    third_party = autoload and not _autoload_disabled()
    builtin: list[tuple[md.EntryPoint, tuple[str, str]]] = []
    others: list[tuple[md.EntryPoint, tuple[str, str]]] = []
    for ep in md.entry_points(group=hookspecs.PROJECT_NAME):
        dist = (ep.dist.metadata["Name"], ep.dist.version) if ep.dist is not None else ("<unknown>", "")
        (builtin if dist[0].replace("_", "-").lower() == BUILTIN_DISTRIBUTION else others).append((ep, dist))
    # built-ins first, so a third party can never take a built-in's plugin name, whatever the entry point order
    for ep, dist in builtin:
        pm.load_isolated(ep.name, ep.load, dist)
    if not builtin:  # the built-ins register through the same entry points; without them there is nothing to load
        pm.broken.append(BrokenPlugin(BUILTIN_DISTRIBUTION, "<entry points>", "agentbench-crbc is not installed, so "
                                      "its built-in methods, engines and families are missing; run `pip install -e "
                                      ".` in the source tree"))
    if third_party:
        for ep, dist in others:
            pm.load_isolated(ep.name, ep.load, dist)
    pm.check_pending()
    return pm


class Host:
    """A plugin manager plus the registries its plugins filled, each entry knowing its distribution."""

    def __init__(self, pm: pluggy.PluginManager | None = None) -> None:
        self.pm = pm if pm is not None else get_plugin_manager()
        dists: dict[str, tuple[str, str]] = getattr(self.pm, "distinfo", {})
        self.credit = CreditRegister()
        self.gates = GateRegister()
        self.families = FamilyRegister()
        self.engines = EngineRegister()
        #: plugins skipped because they failed to import, register or run their registration hook
        self.broken: list[BrokenPlugin] = list(getattr(self.pm, "broken", []))
        for hook, register in (
            (self.pm.hook.abc_register_credit_assigners, self.credit),
            (self.pm.hook.abc_register_group_gates, self.gates),
            (self.pm.hook.abc_register_env_families, self.families),
            (self.pm.hook.abc_register_rollout_engines, self.engines),
        ):
            for impl in hook.get_hookimpls():  # registration order
                if any(b.entry_point == impl.plugin_name for b in self.broken):
                    continue  # its other hook already failed
                register._plugin = impl.plugin_name
                register._dist = dists.get(impl.plugin_name, ("<local>", ""))
                before = dict(register._items)
                try:
                    impl.function(register=register)
                except (Exception, SystemExit) as exc:  # a clash too: the newcomer is skipped, the rest works
                    register._items = before  # nothing half-registered
                    self.broken.append(BrokenPlugin(register._dist[0], impl.plugin_name, describe_error(exc)))
                    holder = getattr(exc, "holder", None)  # a clash of two third parties: neither wins by order
                    if holder is not None and holder.distribution != BUILTIN_DISTRIBUTION and not any(
                            b.entry_point == holder.plugin for b in self.broken):
                        self.broken.append(BrokenPlugin(holder.distribution, holder.plugin, describe_error(exc)))
        skipped = {b.entry_point for b in self.broken}
        # a plugin whose second hook failed loses its first's names too
        for register in (self.credit, self.gates, self.families, self.engines):
            register._items = {k: v for k, v in register._items.items() if v.plugin not in skipped}
        for b in self.broken:
            log.warning("abc: %s", b)

    def credit_method(self, name: str) -> CreditMethod:
        """The credit method called ``name``; :class:`UnknownNameError` lists the installed ones."""
        return self.credit.get(name)  # type: ignore[no-any-return]

    def gate(self, name: str) -> RegisteredGate:
        """The group gate called ``name``."""
        return self.gates.get(name)  # type: ignore[no-any-return]

    def family(self, name: str) -> EnvFamily:
        """The environment family called ``name``."""
        return self.families.get(name)  # type: ignore[no-any-return]

    def engine(self, name: str) -> RegisteredEngine:
        """The rollout engine called ``name``."""
        return self.engines.get(name)  # type: ignore[no-any-return]

    def register_gym_ids(self) -> None:
        """Register every family's Gymnasium ids (idempotent)."""
        from .family import register_gym_ids

        for fam in self.families:
            register_gym_ids(fam)


_HOST: Host | None = None


_BUILDING = False


def host_building() -> bool:
    """Whether the process-wide host is being built now (a plugin module is being imported by :func:`get_host`)."""
    return _BUILDING


def get_host() -> Host:
    """The process-wide host, built on first use; once built, every family's Gymnasium ids are registered."""
    global _HOST, _BUILDING
    if _HOST is None:
        if _BUILDING:
            raise PluginError("get_host() was called while the plugin host is being built (at a plugin's import); "
                              "call it inside a function instead")
        _BUILDING = True
        try:
            host = Host()
        finally:
            _BUILDING = False
        _HOST = host
        host.register_gym_ids()
    return _HOST


def reset_host(host: Host | None = None) -> None:
    """Replace (or drop, with ``None``) the process-wide host; tests use it to add temporary plugins."""
    global _HOST
    _HOST = host
