"""The plugin host: a pluggy manager that loads the ``agentbench_crbc`` entry points and holds the registries."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import inspect
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from . import hookspecs
from .errors import DuplicateNameError, OptionError, UnknownNameError

__all__ = [
    "BUILTIN_DISTRIBUTION",
    "CreditMethod",
    "CreditRegister",
    "GateRegister",
    "Host",
    "PluginManager",
    "RegisteredGate",
    "get_host",
    "get_plugin_manager",
    "reset_host",
]

BUILTIN_DISTRIBUTION = "agentbench-crbc"
#: Used only when the package runs from a source tree without installed entry points.
_BUILTIN_FALLBACK = ("grpo", "rloo", "gigpo", "crbc", "graphgpo", "g2po", "gated_bepo", "hgpo", "progpo", "pcgpo",
                     "selective_rollout")


def _options_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """Keyword-only parameters with defaults: a method's options."""
    out: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            out[p.name] = None if p.default is inspect.Parameter.empty else p.default
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

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``options`` with ints widened to floats where the default is a float; reject unknown keys."""
        out: dict[str, Any] = {}
        for key, value in options.items():
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise OptionError(f"{self.name}: unknown option {key!r}; options are: {known}")
            default = self.options[key]
            if isinstance(default, bool) and not isinstance(value, bool):
                raise OptionError(f"{self.name}: option {key}={value!r} must be true or false")
            if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if isinstance(default, (int, float)) and not isinstance(default, bool) and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise OptionError(f"{self.name}: option {key}={value!r} must be a number")
            if isinstance(default, str) and not isinstance(value, str):
                raise OptionError(f"{self.name}: option {key}={value!r} must be a string")
            out[key] = value
        return out


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

    def _claim(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise DuplicateNameError(f"{self._plugin}: a {self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            first = self._items[name]
            raise DuplicateNameError(
                f"{self.kind} {name!r} is registered by both {first.plugin} ({first.distribution}) and "
                f"{self._plugin} ({self._dist[0]}); uninstall one or set ABC_DISABLE_PLUGIN_AUTOLOAD=1"
            )

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

    def _put(self, name: str, fn: Callable[..., Any], batched: bool) -> None:
        self._claim(name)
        self._items[name] = CreditMethod(
            name, fn, batched, self._plugin, self._dist[0], self._dist[1], _options_of(fn), _summary(fn)
        )

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        """Register ``fn(group: Group, **options) -> list[np.ndarray]`` (one array per trajectory) as ``name``."""
        self._put(name, fn, batched=False)

    def add_batched(self, name: str, fn: Callable[..., Any]) -> None:
        """Register ``fn(batch: StepBatch, **options) -> np.ndarray`` (one value per step of the batch)."""
        self._put(name, fn, batched=True)


class GateRegister(_Register):
    """Registry of rollout-time group gates, passed to ``abc_register_group_gates``."""

    kind = "group gate"

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        """Register ``fn(actions, step, **options) -> bool`` as ``name``."""
        self._claim(name)
        self._items[name] = RegisteredGate(name, fn, self._plugin, self._dist[0], self._dist[1], _options_of(fn),
                                           _summary(fn))


def _autoload_disabled() -> bool:
    return os.environ.get("ABC_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in ("", "0", "false", "no")


class PluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers which distribution (name, version) provided each plugin."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.distinfo: dict[str, tuple[str, str]] = {}


def get_plugin_manager(*, autoload: bool = True) -> PluginManager:
    """Build a plugin manager: hookspecs, then the built-ins' and (unless disabled) third parties' entry points.

    ``ABC_DISABLE_PLUGIN_AUTOLOAD=1`` or ``autoload=False`` keeps only this distribution's own entry points.
    """
    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    third_party = autoload and not _autoload_disabled()
    found_builtin = False
    for ep in md.entry_points(group=hookspecs.PROJECT_NAME):
        dist = ep.dist.metadata["Name"] if ep.dist is not None else ""
        is_builtin = (dist or "").replace("_", "-").lower() == BUILTIN_DISTRIBUTION
        found_builtin |= is_builtin
        if not (is_builtin or third_party) or pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        pm.register(ep.load(), name=ep.name)
        if ep.dist is not None:
            pm.distinfo[ep.name] = (ep.dist.metadata["Name"], ep.dist.version)
    if not found_builtin:
        for name in _BUILTIN_FALLBACK:
            if pm.get_plugin(name) is None:
                pm.register(importlib.import_module(f"agentbench_crbc.plugins.{name}"), name=name)
                pm.distinfo[name] = (BUILTIN_DISTRIBUTION, "source")
    pm.check_pending()
    return pm


class Host:
    """A plugin manager plus the registries its plugins filled, each entry knowing its distribution."""

    def __init__(self, pm: pluggy.PluginManager | None = None) -> None:
        self.pm = pm if pm is not None else get_plugin_manager()
        dists: dict[str, tuple[str, str]] = getattr(self.pm, "distinfo", {})
        self.credit = CreditRegister()
        self.gates = GateRegister()
        for hook, register in (
            (self.pm.hook.abc_register_credit_assigners, self.credit),
            (self.pm.hook.abc_register_group_gates, self.gates),
        ):
            for impl in hook.get_hookimpls():  # registration order
                register._plugin = impl.plugin_name
                register._dist = dists.get(impl.plugin_name, ("<local>", ""))
                impl.function(register=register)

    def credit_method(self, name: str) -> CreditMethod:
        """The credit method called ``name``; :class:`UnknownNameError` lists the installed ones."""
        return self.credit.get(name)  # type: ignore[no-any-return]

    def gate(self, name: str) -> RegisteredGate:
        """The group gate called ``name``."""
        return self.gates.get(name)  # type: ignore[no-any-return]


_HOST: Host | None = None


def get_host() -> Host:
    """The process-wide host, built on first use."""
    global _HOST
    if _HOST is None:
        _HOST = Host()
    return _HOST


def reset_host(host: Host | None = None) -> None:
    """Replace (or drop, with ``None``) the process-wide host; tests use it to add temporary plugins."""
    global _HOST
    _HOST = host
