"""``abc credit METHOD FILE.jsonl``: per-step advantages for rollout records (credit contract section 2)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigError, OptionError
from ..io import json_text, write_stdout
from .commands import COMMANDS

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("credit", help=COMMANDS["credit"],
                       description="Writes every input record with an 'advantages' list added.")
    p.add_argument("method", nargs="?", help="credit method name (see `abc plugins`)")
    p.add_argument("file", nargs="?", help="rollout records, one JSON object per line (- reads stdin)")
    p.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                   help="method option, VALUE parsed as JSON when it parses; repeatable (depth=inf: full closure)")
    p.add_argument("-o", "--output", help="write here (atomically) instead of stdout")
    p.add_argument("--list", action="store_true", help="list installed methods and exit")
    p.add_argument("--explain", action="store_true", help="the method's diagnostics per group instead of advantages "
                   "(methods that register an explainer: crbc's V, Q, sigma, gate, evidence coverage)")
    p.add_argument("--json", action="store_true", help="with --explain: JSON Lines instead of text")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    p.set_defaults(func=run)


def summary(method: str, records: list[dict[str, Any]], dest: str) -> str:
    """The line ``abc credit`` prints on stderr: what was written where, and, for the groups in which every rollout
    ended alike (no outcome variance), what the method gave them: read from its output (``advantages`` of each
    record), so the line holds for any method, a third party's too."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for rec in records:
        groups.setdefault(rec.get("group"), []).append(rec)
    flat = [g for g in groups.values() if len({(bool(r.get("success")), r.get("reward")) for r in g}) == 1]
    steps = sum(len(rec.get("steps", ())) for rec in records)
    text = f"abc credit: {method}: {len(records)} trajectories in {len(groups)} groups, {steps} steps -> {dest}"
    if flat:
        silent = sum(not any(a != 0 for r in g for a in r.get("advantages") or ()) for g in flat)
        given = ("no credit (all zero)" if silent == len(flat) else "step credit nonetheless" if not silent
                 else f"no credit (all zero) to {silent}, step credit to {len(flat) - silent}")
        text += (f"; {len(flat)} group(s) with no outcome variance (every rollout ended alike): {method} gave them "
                 f"{given}")
    return text


def run(args: argparse.Namespace) -> int:
    from ..credit import assign, explain, parse_option, read_jsonl
    from ..credit.explain import explain_text
    from ..io import atomic_open

    if args.list:
        from .plugins import run as list_plugins

        return list_plugins(argparse.Namespace(json=False))
    if not args.method or not args.file:
        raise OptionError("give METHOD and FILE, e.g. `abc credit crbc rollouts.jsonl` (or --list)")
    from . import stdout_closed

    if not args.output and stdout_closed():
        raise OptionError("standard output is closed (started with >&-), so the result could not be written; give "
                          "-o FILE")
    options: dict[str, Any] = {}
    for text in args.option:
        try:
            key, value = parse_option(text)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        options[key] = value
    records = read_jsonl(args.file)
    if args.explain:
        report = explain(records, method=args.method, **options)
        lines = ([json_text(g.to_dict(), where=f"{args.file}: group {g.group!r}") for g in report] if args.json
                 else [explain_text(g) for g in report])
    else:
        advantages = assign(args.method, records, **options)
        lines = []
        source = "<stdin>" if args.file == "-" else args.file
        for n, (rec, adv) in enumerate(zip(records, advantages, strict=True), 1):
            rec["advantages"] = adv.tolist()
            lines.append(json_text(rec, ensure_ascii=False, where=f"{source}: record {n}"))
    text = "\n".join(lines) + "\n"
    if args.output:
        try:
            with atomic_open(args.output) as fh:
                fh.write(text)
        except BrokenPipeError:  # -o - and a reader that stopped early: exit 141, as for stdout
            raise
        except OSError as exc:
            raise ConfigError(f"-o {args.output}: cannot write there ({exc.strerror or exc}); give a writable "
                              "file path") from None
    else:
        write_stdout(text)  # chunk by chunk: a reader that stops early is seen (exit 141)
    if not args.quiet and not args.explain:
        print(summary(args.method, records, args.output or "stdout"), file=sys.stderr)
    return 0

