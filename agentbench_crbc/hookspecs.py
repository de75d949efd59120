"""Hook specifications of the ``agentbench_crbc`` plugin host (pluggy); plugins implement them with ``@hookimpl``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .host import CreditRegister, GateRegister

__all__ = ["PROJECT_NAME", "abc_register_credit_assigners", "abc_register_group_gates", "hookimpl", "hookspec"]

PROJECT_NAME = "agentbench_crbc"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def abc_register_credit_assigners(register: CreditRegister) -> None:
    """Add step-level credit assigners with ``register.add(name, fn)`` (per group) or
    ``register.add_batched(name, fn)`` (flat arrays over a whole batch).

    :param register: the registry; a name registered twice raises :class:`~agentbench_crbc.errors.DuplicateNameError`.
    """


@hookspec
def abc_register_group_gates(register: GateRegister) -> None:
    """Add rollout-time group gates with ``register.add(name, fn)``; a gate sees the partial action sequences of a
    group at step K and answers whether to stop (and drop) the group.

    :param register: the registry; a name registered twice raises :class:`~agentbench_crbc.errors.DuplicateNameError`.
    """
