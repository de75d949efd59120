"""Time the phases of a CPU RL update (rollout, credit, old/reference log-probs, PPO) for one or more checkouts.

Each contestant is an ``abc`` executable (a checkout's venv); all start from the same warm-started model and run the
same number of RL updates of their own ``cpu-demo`` preset, taking turns round by round so that machine drift hits
them alike. The phases come from each run's ``metrics.jsonl``, so the script works unchanged against older
checkouts. The first update of every run (warm-up: allocator, env copies) is left out of the medians.

    python benchmarks/rl_update_speed.py --model RUN/model \\
        --abc /path/to/old/.venv/bin/abc --abc .venv/bin/abc --updates 6 --rounds 2

``--variant LABEL=KEY=VALUE[,KEY=VALUE...]`` runs one checkout under several settings instead (each variant a
contestant with its own ``--set`` overrides), e.g. the plain PPO passes against ``optim.dedup_prompts``; without
``--model`` every run starts from the preset's untrained model (``sft.steps=0``). ``--parallel`` runs a round's
contestants at once, so a busy machine's load hits them alike:

    python benchmarks/rl_update_speed.py --abc .venv/bin/abc --variant plain= \\
        --variant dedup=optim.dedup_prompts=true --updates 3 --rounds 1 --parallel
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


def start(abc: str, model: str | None, updates: int, extra: list[str], out: Path) -> subprocess.Popen:
    sets = ["sft.steps=0", f"updates={updates}", "eval.episodes=2", "eval.greedy=false", "progress=false",
            "tensorboard=false", f"out_dir={out}", "max_minutes=0", "checkpoint_every=1000", *extra]
    cmd = [abc, "train", "--credit", "crbc", *(["--model", model] if model else [])]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen, abc: str, out: Path) -> list[dict]:
    _, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"{abc} failed:\n{err[-2000:]}")
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [x for x in rows if x.get("stage") == "rl"]


def run_once(abc: str, model: str | None, updates: int, extra: list[str], out: Path) -> list[dict]:
    return finish(start(abc, model, updates, extra, out), abc, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a warm-started model folder (RUN/model of `abc sft`; default: untrained)")
    ap.add_argument("--abc", action="append", required=True, help="an abc executable; repeat to compare checkouts")
    ap.add_argument("--label", action="append", help="a name per --abc (default: its path)")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=KEY=VALUE[,KEY=VALUE...]: the (single) --abc with these overrides; repeat")
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--parallel", action="store_true", help="run each round's contestants at the same time")
    ap.add_argument("--set", action="append", default=[], help="extra config overrides for every contestant")
    args = ap.parse_args(argv)
    if args.variant:
        if len(args.abc) != 1:
            ap.error("--variant compares settings of one checkout: give --abc once")
        labels = [v.partition("=")[0] for v in args.variant]
        contestants = [(args.abc[0], lab, [x for x in v.partition("=")[2].split(",") if x])
                       for v, lab in zip(args.variant, labels, strict=True)]
    else:
        labels = args.label or args.abc
        contestants = [(abc, lab, []) for abc, lab in zip(args.abc, labels, strict=True)]
    rows: dict[str, list[dict]] = {lab: [] for lab in labels}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            outs = {lab: Path(tmp) / str(i) for i, (_, lab, _) in enumerate(contestants)}
            for o in outs.values():
                o.mkdir()
            if args.parallel:
                procs = [(abc, lab, start(abc, args.model, args.updates, args.set + sets, outs[lab]))
                         for abc, lab, sets in contestants]
                for abc, lab, proc in procs:
                    rows[lab] += finish(proc, abc, outs[lab])[1:]
            else:
                for abc, lab, sets in contestants:
                    rows[lab] += run_once(abc, args.model, args.updates, args.set + sets, outs[lab])[1:]
    head = "| phase (median s per update) | " + " | ".join(labels) + " |"
    print(head)
    print("|---" * (len(labels) + 1) + "|")
    for name, keys in PHASES:
        cells = []
        for lab in labels:
            vals = [next((r[k] for k in keys if k in r), np.nan) for r in rows[lab]]
            cells.append(f"{np.nanmedian(vals):.2f}" if vals else "n/a")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for key in ("optimizer_steps", "n_steps", "n_sequences", "kl", "approx_kl", "clip_frac"):
        cells = [f"{np.median([r[key] for r in rows[lab]]):.3g}" if rows[lab] and key in rows[lab][0] else "n/a"
                 for lab in labels]
        print(f"| {key} | " + " | ".join(cells) + " |")
    print(f"\n{args.rounds} rounds x {args.updates - 1} timed updates per contestant (the first of each run left "
          "out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
