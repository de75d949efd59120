"""webshop environment for agentbench-crbc (placeholder until implemented)."""

from __future__ import annotations

__all__ = ["register_envs"]


def register_envs() -> None:
    """Register this environment's Gymnasium ids (string entry points only: no heavy imports here)."""
