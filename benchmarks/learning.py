"""CPU learning benchmark driver (issue #9 part 3, skeleton): every credit method x seeds on one protocol, results
added to the leaderboard store with a model-scale label, then the board is rendered.

    python benchmarks/learning.py --mode quick --dry-run        # print the plan
    python benchmarks/learning.py --mode quick                  # pipeline check, about 10 minutes
    python benchmarks/learning.py --mode full --env sokoban     # one environment of the full benchmark

Protocol: the trainer's ``cpu-demo`` preset (tiny Qwen2 from scratch, design.md) with the same budget for every
method; CRBC also at closure depth 0, 1, 3 and full. Each run's ``eval/records.jsonl`` is relabelled with the
variant name (``crbc_depth1``...) so variants of one plugin do not collide, and added with ``abc leaderboard add``
semantics (duplicates refused unless ``--replace``).
Quick mode trains a randomly initialised model for a few updates with no warm start: it checks the pipeline end to
end; its success numbers say nothing about the methods.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METHODS = ("grpo", "rloo", "gigpo", "graphgpo", "g2po", "gated_bepo", "crbc")
CRBC_DEPTHS = {"crbc_depth0": 0, "crbc_depth1": 1, "crbc_depth3": 3}  # "crbc" itself is full closure
SEEDS = (0, 1, 2)
#: ``--set`` overrides per mode, on top of the cpu-demo preset.
MODES: dict[str, dict[str, Any]] = {
    "quick": {"envs": ("sokoban",), "set": ["sft.steps=0", "updates=3", "rollout.groups=2", "rollout.group_size=4",
                                           "eval.episodes=8", "eval.greedy=false", "eval.every=1",
                                           "checkpoint_every=100", "tensorboard=false", "progress=false"]},
    "full": {"envs": ("sokoban", "alfworld", "webshop"), "set": ["eval.every=5", "progress=false"]},
}


@dataclass(frozen=True)
class Cell:
    """One training run of the grid."""

    env: str
    label: str
    credit: str
    seed: int
    overrides: tuple[str, ...]


def plan(mode: str, envs: list[str] | None = None, methods: list[str] | None = None,
         seeds: list[int] | None = None, extra: list[str] | None = None) -> list[Cell]:
    """The grid: env x (methods + CRBC depth variants) x seeds, each with its ``--set`` overrides."""
    spec = MODES[mode]
    variants = {m: (m, []) for m in METHODS}
    variants |= {k: ("crbc", [f"credit.options.depth={d}"]) for k, d in CRBC_DEPTHS.items()}
    wanted = methods or list(variants)
    unknown = [m for m in wanted if m not in variants]
    if unknown:
        raise SystemExit(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(variants)}")
    cells = []
    for env in envs or spec["envs"]:
        for label in wanted:
            credit, opts = variants[label]
            for seed in seeds or SEEDS:
                cells.append(Cell(env, label, credit, seed,
                                  (*spec["set"], *opts, f"seed={seed}", *(extra or []))))
    return cells


def run_cell(cell: Cell, out: Path, records: Path, *, replace: bool) -> dict[str, Any]:
    """Train one cell, relabel its evaluation records with the variant name, add them to the store."""
    import agentbench_crbc.envs  # noqa: F401  registers the abc/* Gymnasium ids

    from agentbench_crbc.leaderboard.records import RunRecord, add_records, read_records
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.loop import Trainer

    cfg = load_config(env=cell.env, credit=cell.credit, overrides=[*cell.overrides, f"out_dir={out}"])
    trainer = Trainer(cfg)
    t0 = time.perf_counter()
    summary = trainer.run()
    seconds = time.perf_counter() - t0
    evals = read_records(Path(trainer.run_dir) / "eval" / "records.jsonl")
    relabelled: list[RunRecord] = [dataclasses.replace(r, method=cell.label) for r in evals]
    n = add_records(records, relabelled, replace=replace, origin=f"{trainer.run_dir} eval record")
    return {"cell": dataclasses.asdict(cell), "run_dir": str(trainer.run_dir), "seconds": round(seconds, 1),
            "records_added": n, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=tuple(MODES), default="quick")
    p.add_argument("--env", action="append", help="only these environments (repeatable)")
    p.add_argument("--method", action="append", help="only these variants (repeatable), e.g. crbc_depth1")
    p.add_argument("--seed", action="append", type=int, help="only these seeds (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra trainer overrides")
    p.add_argument("--out", type=Path, default=Path("runs") / "bench", help="run folders go here")
    p.add_argument("--records", type=Path, default=Path("leaderboards") / "records.jsonl")
    p.add_argument("--render", type=Path, default=Path("leaderboards"), help="render the board here at the end")
    p.add_argument("--replace", action="store_true", help="overwrite records of an earlier benchmark run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = p.parse_args(argv)
    cells = plan(args.mode, args.env, args.method, args.seed, args.set)
    if args.dry_run:
        for c in cells:
            print(f"{c.env:9} {c.label:12} seed={c.seed}  --credit {c.credit} " + " ".join(f"--set {o}" for o in
                                                                                        c.overrides))
        print(f"{len(cells)} runs")
        return 0
    log = args.out / "bench.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    for i, cell in enumerate(cells, 1):
        print(f"[{i}/{len(cells)}] {cell.env} {cell.label} seed {cell.seed}", file=sys.stderr, flush=True)
        result = run_cell(cell, args.out, args.records, replace=args.replace)
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(result, default=str) + "\n")
    from agentbench_crbc.leaderboard.records import read_records
    from agentbench_crbc.leaderboard.report import render

    render(read_records(args.records), args.render,
           command="python benchmarks/learning.py " + " ".join(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
