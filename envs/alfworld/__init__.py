"""ALFWorld for agentbench-crbc: the real alfworld/TextWorld engine, games generated offline from the wheel's rooms.

Importing this package imports neither alfworld nor textworld; the engine loads when an env is constructed.
"""

from __future__ import annotations

from .expert import expert_policy

__all__ = ["ENV_ID", "expert_policy", "register_envs"]

ENV_ID = "abc/ALFWorld-v0"


def register_envs() -> None:
    """Register ``abc/ALFWorld-v0`` (50 steps, as the CRBC/GiGPO papers) unless it is registered already."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="agentbench_crbc.envs.alfworld.env:ALFWorldEnv", max_episode_steps=50)
