"""Credit-layer speed: records in -> per-step advantages out, for every installed method.

Batches: (1) paper-sized ALFWorld update, 16 groups x 8 rollouts x up to 50 steps with ~1 KB text anchors and
realistic revisits; (2) a 100k-step batch (for near-linear growth). Every repeat parses fresh records from JSON
text (so no string hash is cached between repeats), then times ``assign(method, records)`` alone. A naive
dict-and-loop CRBC (tests/credit/reference.py, one dense solve per group) runs beside it as the straightforward
baseline. Usage::

    python benchmarks/credit_speed.py [--repeats 30] [--methods crbc,gigpo] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentbench_crbc.credit import assign
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


def time_method(method: str | None, text: str, repeats: int) -> tuple[float, float]:
    """(median, min) seconds of one credit call; ``method=None`` times the naive reference CRBC."""
    from tests.credit.reference import crbc_reference

    times = []
    for _ in range(repeats):
        records = [json.loads(line) for line in text.splitlines()]  # fresh strings, untimed
        t0 = time.perf_counter()
        if method is None:
            crbc_reference(records)
        else:
            assign(method, records)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def intern_only(text: str, repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        records = [json.loads(line) for line in text.splitlines()]
        t0 = time.perf_counter()
        table: dict = {}
        _ = [table.setdefault((r["group"], s["anchor"]), len(table)) for r in records for s in r["steps"]]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--methods", default="", help="comma-separated (default: every installed method)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args()
    methods = args.methods.split(",") if args.methods else get_host().credit.names()
    paper = alfworld_like_batch()
    big = alfworld_like_batch(n_groups=160, group_size=16, max_steps=50, seed=1)
    n_paper = sum(len(json.loads(x)["steps"]) for x in paper.splitlines())
    n_big = sum(len(json.loads(x)["steps"]) for x in big.splitlines())
    for m in methods:  # warm up imports and the plugin host
        assign(m, [json.loads(x) for x in paper.splitlines()[:8]])
    rows = [("(intern anchors only)", intern_only(paper, args.repeats), intern_only(big, 3))]
    rows.append(("naive dict+loop CRBC", time_method(None, paper, max(3, args.repeats // 5)),
                 time_method(None, big, 1)))
    for m in methods:
        rows.append((m, time_method(m, paper, args.repeats), time_method(m, big, 3)))
    head = (f"paper batch: {n_paper} steps (16 groups x 8 rollouts, <= 50 steps, ~1 KB anchors); "
            f"big batch: {n_big} steps")
    print(head)
    if args.markdown:
        print(f"\n| method | paper batch ({n_paper} steps): median (min) | {n_big} steps: median | "
              "ms per 1k steps (big) |")
        print("|---|---:|---:|---:|")
        for name, (a, a_min), (b, _) in rows:
            print(f"| {name} | {a * 1e3:.2f} ({a_min * 1e3:.2f}) ms | {b * 1e3:.1f} ms | {b * 1e6 / n_big:.3f} |")
    else:
        for name, (a, a_min), (b, _) in rows:
            print(f"{name:<24} {a * 1e3:8.2f} ({a_min * 1e3:.2f}) ms {b * 1e3:9.1f} ms  "
                  f"({b * 1e6 / n_big:.3f} ms/1k steps)")


if __name__ == "__main__":
    main()
