"""Time the CPU default's PPO per update under each (torch threads, OpenMP waiting policy), with optional CPU hogs.

Each configuration is one ``abc train --credit crbc`` of the ``cpu-demo`` preset cut to a few updates (small
validation, no references); the per-update PPO time comes from the run's ``metrics.jsonl`` (``time_ppo``). The
waiting policy is set in the run's environment, so before torch (and its OpenMP runtime) starts: ``passive`` is
``OMP_WAIT_POLICY=PASSIVE`` (a waiting thread sleeps at once), ``spin`` is libgomp's own default (it spins 300,000
times before sleeping; written as ``GOMP_SPINCOUNT=300000`` so that ``abc`` leaves it alone). ``--hogs N`` starts
N ``yes > /dev/null`` processes for the measured runs and kills them after ``--hog-seconds`` at the latest; a run
still going when they were killed is marked. A run that passes ``--timeout-s`` is stopped and reports the updates
it finished. Prints a Markdown table with the load average at each run's start and end.

``--spin-check`` shows whether a waiting policy set by the process itself takes effect: 300 small two-thread torch
ops with short sleeps between them, with ``OMP_WAIT_POLICY=PASSIVE`` unset, set before ``import torch`` and set
after it; spinning threads show as CPU time the sleeps should not have.

    python benchmarks/load_speed.py --updates 3 --configs 2:spin,2:passive,1:spin,1:passive
    python benchmarks/load_speed.py --updates 2 --hogs 4 --hog-seconds 180 --configs 2:spin,2:passive,1:passive
    python benchmarks/load_speed.py --spin-check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WAITS = {"passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "spin": {"GOMP_SPINCOUNT": "300000"}}
SETS = ["eval.episodes=8", "eval.samples=1", "eval.greedy=false", "eval.train_temperature=false",
        "eval.references=false", "progress=false", "tensorboard=false", "max_minutes=0", "checkpoint_every=1000"]


def run_once(threads: int, wait: str, updates: int, out: Path, extra: list[str],
             timeout: float) -> tuple[list[float], float, bool]:
    """One run; returns its per-update PPO seconds, its wall time and whether it finished within ``timeout``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    env.update(WAITS[wait])
    cmd = [sys.executable, "-m", "agentbench_crbc", "train", "--credit", "crbc"]
    for s in [*SETS, f"updates={updates}", f"threads={threads}", f"out_dir={out}", *extra]:
        cmd += ["--set", s]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _, err = proc.communicate(timeout=timeout)
        finished = True
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        finished = False
    wall = time.monotonic() - t0
    if finished and proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    runs = [p for p in out.iterdir() if p.is_dir()]
    path = runs[0] / "metrics.jsonl" if runs else None
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path and path.exists() else []
    return [float(x["time_ppo"]) for x in rows if x.get("stage") == "rl" and "time_ppo" in x], wall, finished


SPIN = """import os, sys, time
if sys.argv[1] == "before":
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
import torch
if sys.argv[1] == "after":
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
torch.set_num_threads(2)
x = torch.randn(2_000_000)
c0, t0 = time.process_time(), time.monotonic()
for _ in range(300):
    y = x * 2.0 + 1.0
    time.sleep(0.002)
print(f"{time.process_time() - c0:.2f} {time.monotonic() - t0:.2f}")
"""


def spin_check(rounds: int = 2) -> None:
    """CPU and wall seconds of :data:`SPIN` with the policy unset, set before and set after ``import torch``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    print("| OMP_WAIT_POLICY=PASSIVE | load at start | CPU s | wall s |\n|---|---|---|---|")
    for _ in range(rounds):
        for mode in ("unset", "before", "after"):
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, "-c", SPIN, mode], capture_output=True, text=True, env=env,
                                 check=True).stdout.split()
            print(f"| {mode} | {load:.1f} | {out[0]} | {out[1]} |", flush=True)


def start_hogs(n: int, seconds: float) -> tuple[list[subprocess.Popen[bytes]], threading.Timer]:
    """``n`` busy ``yes`` processes, killed by a timer after ``seconds`` (or by the caller before)."""
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(n)]
    timer = threading.Timer(seconds, stop_hogs, args=(hogs,))
    timer.daemon = True
    timer.start()
    return hogs, timer


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for h in hogs:
        if h.poll() is None:
            h.kill()
            h.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="2:spin,2:passive,1:spin,1:passive",
                    help="comma-separated THREADS:WAIT, WAIT one of " + ", ".join(WAITS))
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--hogs", type=int, default=0, help="busy `yes` processes beside the runs (default none)")
    ap.add_argument("--hog-seconds", type=float, default=180.0, help="the hogs are killed after this at the latest")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="stop a run after this many seconds")
    ap.add_argument("--set", action="append", default=[], help="extra config overrides for every run")
    ap.add_argument("--spin-check", action="store_true", help="only check when the waiting policy takes effect")
    args = ap.parse_args(argv)
    if args.spin_check:
        spin_check()
        return 0
    configs = [(int(t), w) for t, w in (c.split(":") for c in args.configs.split(","))]
    hogs: list[subprocess.Popen[bytes]] = []
    timer = None
    if args.hogs:
        hogs, timer = start_hogs(args.hogs, args.hog_seconds)
    print(f"| threads | waiting | load at start, end | PPO s per update (1..{args.updates}) | median | run s |")
    print("|---|---|---|---|---|---|")
    try:
        for threads, wait in configs:
            load = os.getloadavg()[0]
            with tempfile.TemporaryDirectory() as tmp:
                ppo, wall, finished = run_once(threads, wait, args.updates, Path(tmp), args.set, args.timeout_s)
            mark = " (hogs gone before the end)" if hogs and any(h.poll() is not None for h in hogs) else ""
            mark += "" if finished else f" (stopped at the {args.timeout_s:.0f} s limit, {len(ppo)} updates done)"
            median = f"{statistics.median(ppo):.1f}" if ppo else "none finished"
            print(f"| {threads} | {wait} | {load:.1f}, {os.getloadavg()[0]:.1f} | {', '.join(f'{x:.1f}' for x in ppo)}"
                  f" | {median} | {wall:.0f}{mark} |", flush=True)
    finally:
        if timer is not None:
            timer.cancel()
        stop_hogs(hogs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
