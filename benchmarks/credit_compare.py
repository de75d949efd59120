"""Compare every installed credit method on the toy group and on one real Sokoban group: tables and figures.

The toy group is credit-methods.md section 0. The realistic group is G = 8 rollouts of one 6x6 / 1-box Sokoban
level (``abc/SokobanText-v0``, 15-step limit, anchor = player and box cells) by a noisy expert: each step the
optimal action with probability 1 - ``eps``, else a uniformly random one (seeded). Every method runs with its
defaults. Usage::

    python benchmarks/credit_compare.py [--out docs/img] [--markdown tables.md] [--seed 3] [--eps 0.45]
    python benchmarks/credit_compare.py --all-plugins --out /tmp/mine   # also installed third-party methods
    python benchmarks/credit_compare.py --speed [--repeats 30]

writes ``credit_toy.png`` and ``credit_sokoban.png`` under ``--out`` and prints markdown tables of per-step
credit; ``--speed`` instead times each method's own computation on an already-built paper-sized batch
(16 groups x 8 rollouts x <= 50 steps, the batch of ``credit_speed.py``, which times records in to advantages
out).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentbench_crbc.credit import assign
from agentbench_crbc.host import Host, get_host, get_plugin_manager


def _rollout(path: str, success: bool) -> dict[str, Any]:
    """``"Aa1 Bb1"`` -> steps (A, a1), (B, b1)."""
    return {"group": "toy", "success": success,
            "steps": [{"anchor": s[0], "action": s[1:]} for s in path.split()]}


TOY: list[dict[str, Any]] = [_rollout("Aa1 Bb1", True), _rollout("Aa1 Bb2 Cc1", False),
                             _rollout("Aa2 Dd1 Cc2", True), _rollout("Aa3 Aa4 Cc1", False)]
#: The order of the tables and panels: the paper's methods first, then the newer ones.
ORDER = ("grpo", "rloo", "gigpo", "graphgpo", "g2po", "gated_bepo", "crbc", "hgpo", "progpo", "pcgpo")


def sokoban_group(seed: int = 3, eps: float = 0.45, group_size: int = 8, level_seed: int = 3) -> list[dict]:
    """G rollouts of one Sokoban level by an eps-noisy optimal policy, as credit-contract records."""
    import gymnasium

    import agentbench_crbc.envs  # noqa: F401  (registers the abc/ ids)
    from agentbench_crbc.envs.sokoban import ACTIONS, expert_policy

    rng = np.random.default_rng(seed)
    records = []
    for _ in range(group_size):
        env = gymnasium.make("abc/SokobanText-v0")
        obs, info = env.reset(seed=level_seed)
        expert = expert_policy(env)
        steps, done = [], False
        while not done:
            player, boxes = info["anchor"]
            action = expert(obs, info) if rng.random() >= eps else str(rng.choice(ACTIONS))
            steps.append({"anchor": f"player {player} boxes {list(boxes)}", "action": action})
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        records.append({"group": f"sokoban-level-{level_seed}", "steps": steps,
                        "success": bool(info["success"])})
        env.close()
    return records


def methods(*, all_plugins: bool = False) -> list[str]:
    """The built-in methods in :data:`ORDER` (the tracked figures and tables), or with ``all_plugins`` every
    installed one, third-party plugins after them."""
    host = get_host() if all_plugins else Host(get_plugin_manager(autoload=False))
    names = host.credit.names()
    return [m for m in ORDER if m in names] + [m for m in names if m not in ORDER]


def credit_table(records: list[dict], names: list[str]) -> dict[str, list[np.ndarray]]:
    return {m: assign(m, records) for m in names}


def markdown_wide(records: list[dict], table: dict[str, list[np.ndarray]]) -> str:
    """One row per method, one column per step (for small groups)."""
    cols = [f"τ{i + 1}.{t + 1}" for i, r in enumerate(records) for t in range(len(r["steps"]))]
    lines = ["| method | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for m, out in table.items():
        lines.append(f"| `{m}` | " + " | ".join(f"{v:.4f}" for v in np.concatenate(out)) + " |")
    return "\n".join(lines)


def markdown_long(records: list[dict], table: dict[str, list[np.ndarray]]) -> str:
    """One row per step (rollout, t, anchor, action), one column per method (for realistic groups)."""
    names = list(table)
    lines = ["| rollout | t | anchor | action | " + " | ".join(f"`{m}`" for m in names) + " |",
             "|---|---:|---|---|" + "---:|" * len(names)]
    for i, r in enumerate(records):
        mark = "✓" if r["success"] else "✗"
        for t, s in enumerate(r["steps"]):
            vals = " | ".join(f"{table[m][i][t]:.2f}" for m in names)
            lines.append(f"| τ{i + 1} {mark} | {t + 1} | {s['anchor']} | {s['action']} | {vals} |")
    return "\n".join(lines)


def figure(records: list[dict], table: dict[str, list[np.ndarray]], title: str, path: Path) -> None:
    """One panel per method: credit along each rollout (green: success, red: failure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    n = len(table)
    ncols = 5
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.6 * nrows), sharex=True, squeeze=False)
    offsets = np.linspace(-0.12, 0.12, len(records))
    for ax, (m, out) in zip(axes.flat, table.items(), strict=False):
        for i, (r, a) in enumerate(zip(records, out, strict=True)):
            t = np.arange(1, len(a) + 1) + offsets[i]
            color = "tab:green" if r["success"] else "tab:red"
            ax.plot(t, a, marker="o", ms=3, lw=1.2, alpha=0.8, color=color, label=f"τ{i + 1}")
        ax.axhline(0.0, color="0.6", lw=0.6)
        ax.set_title(m, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=8)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("step t", fontsize=8)
    fig.suptitle(f"{title} (green: successful rollouts, red: failed; default options)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def speed(repeats: int) -> str:
    """Median and minimum milliseconds of ``assign_batch`` per method on a prebuilt paper-sized StepBatch."""
    import json
    import statistics
    import time

    from agentbench_crbc.credit import assign_batch
    from agentbench_crbc.credit.batch import StepBatch
    from benchmarks.credit_speed import alfworld_like_batch

    batch = StepBatch.from_records([json.loads(x) for x in alfworld_like_batch().splitlines()])
    head = f"paper-sized batch: {batch.n_steps} steps, {batch.n_groups} groups, {batch.n_states} anchors"
    lines = [head, "", "| method | median ms | min ms |", "|---|---:|---:|"]
    for m in methods():
        assign_batch(m, batch)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            assign_batch(m, batch)
            times.append(time.perf_counter() - t0)
        lines.append(f"| `{m}` | {statistics.median(times) * 1e3:.2f} | {min(times) * 1e3:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the PNG figures (default docs/img, the tracked "
                    "figures; with --all-plugins it must be given)")
    ap.add_argument("--all-plugins", action="store_true", help="also installed third-party credit methods "
                    "(default: the built-ins only, as the tracked figures show)")
    ap.add_argument("--markdown", default="", help="also write the tables to this file")
    ap.add_argument("--seed", type=int, default=3, help="seed of the noisy expert")
    ap.add_argument("--eps", type=float, default=0.45, help="probability of a random action")
    ap.add_argument("--speed", action="store_true", help="time each method's computation instead")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    if args.speed:
        print(speed(args.repeats))
        return
    if args.all_plugins and args.out is None:
        ap.error("--all-plugins needs --out DIR (docs/img holds the tracked built-in figures)")
    names = methods(all_plugins=args.all_plugins)
    soko = sokoban_group(seed=args.seed, eps=args.eps)
    wins = sum(r["success"] for r in soko)
    toy_table, soko_table = credit_table(TOY, names), credit_table(soko, names)
    out = Path(args.out or "docs/img")
    figure(TOY, toy_table, "Toy group (credit-methods.md section 0)", out / "credit_toy.png")
    figure(soko, soko_table, f"Sokoban 6x6/1 box, G=8 noisy-expert rollouts ({wins}/8 solved)",
           out / "credit_sokoban.png")
    text = (f"### Toy group\n\n{markdown_wide(TOY, toy_table)}\n\n### Sokoban group ({wins}/8 solved, "
            f"{sum(len(r['steps']) for r in soko)} steps)\n\n{markdown_long(soko, soko_table)}\n")
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
