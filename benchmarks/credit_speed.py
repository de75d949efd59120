"""Credit-layer speed: records in -> per-step advantages out, for every installed method.

Batches: (1) paper-sized ALFWorld update, 16 groups x 8 rollouts x up to 50 steps with ~1 KB text anchors and
realistic revisits; (2) a 100k-step batch (for near-linear growth). Every repeat parses fresh records from JSON
text (so no string hash is cached between repeats), then times ``assign(method, records)`` alone. A naive
dict-and-loop CRBC (tests/credit/reference.py, one dense solve per group) runs beside it as the straightforward
baseline. All contestants are timed in one run, taking turns in several passes (see ``in_passes``), and each is
also given as a multiple of the time to merely intern the anchors, which cancels the speed of the machine. Usage::

    python benchmarks/credit_speed.py [--repeats 40] [--methods crbc,gigpo] [--markdown]
    python benchmarks/credit_speed.py --drift 300   # how a bare intern's time moves within one process
    python benchmarks/credit_speed.py --scaling     # CRBC on anchor graphs with many cycles, 4k..128k steps

``--scaling``: one group of 8 trajectories whose anchors recur at random (one distinct anchor per 2, 10 or 50
steps), the worst case for a direct sparse LU (one giant strongly connected component). CRBC's full closure as it
solves now (direct where the components are small, GMRES otherwise), beside the same closure forced onto the direct
LU (the solver before; run up to 32k steps), depth 3, GiGPO and ``--explain``, each the median of 3 calls on the
same prebuilt batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentbench_crbc.credit import assign
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.host import get_host


def alfworld_like_batch(n_groups: int = 16, group_size: int = 8, max_steps: int = 50, n_rooms: int = 40,
                        seed: int = 0) -> str:
    """JSON Lines text of a batch shaped like an ALFWorld update (random walks on a room graph per task)."""
    rng = np.random.default_rng(seed)
    lines = []
    filler = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, " * 6
    for g in range(n_groups):
        n_obj = int(rng.integers(3, 8))
        cmds = [f"go to cabinet {k}" for k in range(1, 12)] + ["inventory", "look"]
        goal = n_rooms - 1
        for _ in range(group_size):
            room, held, steps = 0, 0, []
            for _t in range(max_steps):
                adm = " | ".join(sorted(cmds[: 6 + room % 7]))
                anchor = f"task {g} room {room} holding {held} | {filler[: 700]} | {adm}"
                a = int(rng.integers(0, 5))
                steps.append({"anchor": anchor, "action": cmds[(room + a) % len(cmds)]})
                room = min(goal, max(0, room + int(rng.choice([-1, 1, 2, 3], p=[0.3, 0.3, 0.25, 0.15]))))
                held = (held + (a == 4)) % n_obj
                if room == goal:
                    break
            lines.append(json.dumps({"group": f"task-{g}", "steps": steps, "success": room == goal}))
    return "\n".join(lines)


def _intern(records: list) -> None:
    table: dict = {}
    _ = [table.setdefault((r["group"], s["anchor"]), len(table)) for r in records for s in r["steps"]]


NAIVE = "naive dict+loop CRBC"


def contestants(methods: list[str]) -> dict[str, Callable[[list], object]]:
    """Name -> callable on fresh records; the naive reference (:data:`NAIVE`) is timed on fewer calls (it is slow)."""
    from tests.credit.reference import crbc_reference

    out: dict[str, Callable[[list], object]] = {
        "(intern anchors only)": _intern,
        "(records -> StepBatch only)": StepBatch.from_records,
        NAIVE: crbc_reference,
    }
    for m in methods:
        out[m] = partial(assign, m)
    return out


def _timed(lines: list[str], fn: Callable[[list], object]) -> float:
    """Seconds of one call of ``fn`` on freshly parsed records (parsing untimed, so no string hash is cached)."""
    records = [json.loads(line) for line in lines]
    t0 = time.perf_counter()
    fn(records)
    return time.perf_counter() - t0


def in_passes(text: str, fns: dict[str, Callable[[list], object]], repeats: int, passes: int = 4,
              slow_every: int = 5) -> dict[str, list[float]]:
    """Seconds per call. The contestants take turns in ``passes`` passes, each timing ``repeats / passes``
    consecutive calls after one untimed call, so that a machine that speeds up or slows down during the run affects
    every contestant alike while no call follows a different contestant. The naive reference gets 1 in
    ``slow_every`` of the calls."""
    lines = text.splitlines()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(passes):
        for name, fn in fns.items():
            n = max(1, -(-repeats // passes) // (slow_every if name == NAIVE else 1))
            _timed(lines, fn)
            times[name] += [_timed(lines, fn) for _ in range(n)]
    return times


def drift(text: str, rounds: int, every: int = 10) -> list[float]:
    """Median seconds of a bare intern per block of ``every`` rounds, over ``rounds`` parse+intern rounds in this
    process: no package code runs, so any trend is the machine's (allocator, caches, VM), not ours."""
    lines = text.splitlines()
    times = [_timed(lines, _intern) for _ in range(rounds)]
    return [statistics.median(times[i:i + every]) for i in range(0, rounds, every)]


def revisit_batch(n_steps: int, ratio: int, seed: int = 0, n_traj: int = 8) -> StepBatch:
    """One group of ``n_traj`` trajectories, anchors drawn at random from ``n_steps // ratio`` values."""
    rng = np.random.default_rng(seed)
    pool, length = max(n_steps // ratio, 2), n_steps // n_traj
    return StepBatch.from_records([
        {"group": "g", "success": bool(i % 2),
         "steps": [{"anchor": int(a), "action": str(int(rng.integers(4)))} for a in rng.integers(0, pool, length)]}
        for i in range(n_traj)])


def scaling(sizes: list[int], ratios: list[int], direct_up_to: int = 32_000) -> None:
    """Print the scaling table (markdown) of ``--scaling``."""
    import agentbench_crbc.credit.closure as closure_mod
    from agentbench_crbc.credit import assign_batch, explain

    def med(fn: Callable[[], object], n: int = 3) -> float:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def forced_direct(b: StepBatch) -> object:
        limit = closure_mod.DIRECT_FILL_LIMIT
        closure_mod.DIRECT_FILL_LIMIT = float("inf")  # type: ignore[assignment]
        try:
            return assign_batch("crbc", b)
        finally:
            closure_mod.DIRECT_FILL_LIMIT = limit

    assign_batch("crbc", revisit_batch(2000, 10))  # warm up the host and scipy
    print("| steps | anchors | crbc (full closure) | crbc forced direct LU (before) | crbc depth=3 | gigpo | "
          "crbc --explain |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for ratio in ratios:
        for n in sizes:
            b = revisit_batch(n, ratio)
            full = med(lambda b=b: assign_batch("crbc", b))
            direct = f"{med(lambda b=b: forced_direct(b), 1):.3f} s" if n <= direct_up_to else "-"
            d3 = med(lambda b=b: assign_batch("crbc", b, depth=3))
            gi = med(lambda b=b: assign_batch("gigpo", b))
            ex = med(lambda b=b: explain(b.groups(), method="crbc"), 1)
            print(f"| {n:,} | {b.n_states:,} (1/{ratio}) | {full:.3f} s | {direct} | {d3:.3f} s | {gi:.3f} s | "
                  f"{ex:.3f} s |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=40, help="timed calls per method on the paper batch (4 on the big)")
    ap.add_argument("--methods", default="", help="comma-separated (default: every installed method)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--drift", type=int, metavar="ROUNDS", help="only time a bare intern over ROUNDS rounds in one "
                    "process and print its median per 10 rounds (shows how the machine's speed moves)")
    ap.add_argument("--scaling", action="store_true", help="the many-cycles scaling table (see the docstring)")
    args = ap.parse_args()
    if args.scaling:
        scaling([4_000, 8_000, 16_000, 32_000, 64_000, 128_000], [2, 10, 50])
        return
    if args.drift:
        meds = drift(alfworld_like_batch(), args.drift)
        print("bare intern, median ms per 10 rounds:", " ".join(f"{m * 1e3:.2f}" for m in meds))
        return
    methods = args.methods.split(",") if args.methods else get_host().credit.names()
    paper = alfworld_like_batch()
    big = alfworld_like_batch(n_groups=160, group_size=16, max_steps=50, seed=1)
    n_paper = sum(len(json.loads(x)["steps"]) for x in paper.splitlines())
    n_big = sum(len(json.loads(x)["steps"]) for x in big.splitlines())
    fns = contestants(methods)
    for m in methods:  # warm up imports and the plugin host
        assign(m, [json.loads(x) for x in paper.splitlines()[:8]])
    small_t = in_passes(paper, fns, args.repeats)
    big_t = in_passes(big, fns, 4, passes=2, slow_every=2)
    intern_med = statistics.median(small_t["(intern anchors only)"])
    print(f"paper batch: {n_paper} steps (16 groups x 8 rollouts, <= 50 steps, ~1 KB anchors); "
          f"big batch: {n_big} steps; {args.repeats} calls per method in 4 passes")
    rows = [(name, statistics.median(small_t[name]), min(small_t[name]), statistics.median(big_t[name]))
            for name in fns]
    if args.markdown:
        print(f"\n| method | paper batch ({n_paper} steps): median (min) | / intern | {n_big} steps: median | "
              "ms per 1k steps (big) |")
        print("|---|---:|---:|---:|---:|")
        for name, med, low, b in rows:
            print(f"| {name} | {med * 1e3:.2f} ({low * 1e3:.2f}) ms | {med / intern_med:.2f} | {b * 1e3:.1f} ms | "
                  f"{b * 1e6 / n_big:.3f} |")
    else:
        for name, med, low, b in rows:
            print(f"{name:<28} {med * 1e3:8.2f} ({low * 1e3:.2f}) ms  x{med / intern_med:4.2f} {b * 1e3:9.1f} ms  "
                  f"({b * 1e6 / n_big:.3f} ms/1k steps)")


if __name__ == "__main__":
    main()
