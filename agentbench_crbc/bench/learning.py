"""``abc bench``: the CPU learning benchmark; one imitation warm start per seed, every credit method from it.

    abc bench --mode quick --dry-run        # print the plan (and the equivalent abc commands)
    abc bench --mode quick                  # grpo/gigpo/crbc from the default's random start + control (seed 0)
    abc bench --mode full --env sokoban     # 3 seeds x every variant + control
    abc bench --mode full --workers 3       # on 3 local worker processes (default: one per core)
    abc bench --mode full --ray-address auto   # each run a Ray task of one CPU on the running cluster
    python -m agentbench_crbc.bench.learning ...   # the same (and python benchmarks/learning.py in a checkout)

Protocol (the same for every method; ``MODES`` holds the numbers). Per (env, seed):

1. **Warm start** (``abc sft``): the trainer's imitation stage on the expert's actions, a fixed number of steps
   (not minutes, so a loaded machine gives the same model, only later; quick mode: 0 steps, the seed's random
   initialisation, as the default trains). Saved once as ``RUN_DIR/model``.
2. **One RL run per variant** from that same model (``abc train --model WARM/model --set sft.steps=0``): the same
   updates x groups x G, the same training levels and sampling seeds (the run seed fixes them), no time limit.
   Variants: every credit method the plugin host registered, and crbc at closure depth 0, 1, 3.
3. **Control** ``imitation``: the warm start continues imitation (``abc sft --model WARM/model``) for the median
   wall time of that seed's RL stages. It answers "is RL with credit method X better than just more imitation?".

Every run validates on the same held-out levels (split by canonical form: no validation level, up to the 8
symmetries, was trained on) at temperature 0.4 (recorded on the leaderboard) and greedy (in the summary);
no other mode (the training temperature, the reference policies: the summary does not report them).
Runs are independent but for the order above: they run side by side on a pool of worker processes (one torch
thread each) or as Ray tasks (:mod:`agentbench_crbc.bench.pool`), each as soon as what it needs has finished.
Records are relabelled (method = variant, model ``tiny-qwen2``, scale ``tiny-1M``) and added to the store, and the
run's row appended to ``OUT/bench.jsonl``, by the driver as each run ends; a rerun skips runs already there, so a
benchmark can be split over sessions, and a run that raised or lost its worker is the only one a rerun does.
The summary compares methods with paired statistics over seeds (same warm start per seed): mean difference,
t interval and paired t-test, and a seeded percentile bootstrap interval; and per method the held-out curve's
area, updates to a threshold, final success and failed runs (:mod:`agentbench_crbc.bench.stats`).

This module is the command; the jobs live beside it: :mod:`~agentbench_crbc.bench.plan` (modes, cells, commands,
time estimate), :mod:`~agentbench_crbc.bench.schedule` (workers, ``bench.jsonl``, records),
:mod:`~agentbench_crbc.bench.stats` (the statistics) and :mod:`~agentbench_crbc.bench.summary` (tables, figures).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import AbcError
from ..host import get_host
from .plan import (
    CONTROL,
    CRBC_DEPTHS,
    MODES,
    RL_IDLE,
    RL_SHARED,
    SCALE,
    WARM_SHARED,
    Cell,
    Mode,
    command,
    default_env,
    estimate,
    plan,
)
from .schedule import CellsFailed, execute, import_tree, preload, read_jsonl, run_cell, work_cell
from .stats import Paired, PairedLevels, paired_levels, paired_stats
from .summary import summarise, summary_markdown, train_curves_figure

__all__ = [
    "CONTROL",
    "MODES",
    "RL_IDLE",
    "RL_SHARED",
    "WARM_SHARED",
    "Cell",
    "CellsFailed",
    "Mode",
    "Paired",
    "PairedLevels",
    "add_arguments",
    "check_cells",
    "command",
    "default_env",
    "estimate",
    "execute",
    "main",
    "paired_levels",
    "paired_stats",
    "pinned",
    "plan",
    "preload",
    "run",
    "run_cell",
    "summarise",
    "summary_markdown",
    "train_curves_figure",
    "work_cell",
]


def main(argv: Sequence[str] | None = None) -> int:
    """``abc bench`` as a program of its own (``python -m agentbench_crbc.bench.learning``)."""
    p = argparse.ArgumentParser(prog="abc bench", description=(__doc__ or "").split("\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv), argv)


def _family_name(text: str) -> str:
    """``--env NAME``: a registered environment family, checked against the plugin host when the flag is given
    (so that building the parser builds no host). While the host knows no family at all, any name passes and the
    trainer reports it at the first run."""
    try:
        names = get_host().families.names()
    except AbcError as exc:  # a broken plugin set: the command reports it when it builds the host again
        raise argparse.ArgumentTypeError(str(exc)) from None
    if names and text not in names:
        raise argparse.ArgumentTypeError(f"unknown env family {text!r}; installed: {', '.join(names)} "
                                         "(see `abc plugins`)")
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``abc bench`` and ``python -m agentbench_crbc.bench.learning``."""
    p.add_argument("--mode", choices=tuple(MODES), default="quick")
    p.add_argument("--env", action="append", type=_family_name, metavar="FAMILY",
                   help="only these registered environment families (repeatable; default: the mode's)")
    p.add_argument("--method", action="append", help="only these variants (repeatable): a registered credit method "
                   f"(`abc plugins`; run with its default options), {', '.join(CRBC_DEPTHS)} (CRBC at that closure "
                   f"depth) or {CONTROL}")
    from ..argtypes import bounded_int

    p.add_argument("--seed", action="append", type=bounded_int(0, 2**32 - 1), help="only these seeds (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra trainer overrides")
    p.add_argument("--out", type=Path, help="run folders and bench.jsonl (default runs/bench/MODE)")
    p.add_argument("--records", type=Path, help="leaderboard store (default: the mode's)")
    p.add_argument("--render", type=Path, help="render the board and the summary here (default: the mode's)")
    p.add_argument("--replace", action="store_true", help="overwrite records of an earlier benchmark run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--summary-only", action="store_true", help="only re-summarise and render what bench.jsonl has")
    from .pool import default_workers

    cores = default_workers()
    p.add_argument("--workers", type=bounded_int(1, 4096), metavar="N",
                   help=f"cells run at once in local worker processes, one torch thread each (default: the {cores} "
                   "core(s) this process may use); with --ray-address local: the CPUs of the local cluster")
    p.add_argument("--ray-address", metavar="ADDR", help="run each cell as a Ray task of one CPU instead: auto (the "
                   "running cluster), ray://HEAD:10001, HEAD:6379, or local (start a cluster of --workers CPUs "
                   "here); needs the ray extra, and OUT on a filesystem every node shares")
    p.add_argument("--ray-retries", type=bounded_int(0, 100), default=2, metavar="N",
                   help="times Ray reruns a task whose worker or node died (default 2; a cell that raises is not "
                   "retried)")


def pinned(extra: Sequence[str]) -> bool:
    """Whether the cells run in deterministic mode: on unless the last ``--set deterministic=...`` turns it off."""
    values = [o.partition("=")[2].strip().lower() for o in extra if o.partition("=")[0].strip() == "deterministic"]
    return not values or values[-1] not in ("false", "0", "no", "off")


def check_cells(cells: Sequence[Cell]) -> None:
    """Resolve each kind of cell's config here, before any folder or worker: a bad ``--set`` (``optim.lr=abc``,
    ``noequals``, a value out of bounds) is one ConfigError naming the key, not a failure inside every worker."""
    from ..trainer.config import load_config

    seen: set[tuple[str, str, str]] = set()
    for c in cells:
        if (c.env, c.kind, c.label) in seen:
            continue
        seen.add((c.env, c.kind, c.label))
        load_config(env=c.env, credit=c.credit, overrides=c.overrides)


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Plan, run, record, summarise, render."""
    spec = MODES[args.mode]
    cells = plan(args.mode, args.env, args.method, args.seed, args.set)
    if not args.summary_only:
        check_cells(cells)
    out = args.out or Path("runs") / "bench" / args.mode
    store = args.records or Path(spec.store)
    render_dir = args.render or Path(spec.render)
    if args.dry_run:
        for c in cells:
            print(f"{c.env:8} seed={c.seed} {c.label:12} {command(c)}")
        print(f"{len(cells)} runs ({sum(c.kind == 'rl' for c in cells)} RL, "
              f"{sum(c.kind == 'warm' for c in cells)} warm starts, {sum(c.kind == 'control' for c in cells)} "
              f"controls); records -> {store}; board -> {render_dir}")
        print(estimate(cells))
        return 0
    import_tree("agentbench_crbc.leaderboard")  # the driver only records and renders; workers train
    failure: CellsFailed | None = None
    if args.summary_only:
        rows = read_jsonl(out / "bench.jsonl")
    else:
        from ..extras import require, require_env
        from .pool import interrupt_on_sigterm, open_runner

        require("torch", "transformers")  # checked here: a worker without them would fail every cell one by one
        for fam in sorted({c.env for c in cells}):
            require_env(fam)
        if pinned(args.set):  # before any worker imports torch (workers inherit the environment)
            from ..trainer.kernels import pin_kernels

            pin_kernels()
        runner = open_runner(args.workers, args.ray_address, args.ray_retries)
        try:
            with interrupt_on_sigterm():
                rows = execute(args.mode, cells, out, store, replace=args.replace, runner=runner)
        except CellsFailed as exc:  # render what finished, then say what did not
            failure, rows = exc, read_jsonl(out / "bench.jsonl")
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop the running cells, do not wait for them
            runner.close(abort=True)
            raise
        finally:
            runner.close()
    rows = [r for r in rows if r["mode"] == args.mode]
    from ..io import atomic_write_text, json_text
    from ..leaderboard.records import read_records
    from ..leaderboard.report import render

    line = "abc bench " + " ".join(sys.argv[1:] if argv is None else argv)
    render(read_records(store), render_dir, command=line)
    for env in sorted({r["env"] for r in rows}):
        summary = summarise(rows, spec.updates, env)
        learn = render_dir / "learning"
        atomic_write_text(learn / f"{env}_summary.json", json_text(summary, indent=1))
        md = f"# Learning benchmark: {env}, {SCALE}\n\nMade by `{line}`.\n\n{summary_markdown(summary)}"
        atomic_write_text(learn / f"{env}_summary.md", md)
        train_curves_figure(rows, env, learn / f"{env}_train_curves.png")
        print(md)
    if failure is not None:
        raise failure
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
