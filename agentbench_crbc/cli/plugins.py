"""``abc plugins``: every installed credit method, group gate, environment family and rollout engine with the
distribution that provides it, and the plugins skipped as broken."""

from __future__ import annotations

import argparse
from typing import Any

from ..io import json_text
from .commands import COMMANDS

__all__ = ["NO_SUMMARY", "register"]

#: Shown where a plugin's function has no docstring (its first line is the description).
NO_SUMMARY = "(no description: the registered function has no docstring; its first line would show here)"


def register(sub: Any) -> None:
    p = sub.add_parser("plugins", help=COMMANDS["plugins"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def rows() -> list[dict[str, Any]]:
    from ..host import get_host

    host = get_host()
    out = [{"kind": "credit", "name": m.name, "distribution": m.distribution, "version": m.version,
            "plugin": m.plugin, "options": dict(m.options), "summary": m.summary} for m in host.credit]
    out += [{"kind": "gate", "name": g.name, "distribution": g.distribution, "version": g.version,
             "plugin": g.plugin, "options": dict(g.options), "summary": g.summary} for g in host.gates]
    out += [{"kind": "family", "name": f.name, "distribution": f.distribution, "version": f.version,
             "plugin": f.plugin, "options": {}, "summary": f.summary} for f in host.families.entries()]
    out += [{"kind": "engine", "name": e.name, "distribution": e.distribution, "version": e.version,
             "plugin": e.plugin, "options": {k: None for k in e.options or ()},
             "summary": _with_options(e.summary, e.options)} for e in host.engines.entries()]
    out += [{"kind": "broken", "name": b.entry_point, "distribution": b.distribution, "version": "",
             "plugin": b.entry_point, "options": {}, "summary": b.error} for b in host.broken]
    return out


def _with_options(summary: str, options: tuple[str, ...] | None) -> str:
    """An engine's summary with the ``--engine-option`` keys it takes (none listed: it declared none)."""
    if not options:
        return summary
    return f"{summary or NO_SUMMARY}; options: {', '.join(options)}"


def run(args: argparse.Namespace) -> int:
    table = rows()
    if args.json:
        print(json_text(table, indent=2, default=str))
        return 0
    w = max(len(r["name"]) for r in table)
    for r in table:
        dist = f"{r['distribution']} {r['version']}".strip()
        print(f"{r['kind']:<6} {r['name']:<{w}}  {dist:<24} {r['summary'] or NO_SUMMARY}")
    return 0
