"""agentbench-crbc: Gymnasium agent benchmarks with pluggable step-level credit assignment (CRBC and peers)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .credit import Group, Step, StepBatch, Trajectory, assign
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

