"""``abc envs``: the registered ``abc/*`` Gymnasium ids with their entry points and step limits."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("envs", help="list registered abc/* environments")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401  (registers the ids)

    for env_id, spec in sorted(gym.registry.items()):
        if env_id.startswith("abc/"):
            kw = " ".join(f"{k}={v}" for k, v in spec.kwargs.items())
            print(f"{env_id:<28} steps={spec.max_episode_steps}  {spec.entry_point}  {kw}")
    return 0
