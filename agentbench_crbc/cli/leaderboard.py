"""``abc leaderboard show|render|add|import-reported``: the results store (a checkout's ``leaderboards/``, else the
shipped reported rows and a user's own store) and its boards."""

from __future__ import annotations

import argparse
import errno
import shlex
import sys
from pathlib import Path
from typing import Any

from ..argtypes import bounded_int
from ..errors import OptionError, RecordError
from .commands import COMMANDS

__all__ = ["DEFAULT_RECORDS", "EVAL_FILES", "register"]

#: The committed store of a checkout, relative to the working folder (the repository root); override with --records.
#: Outside a checkout the shipped reported rows are read instead; the user's store is read on top of either and is
#: the one ``add`` writes unless --records names another (agentbench_crbc.leaderboard.store).
DEFAULT_RECORDS = Path("leaderboards") / "records.jsonl"
_DEFAULT_HELP = (f"the JSON Lines store alone (default: read {DEFAULT_RECORDS} in a checkout, else the shipped "
                 "reported rows, with the user's store on top; add writes the user's store, "
                 "$XDG_DATA_HOME/agentbench-crbc/records.jsonl or ~/.local/share/agentbench-crbc/records.jsonl; "
                 f"pass --records {DEFAULT_RECORDS} to change the committed store)")
#: Where a training run keeps its evaluation records, first match wins (``abc leaderboard add RUN_DIR``): the
#: trainer's ``eval/records.jsonl`` (agentbench_crbc.trainer.eval.write_eval), then a flat ``eval.jsonl``.
EVAL_FILES = ("eval/records.jsonl", "eval.jsonl")


def register(sub: Any) -> None:
    p = sub.add_parser("leaderboard", help=COMMANDS["leaderboard"],
                       description="Per-subtask success across model scales, methods side by side. Records live in "
                       f"a JSON Lines store ({DEFAULT_RECORDS} in a checkout; after pip install, the paper's "
                       "reported rows ship with the package); your own rows go to "
                       "$XDG_DATA_HOME/agentbench-crbc/records.jsonl (~/.local/share/... by default), in a checkout "
                       f"too, unless --records names a store ({DEFAULT_RECORDS} to change the committed one).")
    lb = p.add_subparsers(dest="leaderboard_command", metavar="ACTION")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--records", type=Path, default=None, help=_DEFAULT_HELP)

    def filters(q: argparse.ArgumentParser) -> None:
        q.add_argument("--model-scale", help="only this scale label, e.g. 1.5B, 7B, 135M, tiny-1M")
        q.add_argument("--method", action="append", default=None, metavar="NAME",
                       help="only this method (repeatable), e.g. --method crbc --method gigpo")
        q.add_argument("--source", choices=("measured", "reported"), help="only measured or only reported rows")

    q = lb.add_parser("show", help="print boards as markdown tables (methods as rows, subtasks as columns)")
    common(q)
    q.add_argument("--env", help="environment name, a registered family (default: all; see `abc plugins`)")
    filters(q)
    q.add_argument("--format", choices=("md", "csv"), default="md", help="markdown tables or a tidy CSV")
    q.add_argument("--reps", type=bounded_int(1, 10**6), default=10_000, help="bootstrap replicates (IQM interval)")
    q.set_defaults(func=run_show)

    q = lb.add_parser("render", help="write board.md, board.html, board.csv and PNG figures")
    common(q)
    q.add_argument("--out", type=Path, default=Path("leaderboards"), help="output folder (default: leaderboards)")
    q.add_argument("--env", help="only this environment")
    filters(q)
    q.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    q.add_argument("--reps", type=bounded_int(1, 10**6), default=10_000, help="bootstrap replicates (IQM interval)")
    q.set_defaults(func=run_render)

    q = lb.add_parser("add", help="add a run's evaluation records (RUN_DIR/eval/records.jsonl) to the store")
    common(q)
    q.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a training run folder, or an eval JSONL file")
    q.add_argument("--file", help=f"records file inside RUN_DIR (default: the first of {', '.join(EVAL_FILES)})")
    q.add_argument("--replace", action="store_true", help="overwrite records with the same key")
    q.add_argument("--allow-cut", action="store_true",
                   help="file a run its time cap cut short (records with cut = true), on a board of its own")
    q.set_defaults(func=run_add)

    q = lb.add_parser("import-reported", help="import published results (CSV) as source=reported records")
    common(q)
    q.add_argument("csv", type=Path, metavar="CSV", help="e.g. crbc_paper_reported.csv")
    q.add_argument("--citation", help="citation stored on every row (default: the CRBC paper, Tables 1 and 3)")
    q.add_argument("--replace", action="store_true", help="overwrite rows already imported")
    q.set_defaults(func=run_import)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def _select(args: argparse.Namespace) -> dict[str, Any]:
    return {"env": args.env, "model_scale": args.model_scale, "methods": args.method, "source": args.source}


def _load(args: argparse.Namespace) -> list:
    from ..leaderboard.records import read_records
    from ..leaderboard.store import default_records

    if args.records is None:
        records, args.where = default_records()
        return records
    args.where = str(args.records)
    if not args.records.exists():
        raise RecordError(f"{args.records}: no such file; pass another --records, or create it with "
                          "`abc leaderboard import-reported` / `abc leaderboard add`")
    return read_records(args.records)


def _store(args: argparse.Namespace) -> Path:
    """The store ``add`` and ``import-reported`` write: --records, else the user's (in a checkout too)."""
    from ..leaderboard.store import default_store

    return args.records if args.records is not None else default_store()


def run_show(args: argparse.Namespace) -> int:
    from ..leaderboard.aggregate import build_boards
    from ..leaderboard.report import board_markdown, summary_csv

    boards = build_boards(_load(args), reps=args.reps, **_select(args))
    if not boards:
        raise OptionError(f"no records match {_describe(args)} in {args.where}")
    if args.format == "csv":
        from ..extras import require

        require("pandas")
        sys.stdout.write(summary_csv(boards))
        return 0
    from ..leaderboard.report import board_heading
    from ..textsafe import md_text

    parts = []
    for b in boards:  # every record text is escaped: a heading, a cell or a citation never renders live
        parts.append(f"{board_heading(b)}\n\n{board_markdown(b)}")
    sys.stdout.write("\n".join(parts))
    notes = sorted({e.citation for b in boards for e in b.entries if e.source == "reported" and e.citation})
    for cite in notes:
        sys.stdout.write(f"\n† reported, not measured here: {md_text(cite)}\n")
    return 0


def _describe(args: argparse.Namespace) -> str:
    given = {k: v for k, v in _select(args).items() if v}
    return ", ".join(f"{k}={v}" for k, v in given.items()) or "any filter"


def run_render(args: argparse.Namespace) -> int:
    from ..extras import require
    from ..leaderboard.report import render

    require("pandas", *(() if args.no_figures else ("matplotlib",)))

    from ..io import check_writable

    records = _load(args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder (--out names the folder the boards go to)", str(out))
    check_writable(out / "figures" / "board.png")  # before any board is written: a folder the user may write
    argv = sys.argv[1:]
    command = "abc " + shlex.join(argv) if argv[:2] == ["leaderboard", "render"] else "abc leaderboard render"
    paths = render(records, args.out, command=command, figures=not args.no_figures, reps=args.reps,
                   **_select(args))
    for path in paths:
        print(path)
    return 0


def run_add(args: argparse.Namespace) -> int:
    from ..leaderboard.records import add_records

    if not args.run_dir.is_dir():
        src = args.run_dir
    elif args.file:
        src = args.run_dir / args.file
    else:
        src = next((args.run_dir / f for f in EVAL_FILES if (args.run_dir / f).exists()), args.run_dir / EVAL_FILES[0])
    if not src.exists():
        raise RecordError(f"{src}: no such file; a run folder holds its evaluation records in "
                          f"{' or '.join(EVAL_FILES)} (pass --file NAME for another name)")
    store = _store(args)
    from ..leaderboard.records import read_records
    from ..leaderboard.store import check_shipped

    records = read_records(src)
    check_shipped(store, records, str(src))
    cut = next((r for r in records if r.cut), None)
    if cut is not None and not args.allow_cut:
        raise RecordError(f"{src}: run {cut.run or '?'} was cut by its time cap after {cut.budget} updates, so it is "
                          "not comparable with full runs; finish it (`abc train --resume RUN_DIR --set "
                          "max_minutes=0`) and add it again, or pass --allow-cut to file it on a board of its own")
    n = add_records(store, src, replace=args.replace, source="measured")
    where = " (cut by its time cap: a board of its own, marked)" if cut is not None else ""
    print(f"added {n} record(s) from {src} to {store}{where}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from ..leaderboard.records import add_records
    from ..leaderboard.reported import CRBC_PAPER_CITATION, read_reported_csv

    records = read_reported_csv(args.csv, citation=args.citation or CRBC_PAPER_CITATION)
    store = _store(args)
    from ..leaderboard.store import check_shipped

    check_shipped(store, records, str(args.csv))
    n = add_records(store, records, replace=args.replace, origin=f"{args.csv}: imported record")
    print(f"imported {n} reported record(s) from {args.csv} into {store}")
    return 0
