"""``abc envs``: every registered family's Gymnasium ids with their entry points, step limits and defaults."""

from __future__ import annotations

import argparse
from typing import Any

from .commands import COMMANDS

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("envs", help=COMMANDS["envs"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..host import get_host

    rows = [("id", "max steps", "entry point", "keyword arguments")]
    for fam in get_host().families:
        for spec in sorted(fam.ids, key=lambda i: i.id):
            kw = " ".join(f"{k}={v}" for k, v in spec.kwargs.items())
            rows.append((spec.id, str(spec.max_episode_steps), spec.entry_point, kw))
    rows[1:] = sorted(rows[1:])
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip())
    return 0
