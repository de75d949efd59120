"""``abc envs``: every registered family's Gymnasium ids with their entry points, step limits, the extra they
need (marked when it is not installed) and defaults."""

from __future__ import annotations

import argparse
from typing import Any

from .commands import COMMANDS

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("envs", help=COMMANDS["envs"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..extras import env_hint
    from ..host import get_host

    rows = [("id", "max steps", "needs", "entry point", "keyword arguments")]
    hints: list[str] = []
    for fam in get_host().families:
        hint = env_hint(fam.name)  # find_spec only: no heavy import
        needs = (fam.extra or "-") if fam.requires else "-"
        if hint:
            needs += " (missing)"
            hints.append(f"{fam.name}: {hint}")
        for spec in sorted(fam.ids, key=lambda i: i.id):
            kw = " ".join(f"{k}={v}" for k, v in spec.kwargs.items())
            rows.append((spec.id, str(spec.max_episode_steps), needs, spec.entry_point, kw))
    rows[1:] = sorted(rows[1:])
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]:<{widths[3]}}  {r[4]}".rstrip())
    if hints:
        print("\nids marked (missing) need their extra before gym.make works:")
        for line in sorted(hints):
            print(f"  {line}")
    return 0
