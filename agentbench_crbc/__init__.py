"""agentbench-crbc: Gymnasium agent benchmarks with pluggable step-level credit assignment (CRBC and peers)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from .errors import (
    AbcError,
    ConfigError,
    CreditError,
    DuplicateNameError,
    EnvError,
    MissingDependencyError,
    OptionError,
    PluginError,
    RecordError,
    UnknownNameError,
)
from .hookspecs import hookimpl

if TYPE_CHECKING:
    from .credit import Group, Step, StepBatch, Trajectory, assign

try:
    __version__ = version("agentbench-crbc")
except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0.0.0+source"

__all__ = [
    "AbcError",
    "ConfigError",
    "CreditError",
    "DuplicateNameError",
    "EnvError",
    "Group",
    "MissingDependencyError",
    "OptionError",
    "PluginError",
    "RecordError",
    "Step",
    "StepBatch",
    "Trajectory",
    "UnknownNameError",
    "__version__",
    "assign",
    "hookimpl",
]


#: The credit layer's names, imported on first use: ``import agentbench_crbc`` (and so ``abc --version``) loads
#: neither numpy nor scipy.
_CREDIT_NAMES = frozenset({"Group", "Step", "StepBatch", "Trajectory", "assign"})


def __getattr__(name: str) -> Any:
    if name in _CREDIT_NAMES:
        from . import credit

        value = getattr(credit, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
