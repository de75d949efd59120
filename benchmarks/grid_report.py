"""The benchmark grid's tables and figures: credit methods x seeds on the CPU default, paired by (seed, level).

Reads result lines of ``benchmarks/update_ablation.py`` (one per finished ``abc train`` run: per held-out level
success before and after RL at T = 0.4, and, for newer runs, training success per update), takes for each method
the cell that is the default's own setting (``--cell METHOD=CELL`` maps a method to an ablation cell that equals the
default, e.g. ``crbc=crbc-noguard-sigma1``), and prints:

* per method: seeds, held-out success before -> after, the gain of RL and the difference to every other method,
  each paired by (seed, level) with a two-stage bootstrap (seeds, then levels within a seed);
* per method, the curve metrics (docs/benchmarks.md, "Curves and failed runs"): final held-out success, area under
  the held-out success curve and updates to ``--threshold`` (rows with a ``curve``), failed runs (gain below a
  third of the median gain of all runs given) with a Wilson interval, median and 20% trimmed mean, each paired by
  seed against ``--reference``;
* per subtask (a Sokoban level's optimal plan length, found by the package's solver from the level seed): success
  after RL per method with a bootstrap interval over (seed, level);

writes ``PREFIX_curves.png`` (training success per update, mean and 95% interval over seeds, for the runs that
recorded it), ``PREFIX_heldout.png`` (held-out success per validation, for rows with a ``curve``) and
``PREFIX_subtasks.png`` (per-subtask bars), and with ``--records FILE`` the runs' leaderboard
records (updates 0 and 60, per plan-length subtask and ``all``).

    python benchmarks/grid_report.py benchmarks/results/grid_tiny1m.jsonl --seed 0 --seed 1 --seed 2 --seed 3 \\
        --seed 4 --figures leaderboards/figures/sokoban_tiny-1M_grid --records runs/grid/records.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

ORDER = ("grpo", "gigpo", "graphgpo", "g2po", "crbc")


def load(paths: list[Path], cells: Mapping[str, str], seeds: set[int] | None) -> dict[str, dict[int, dict]]:
    """``{method: {seed: row}}`` from finished rows; a method's rows come from the cell ``cells`` maps it to, else
    from the cell named as the method (the default's setting)."""
    out: dict[str, dict[int, dict]] = {}
    for path in paths:
        for ln in path.read_text(encoding="utf-8").splitlines():
            if not ln.strip():
                continue
            r = json.loads(ln)
            if r.get("rc") != 0 or "after" not in r or (seeds is not None and int(r["seed"]) not in seeds):
                continue
            method = next((m for m, c in cells.items() if c == r["cell"]), None)
            if method is None and r["cell"] == r["method"] and r["method"] not in cells:
                method = r["method"]
            if method is not None:
                out.setdefault(method, {})[int(r["seed"])] = r
    return dict(sorted(out.items(), key=lambda kv: ORDER.index(kv[0]) if kv[0] in ORDER else len(ORDER)))


@cache
def plan_length(seed: int, sets: tuple[str, ...] = ()) -> int:
    """Moves of an optimal plan of held-out level ``seed`` of the CPU default with the ``env.*`` overrides ``sets``
    (a probe cell's plan lengths and step limit; its env built as `abc train` does)."""
    from agentbench_crbc.envs.sokoban.solver import solution_length

    env = _env(sets)
    env.reset(seed=int(seed))
    n = solution_length(env.unwrapped.level)
    return -1 if n is None else int(n)


@cache
def _env(sets: tuple[str, ...] = ()) -> Any:
    from agentbench_crbc.rollout.hosting.workers import EnvRecipe
    from agentbench_crbc.trainer.config import load_config

    cfg = load_config(overrides=list(sets))
    return EnvRecipe(cfg.env.id, dict(cfg.env.kwargs)).make()


def env_sets(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``env.*`` overrides of a result line's run (they decide its held-out levels)."""
    return tuple(x for x in row.get("sets", ()) if x.startswith("env."))


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}"


def _ci(d: Any) -> str:
    return f"{_pct(d.mean)} ({_pct(d.boot_ci[0])} .. {_pct(d.boot_ci[1])})"


def methods_table(rows: dict[str, dict[int, dict]]) -> str:
    from agentbench_crbc.bench.stats import paired_levels

    ms = list(rows)
    head = "| method | seeds | before | after | gain of RL (95% CI) | " + " | ".join(f"minus {m}" for m in ms) + " |"
    lines = [head, "|" + "---|" * (5 + len(ms))]
    for m in ms:
        rs = rows[m]
        before = {s: r["before"] for s, r in rs.items()}
        after = {s: r["after"] for s, r in rs.items()}
        g = paired_levels(after, before)
        b = np.mean([np.mean(list(v.values())) for v in before.values()])
        a = np.mean([np.mean(list(v.values())) for v in after.values()])
        cells = []
        for o in ms:
            both = sorted(set(rs) & set(rows[o]))
            if o == m or not both:
                cells.append("-")
                continue
            d = paired_levels({s: after[s] for s in both}, {s: rows[o][s]["after"] for s in both})
            cells.append(_ci(d) + ("" if len(both) == len(rs) else f" [{len(both)} seeds]"))
        lines.append(f"| {m} | {','.join(map(str, sorted(rs)))} | {100 * b:.1f}% | {100 * a:.1f}% | {_ci(g)} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def _run_stats(rows: dict[str, dict[int, dict]], threshold: float) -> dict[str, list[Any]]:
    from agentbench_crbc.bench.stats import run_stats

    return {m: [run_stats(r, threshold) for _, r in sorted(rs.items())] for m, rs in rows.items()}


def curves_table(rows: dict[str, dict[int, dict]], reference: str | None, threshold: float) -> str:
    """Per method: final success, AUC of the held-out curve, updates to ``threshold``, failed runs, each with its
    95% bootstrap interval over seeds and the difference to ``reference`` paired by seed (see docs/benchmarks.md,
    "Curves and failed runs")."""
    from agentbench_crbc.bench.stats import summarise_methods
    from agentbench_crbc.bench.summary import curves_markdown

    runs = _run_stats(rows, threshold)
    ref = reference if reference in runs else None
    return curves_markdown(summarise_methods(runs, ref), ref, threshold)


def subtask_success(rs: dict[int, dict], key: str = "after", reps: int = 10_000
                    ) -> dict[int, tuple[float, float, float, int]]:
    """Per plan length: mean success over (seed, level) and a two-stage bootstrap 95% interval, and the levels."""
    from agentbench_crbc.bench.stats import percentile_interval, two_stage_means

    rng = np.random.default_rng(0)  # one stream for every plan length, in order (the committed tables' numbers)
    out = {}
    lengths = sorted({plan_length(int(lv), env_sets(r)) for r in rs.values() for lv in r[key]})
    for n in lengths:
        per = [np.array([v for lv, v in r[key].items() if plan_length(int(lv), env_sets(r)) == n])
               for _, r in sorted(rs.items())]
        x = np.array([p.mean() for p in per])
        lo, hi = percentile_interval(two_stage_means(per, reps=reps // 10, rng=rng, batched=False))
        out[n] = (float(x.mean()), float(lo), float(hi), len(per[0]))
    return out


def subtasks_table(rows: dict[str, dict[int, dict]]) -> tuple[str, dict[str, dict]]:
    sub = {m: subtask_success(rs) for m, rs in rows.items()}
    before = {m: subtask_success(rs, "before") for m, rs in rows.items()}
    lengths = sorted({n for s in sub.values() for n in s})
    some = next(iter(sub.values()))
    head = "| method | " + " | ".join(f"{n} move{'s' if n != 1 else ''} ({some[n][3]} levels)" for n in lengths) + " |"
    lines = [head, "|" + "---|" * (1 + len(lengths))]
    for m, s in sub.items():
        lines.append(f"| {m} | " + " | ".join(
            f"{100 * before[m][n][0]:.0f} -> **{100 * s[n][0]:.0f}%** ({100 * s[n][1]:.0f}-{100 * s[n][2]:.0f})"
            for n in lengths) + " |")
    return "\n".join(lines), sub


def heldout_figure(rows: dict[str, dict[int, dict]], prefix: Path) -> Path | None:
    """``PREFIX_heldout.png``: held-out success at each validation, mean and 95% bootstrap interval over seeds, per
    method whose rows carry a ``curve`` with validations between before and after (``None`` when none does)."""
    import matplotlib.pyplot as plt

    from agentbench_crbc.bench.stats import mean_interval

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for m, rs in rows.items():
        curves = [dict((int(u), float(v)) for u, v in r["curve"]) for r in rs.values() if len(r.get("curve") or []) > 2]
        if not curves:
            continue
        updates = sorted(set.intersection(*(set(c) for c in curves)))
        mu = np.array([np.mean([c[u] for c in curves]) for u in updates])
        ci = np.array([mean_interval([c[u] for c in curves]) for u in updates])
        ax.plot(updates, 100 * mu, marker="o", markersize=3, label=f"{m} ({len(curves)} seeds)")
        ax.fill_between(updates, 100 * ci[:, 0], 100 * ci[:, 1], alpha=0.2)
    if not ax.lines:
        plt.close(fig)
        return None
    ax.set_xlabel("update")
    ax.set_ylabel("held-out success, T = 0.4 (%)")
    ax.set_title(f"{prefix.name}: held-out success per validation (mean, 95% CI over seeds)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = prefix.with_name(prefix.name + "_heldout.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figures(rows: dict[str, dict[int, dict]], sub: dict[str, dict], prefix: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prefix.parent.mkdir(parents=True, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for m, rs in rows.items():
        curves = [r["train_success"] for r in rs.values() if r.get("train_success")]
        if len(curves) < 2:
            continue
        y = np.array(curves, dtype=float)
        mu = y.mean(0)
        half = 1.96 * y.std(0, ddof=1) / np.sqrt(len(y))
        x = np.arange(1, y.shape[1] + 1)
        ax.plot(x, mu, label=f"{m} ({len(y)} seeds)")
        ax.fill_between(x, mu - half, mu + half, alpha=0.2)
    if ax.lines:
        ax.set_xlabel("update")
        ax.set_ylabel("training success (8 x G = 8 episodes)")
        ax.set_title(f"{prefix.name}: training success per update (mean, 95% CI over seeds)", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(prefix.with_name(prefix.name + "_curves.png"))
        fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    held = heldout_figure(rows, prefix)
    written += [held] if held else []
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    lengths = sorted({n for s in sub.values() for n in s})
    width = 0.8 / max(1, len(sub))
    for i, (m, s) in enumerate(sub.items()):
        x = np.arange(len(lengths)) + i * width
        mu = np.array([s[n][0] for n in lengths])
        err = np.array([[s[n][0] - s[n][1] for n in lengths], [s[n][2] - s[n][0] for n in lengths]])
        ax.bar(x, 100 * mu, width, yerr=100 * err, label=m, capsize=2)
    ax.set_xticks(np.arange(len(lengths)) + width * (len(sub) - 1) / 2, [f"{n} move" + "s" * (n != 1) for n in lengths])
    ax.set_ylabel("held-out success after RL, T = 0.4 (%)")
    ax.set_title(f"{prefix.name}: per subtask (optimal plan length), 95% CI", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(prefix.with_name(prefix.name + "_subtasks.png"))
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written


def records(rows: dict[str, dict[int, dict]], episodes: int, budget: int) -> list[Any]:
    """Leaderboard records of the grid's runs: per run, update 0 (before RL) and update ``budget`` (after), one row
    per plan-length subtask and one for ``all``; a row names the commit its result line recorded, else none (a
    board never mixes revisions, so rows from before result lines recorded their commit stand on a board of their
    own)."""
    import dataclasses

    from agentbench_crbc.envs.sokoban.tasks import plan_subtask
    from agentbench_crbc.leaderboard.records import RunRecord
    from agentbench_crbc.trainer.config import config_hash, load_config
    from agentbench_crbc.trainer.eval import builtin_params, model_scale

    out = []
    for method, rs in rows.items():
        for seed, r in sorted(rs.items()):
            own = Path(r["run"]) / "eval" / "records.jsonl"  # the run's own hash while its folder exists, else
            h = (json.loads(own.read_text(encoding="utf-8").split("\n", 1)[0])["config_hash"] if own.is_file()
                 else config_hash(load_config(credit=method, overrides=[*r["sets"], f"seed={seed}"])))  # today's
            rev = str(r["revision"])[:12] if r.get("revision") else None
            scale = model_scale("tiny-qwen2", builtin_params(load_config(credit=method, overrides=r["sets"])))
            for update, key in ((0, "before"), (budget, "after")):
                levels = r[key]
                parts: dict[str, list[float]] = {}
                for lv, v in levels.items():
                    n = plan_length(int(lv), env_sets(r))
                    parts.setdefault(plan_subtask(None if n < 0 else n), []).append(float(v))
                for sub, vs in [("all", list(levels.values())), *sorted(parts.items())]:
                    rec = RunRecord.measured(env="sokoban", subtask=sub, model="tiny-qwen2", model_scale=scale,
                                             method=method, seed=seed, update=update,
                                             success=round(float(np.mean(vs)), 6), n_episodes=episodes * len(vs),
                                             config_hash=h, run=Path(r["run"]).name, budget=budget,
                                             revision=rev or "none")
                    out.append(dataclasses.replace(rec, revision=rev))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="update_ablation.py result files (JSON Lines)")
    p.add_argument("--cell", action="append", default=[], help="METHOD=CELL: the cell that is METHOD's default")
    p.add_argument("--seed", action="append", type=int, help="only these seeds (repeatable; default: all)")
    p.add_argument("--figures", type=Path, help="PREFIX of the figures to write")
    p.add_argument("--records", type=Path, help="write the runs' leaderboard records (JSON Lines) to this file")
    p.add_argument("--episodes", type=int, default=4, help="held-out episodes per level (the default's 4)")
    p.add_argument("--budget", type=int, default=60, help="RL updates of every run (the default's 60)")
    p.add_argument("--reference", default="grpo", help="the method others are paired against (default grpo)")
    p.add_argument("--threshold", type=float, default=0.4,
                   help="held-out success the updates-to-threshold column waits for (default 0.4)")
    args = p.parse_args()
    cells = dict(c.split("=", 1) for c in args.cell)
    rows = load(args.results, cells, set(args.seed) if args.seed else None)
    if not rows:
        raise SystemExit("grid_report: no finished rows in " + ", ".join(map(str, args.results)))
    print(methods_table(rows))
    print()
    print(curves_table(rows, args.reference, args.threshold))
    print()
    table, sub = subtasks_table(rows)
    print(table)
    revs = sorted({str(r.get("revision", "not recorded"))[:12] for rs in rows.values() for r in rs.values()})
    cpus = sorted({r["cpu"] for rs in rows.values() for r in rs.values() if r.get("cpu")})
    walls = [r["wall_s"] for rs in rows.values() for r in rs.values()]
    print(f"\nruns: {len(walls)}, wall per run {min(walls):.0f}-{max(walls):.0f} s (sum {sum(walls) / 3600:.1f} h), "
          f"revisions: {', '.join(revs)}, CPU: {'; '.join(cpus) or 'not recorded'}")
    from agentbench_crbc.bench.tier import judge_cell

    v = judge_cell("these rows", [r for rs in rows.values() for r in rs.values()])
    print(f"tier rule (docs/benchmarks.md): {v.dead} of {v.levels} held-out levels dead, separation "
          f"{100 * v.separation:.1f} points (largest |mean paired gain difference|), {v.cpu_hours:.2f} CPU h a run, "
          f"{100 * v.per_cpu_hour:.1f} points per CPU hour, eligible: {'yes' if v.eligible else 'no'}")
    if args.figures:
        for f in figures(rows, sub, args.figures):
            print(f"wrote {f}")
    if args.records:
        from agentbench_crbc.leaderboard.records import write_records

        recs = records(rows, args.episodes, args.budget)
        write_records(args.records, recs)
        print(f"wrote {len(recs)} records to {args.records}")


if __name__ == "__main__":
    main()
