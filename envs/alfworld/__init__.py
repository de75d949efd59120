"""ALFWorld for agentbench-crbc: the real alfworld/TextWorld engine, games generated offline from the wheel's rooms.

Importing this package imports neither alfworld nor textworld; the engine loads when an env is constructed.
"""

from __future__ import annotations

from .expert import expert_policy
from .family import ALFWORLD

__all__ = ["ENV_ID", "expert_policy", "register_envs"]

ENV_ID = ALFWORLD.default_id


def register_envs() -> None:
    """Register ``abc/ALFWorld-v0`` (50 steps, as the CRBC/GiGPO papers) unless it is registered already."""
    from agentbench_crbc.family import register_gym_ids

    register_gym_ids(ALFWORLD)
