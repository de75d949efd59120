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

    rows = [("id", "max steps", "entry point", "keyword arguments")]
    for env_id, spec in sorted(gym.registry.items()):
        if env_id.startswith("abc/"):
            kw = " ".join(f"{k}={v}" for k, v in spec.kwargs.items())
            rows.append((env_id, str(spec.max_episode_steps), str(spec.entry_point), kw))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip())
    return 0
