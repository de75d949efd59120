"""`abc credit --explain` against `assign` on one large group: explain must stay linear in the group's steps.

One group of ``--rollouts`` trajectories of ``--length`` steps over ``--anchors`` random anchors and 4 actions
(seeded). Usage::

    python benchmarks/explain_speed.py [--rollouts 100] [--length 1000] [--anchors 500]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentbench_crbc.credit import assign_batch
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.plugins import crbc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=100)
    ap.add_argument("--length", type=int, default=1000)
    ap.add_argument("--anchors", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    records = [{"group": "g", "success": rng.random() < 0.5,
                "steps": [{"anchor": f"s{rng.randrange(args.anchors)}", "action": f"a{rng.randrange(4)}"}
                          for _ in range(args.length)]} for _ in range(args.rollouts)]
    batch = StepBatch.from_records(records)
    t0 = time.perf_counter()
    assign_batch("crbc", batch)
    t1 = time.perf_counter()
    crbc.explain(batch)
    t2 = time.perf_counter()
    print(f"{batch.n_steps} steps, {batch.n_states} anchors: assign {t1 - t0:.2f} s, explain {t2 - t1:.2f} s")


if __name__ == "__main__":
    main()
