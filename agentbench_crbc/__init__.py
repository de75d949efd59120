"""agentbench-crbc: Gymnasium agent benchmarks with pluggable step-level credit assignment (CRBC and peers)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .batch import StepBatch
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
from .types import Group, Step, Trajectory

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


def __getattr__(name: str) -> object:
    if name == "assign":  # lazy: credit imports the host, which imports plugins that import this package
        from .credit import assign

        return assign
    raise AttributeError(f"module 'agentbench_crbc' has no attribute {name!r}")
