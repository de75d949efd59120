"""Time the phases of a CPU RL update (rollout, credit, old/reference log-probs, PPO) for one or more checkouts.

Each contestant is an ``abc`` executable (a checkout's venv); all start from the same warm-started model and run the
same number of RL updates of their own ``cpu-demo`` preset, taking turns round by round so that machine drift hits
them alike. The phases come from each run's ``metrics.jsonl``, so the script works unchanged against older
checkouts. The first update of every run (warm-up: allocator, env copies) is left out of the medians.

    python benchmarks/rl_update_speed.py --model RUN/model \\
        --abc /path/to/old/.venv/bin/abc --abc .venv/bin/abc --updates 6 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

PHASES = [("rollout", ("time_rollout",)), ("credit", ("time_credit",)),
          ("old + ref log-probs", ("time_old_ref", "time_ref")), ("PPO", ("time_ppo",)),
          ("whole update", ("time_update",))]


def run_once(abc: str, model: str, updates: int, extra: list[str], out: Path) -> list[dict]:
    sets = ["sft.steps=0", f"updates={updates}", "eval.episodes=2", "eval.greedy=false", "progress=false",
            "tensorboard=false", f"out_dir={out}", "max_minutes=0", "checkpoint_every=1000", *extra]
    cmd = [abc, "train", "--credit", "crbc", "--model", model]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{abc} failed:\n{r.stderr[-2000:]}")
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [x for x in rows if x.get("stage") == "rl"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a warm-started model folder (RUN/model of `abc sft`)")
    ap.add_argument("--abc", action="append", required=True, help="an abc executable; repeat to compare checkouts")
    ap.add_argument("--label", action="append", help="a name per --abc (default: its path)")
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="extra config overrides for every contestant")
    args = ap.parse_args(argv)
    labels = args.label or args.abc
    rows: dict[str, list[dict]] = {lab: [] for lab in labels}
    for _ in range(args.rounds):
        for abc, lab in zip(args.abc, labels, strict=True):
            with tempfile.TemporaryDirectory() as tmp:
                rows[lab] += run_once(abc, args.model, args.updates, args.set, Path(tmp))[1:]
    head = "| phase (median s per update) | " + " | ".join(labels) + " |"
    print(head)
    print("|---" * (len(labels) + 1) + "|")
    for name, keys in PHASES:
        cells = []
        for lab in labels:
            vals = [next((r[k] for k in keys if k in r), np.nan) for r in rows[lab]]
            cells.append(f"{np.nanmedian(vals):.2f}" if vals else "n/a")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for key in ("optimizer_steps", "n_steps", "kl", "approx_kl", "clip_frac"):
        cells = [f"{np.median([r[key] for r in rows[lab]]):.3g}" if rows[lab] and key in rows[lab][0] else "n/a"
                 for lab in labels]
        print(f"| {key} | " + " | ".join(cells) + " |")
    print(f"\n{args.rounds} rounds x {args.updates - 1} timed updates per contestant (the first of each run left "
          "out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
