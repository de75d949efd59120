"""The env family of a training config (the registry itself, the resolver and the Gymnasium ids live in
:mod:`agentbench_crbc.family`)."""

from __future__ import annotations

from typing import Any

from ..family import EnvFamily, resolve_env

__all__ = ["family_of"]


def family_of(cfg: Any) -> EnvFamily:
    """The family of a resolved config's ``env.id`` (or, before it is resolved, of ``env.name``)."""
    return resolve_env(cfg.env.id or cfg.env.name).family
