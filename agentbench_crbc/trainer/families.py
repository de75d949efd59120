"""The trainer's view of the family registry: which family and Gymnasium id a config or a name means."""

from __future__ import annotations

from typing import Any

from ..family import EnvFamily, Resolved, resolve_env
from ..host import get_host

__all__ = ["ensure_gym_ids", "family_names", "family_of", "resolve"]


def resolve(name_or_id: str) -> Resolved:
    """:func:`agentbench_crbc.family.resolve_env`: a family name gives its default id, an id its family."""
    return resolve_env(name_or_id)


def family_of(cfg: Any) -> EnvFamily:
    """The family of a resolved config's ``env.id``."""
    return resolve(cfg.env.id or cfg.env.name).family


def family_names() -> list[str]:
    """The registered families' names (``--env`` choices)."""
    return get_host().families.names()


def ensure_gym_ids() -> None:
    """Register every family's Gymnasium ids (idempotent; before ``gymnasium.make``)."""
    get_host().register_gym_ids()
