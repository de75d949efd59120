"""Hook specifications of the ``agentbench_crbc`` plugin host (pluggy); plugins implement them with ``@hookimpl``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .host import CreditRegister, EngineRegister, FamilyRegister, GateRegister

__all__ = [
    "PROJECT_NAME",
    "abc_register_credit_assigners",
    "abc_register_env_families",
    "abc_register_group_gates",
    "abc_register_rollout_engines",
    "hookimpl",
    "hookspec",
]

PROJECT_NAME = "agentbench_crbc"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def abc_register_credit_assigners(register: CreditRegister) -> None:
    """Add step-level credit assigners with ``register.add(name, fn)`` (per group) or
    ``register.add_batched(name, fn)`` (flat arrays over a whole batch); ``bounds=`` declares the options' allowed
    values and ``explain=`` the method's per-group diagnostics (``abc credit NAME FILE --explain``).

    :param register: the registry; a name registered twice raises :class:`~agentbench_crbc.errors.DuplicateNameError`.
    """


@hookspec
def abc_register_group_gates(register: GateRegister) -> None:
    """Add rollout-time group gates with ``register.add(name, fn)``; a gate sees the partial action sequences of a
    group at step K and answers whether to stop (and drop) the group.

    :param register: the registry; a name registered twice raises :class:`~agentbench_crbc.errors.DuplicateNameError`.
    """


@hookspec
def abc_register_env_families(register: FamilyRegister) -> None:
    """Add environment families with ``register.add(family)`` (an :class:`~agentbench_crbc.family.EnvFamily`);
    their Gymnasium ids are registered when the host is built.

    :param register: the registry; a family name or env id registered twice raises
        :class:`~agentbench_crbc.errors.DuplicateNameError`.
    """


@hookspec
def abc_register_rollout_engines(register: EngineRegister) -> None:
    """Add policy engines with ``register.add(name, factory)``; ``factory(request) -> PolicyEngine`` (given
    directly or as ``"module:attr"``, imported on first use) builds one from an
    :class:`~agentbench_crbc.rollout.engines.factory.EngineRequest`.

    :param register: the registry; a name registered twice raises :class:`~agentbench_crbc.errors.DuplicateNameError`.
    """
