"""The trainer's view of the family registry: which family and Gymnasium id a config or a name means."""

from __future__ import annotations

from typing import Any

from ..family import EnvFamily, Resolved, resolve_env
from ..host import get_host

__all__ = ["ensure_gym_ids", "family_names", "family_of", "resolve"]


def _interim() -> None:
    """INTERIM (delete at merge, with ``_interim_families.py``): a host without families gets the built-in specs."""
    host = get_host()
    if not host.families.names():
        from ._interim_families import INTERIM_FAMILIES

        for fam in INTERIM_FAMILIES:
            host.families.add(fam)


def resolve(name_or_id: str) -> Resolved:
    """:func:`agentbench_crbc.family.resolve_env`: a family name gives its default id, an id its family."""
    _interim()
    return resolve_env(name_or_id)


def family_of(cfg: Any) -> EnvFamily:
    """The family of a resolved config's ``env.id``."""
    return resolve(cfg.env.id or cfg.env.name).family


def family_names() -> list[str]:
    """The registered families' names (``--env`` choices)."""
    _interim()
    return get_host().families.names()


def ensure_gym_ids() -> None:
    """Register every family's Gymnasium ids (idempotent; before ``gymnasium.make``)."""
    _interim()
    get_host().register_gym_ids()
