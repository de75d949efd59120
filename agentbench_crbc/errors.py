"""The package's error tree; every message says what is wrong, where, and how to fix it.

::

    AbcError
     ├── PluginError
     │    ├── UnknownNameError         (an unknown credit method, gate or extractor; lists the installed ones)
     │    ├── DuplicateNameError       (two plugins register one name)
     │    └── EngineError              (a rollout engine raised, or answered out of contract; names the engine)
     ├── RecordError                   (a rollout record is malformed; names file and line)
     ├── OptionError                   (an unknown or ill-typed option of a method)
     ├── CreditError                   (valid input the method cannot solve, e.g. a singular closure)
     │    └── AlignmentError           (advantages and the steps they are for do not match one to one)
     ├── ConfigError                   (a bad configuration key or value; names the key)
     ├── EnvError                      (an environment cannot be built or reached)
     └── MissingDependencyError        (an optional dependency is not installed; names the pip extra)
"""

from __future__ import annotations

__all__ = [
    "AbcError",
    "AlignmentError",
    "ConfigError",
    "CreditError",
    "DuplicateNameError",
    "EngineError",
    "EnvError",
    "MissingDependencyError",
    "OptionError",
    "PluginError",
    "RecordError",
    "UnknownNameError",
]


class AbcError(Exception):
    """Base of every error this package raises on purpose."""


class PluginError(AbcError):
    """A plugin could not be found or registered."""


class UnknownNameError(PluginError, KeyError):
    """A name that no installed plugin registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(PluginError):
    """Two plugins registered the same name."""


class EngineError(PluginError):
    """A rollout engine raised, or returned something that is not one answer per prompt (names the engine)."""


class RecordError(AbcError, ValueError):
    """A malformed rollout record."""


class OptionError(AbcError, ValueError):
    """An unknown or ill-typed method option."""


class CreditError(AbcError, ArithmeticError):
    """Valid input that a credit method cannot turn into finite credit."""


class ConfigError(AbcError, ValueError):
    """A bad configuration key or value."""


class EnvError(AbcError, RuntimeError):
    """An environment could not be created or stepped."""


class AlignmentError(CreditError):
    """Advantages and the steps they are for do not match one to one (a method returned the wrong shape, or a
    batch was built from other groups than the samples)."""


class MissingDependencyError(AbcError, ImportError):
    """An optional dependency is not installed; the message names the extra (``agentbench_crbc.extras``)."""

    def __str__(self) -> str:  # ImportError keeps the message in args[0] as well; show only that
        return str(self.args[0]) if self.args else ""
