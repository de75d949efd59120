"""The learning benchmark's report: per-variant tables, paired comparisons, curve metrics and figures of its rows."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .plan import CONTROL, SCALE, WARM, comparisons, default_env, variants
from .stats import (
    FAILURE_FRACTION,
    THRESHOLD,
    Estimate,
    MethodStats,
    Paired,
    RunStats,
    failure_cutoff,
    paired_levels,
    paired_stats,
    run_stats,
    summarise_methods,
)

__all__ = ["curves_markdown", "method_stats", "summarise", "summary_markdown", "train_curves_figure"]


def _final_update(row: dict[str, Any], updates: int) -> str:
    """The validation a run is judged by: update 0 for the warm start and the imitation control, else the last."""
    return "0" if row["kind"] in ("control", "warm") else str(updates)


def _final(row: dict[str, Any], decoding: str, updates: int) -> float | None:
    return row["evals"].get(_final_update(row, updates), {}).get(decoding)


def _final_levels(row: dict[str, Any], decoding: str, updates: int) -> dict[str, int] | None:
    return row.get("episodes", {}).get(_final_update(row, updates), {}).get(decoding)


def _as_result_line(row: dict[str, Any], updates: int) -> dict[str, Any] | None:
    """An RL row as a result line for :func:`~agentbench_crbc.bench.stats.run_stats`: per-level T = 0.4 success
    before (update 0) and after (``updates``), and the held-out curve over its validations."""
    evals = {int(u): v["t0.4"] for u, v in row["evals"].items() if v.get("t0.4") is not None}
    if 0 not in evals or updates not in evals:
        return None
    eps = row.get("episodes", {})

    def levels(u: int) -> dict[str, float]:
        got = eps.get(str(u), {}).get("t0.4")
        return {k: float(v) for k, v in got.items()} if got else {"all": float(evals[u])}

    return {"seed": row["seed"], "before": levels(0), "after": levels(updates),
            "curve": [[u, evals[u]] for u in sorted(evals) if u <= updates]}


def method_stats(rows: Sequence[dict[str, Any]], updates: int, env: str,
                 threshold: float = THRESHOLD) -> tuple[dict[str, MethodStats], str | None]:
    """The curve metrics of the RL variants of ``env`` (every RL run of the family is the failure rule's cell),
    paired by seed against the first reference of the summary's comparisons that ran; and that reference."""
    runs: dict[str, list[RunStats]] = defaultdict(list)
    for r in rows:
        if r["env"] == env and r["kind"] == "rl" and (line := _as_result_line(r, updates)) is not None:
            runs[r["label"]].append(run_stats(line, threshold))
    ref = next((b for _, b in comparisons() if b in runs), None)
    return summarise_methods({m: sorted(rs, key=lambda x: x.seed) for m, rs in runs.items()}, ref), ref


def _iv(e: Estimate | None, scale: float = 100.0, fmt: str = ".1f") -> str:
    """``mean (lo .. hi)``: an estimate and its bootstrap interval over seeds."""
    return "n/a" if e is None else f"{scale * e.mean:{fmt}} ({scale * e.ci[0]:{fmt}} .. {scale * e.ci[1]:{fmt}})"


def _vs(d: Paired | None, scale: float = 100.0, fmt: str = "+.1f") -> str:
    """A paired difference to the reference: mean and bootstrap interval over seeds."""
    if d is None:
        return "-"
    return f"{scale * d.mean:{fmt}} ({scale * d.boot_ci[0]:{fmt}} .. {scale * d.boot_ci[1]:{fmt}})"


def curves_markdown(stats: dict[str, MethodStats], reference: str | None, threshold: float = THRESHOLD) -> str:
    """The curve metrics as a markdown table (success in percent), the failed runs and the cutoff beneath."""
    minus = f" − {reference}" if reference else " − ref"
    lines = [f"| method | seeds | final % (95% CI) | final{minus} | median / 20%-trimmed final % | AUC % (95% CI) | "
             f"AUC{minus} | updates to {100 * threshold:.0f}% (censored) | updates{minus} | failed (95% CI) | "
             f"failed{minus} (points) |", "|" + "---|" * 11]
    for m, st in stats.items():
        upd = "n/a" if st.to_threshold is None else f"{_iv(st.to_threshold, 1.0)} ({st.censored})"
        fail = (f"{st.failures}/{len(st.runs)} = {100 * st.failure_rate:.0f}% ({100 * st.failure_ci[0]:.0f} .. "
                f"{100 * st.failure_ci[1]:.0f})")
        lines.append(f"| {m} | {','.join(map(str, st.seeds))} | {_iv(st.final)} | {_vs(st.final.vs)} | "
                     f"{100 * st.final_median:.1f} / {100 * st.final_trimmed:.1f} | {_iv(st.auc)} | "
                     f"{_vs(st.auc and st.auc.vs)} | {upd} | {_vs(st.to_threshold and st.to_threshold.vs, 1.0)} | "
                     f"{fail} | {_vs(st.failure_vs, fmt='+.0f')} |")
    runs = [r for st in stats.values() for r in st.runs]
    cut = failure_cutoff([r.gain for r in runs]) if runs else float("inf")
    failed = ", ".join(f"{m} seed {r.seed} ({100 * r.gain:+.1f})" for m, st in stats.items() for r in st.runs
                       if r.failed) or "none"
    lines.append(f"\nFailed runs (gain of RL below {FAILURE_FRACTION:.2g} x the median gain of all {len(runs)} runs, "
                 f"{100 * cut:+.1f} points): {failed}.")
    if stats and all(st.auc is None for st in stats.values()):
        lines.append("AUC and updates-to-threshold: n/a, the runs validated before and after RL only "
                     "(`--set eval.every=10` records a curve).")
    return "\n".join(lines)


def summarise(rows: Sequence[dict[str, Any]], updates: int, env: str | None = None) -> dict[str, Any]:
    """Per variant: held-out success (t0.4, greedy) after the budget, per seed; paired comparisons over seeds
    (``env``: the rows of this family; default :func:`default_env`)."""
    env = env or default_env()
    by: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r["env"] == env:
            by[r["label"]][r["seed"]] = r
    table: dict[str, Any] = {}
    known = variants()
    others = sorted(set(by) - {WARM, CONTROL, *known})  # installed methods run by name (--method NAME)
    for label in [WARM, *known, *others, CONTROL]:
        if label not in by:
            continue
        per_seed = {}
        for seed, r in sorted(by[label].items()):
            vals = {dec: _final(r, dec, updates) for dec in ("t0.4", "greedy")}
            vals["train_success_mean"] = (sum(r["train_success"]) / len(r["train_success"])
                                          if r["train_success"] else None)
            vals["seconds"] = r["rl_seconds"] if r["kind"] == "rl" else r["seconds"]
            vals["samples"] = r["rl_samples"] if r["kind"] == "rl" else r["sft_samples"]
            per_seed[seed] = vals
        table[label] = per_seed
    pairs = [*comparisons(), *((v, CONTROL) for v in others), *((v, WARM) for v in [*known, *others, CONTROL])]
    comps = []
    for a, b in pairs:
        if a not in table or b not in table:
            continue
        for metric in ("t0.4", "greedy", "train_success_mean"):
            seeds = [s for s in table[a] if s in table[b] and table[a][s].get(metric) is not None
                     and table[b][s].get(metric) is not None]
            if not seeds or (metric == "train_success_mean" and WARM in (a, b)):
                continue
            ps = paired_stats([table[a][s][metric] for s in seeds], [table[b][s][metric] for s in seeds])
            comps.append({"a": a, "b": b, "metric": metric, "seeds": seeds, **dataclasses.asdict(ps),
                          "significant": ps.significant})
    level_comps = []
    for a, b in pairs:
        for metric in ("t0.4", "greedy"):
            per = {lab: {s: lv for s, r in by.get(lab, {}).items() if (lv := _final_levels(r, metric, updates))}
                   for lab in (a, b)}
            if not set(per[a]) & set(per[b]):
                continue
            try:
                pl = paired_levels(per[a], per[b])
            except ValueError:
                continue
            level_comps.append({"a": a, "b": b, "metric": metric, **dataclasses.asdict(pl),
                                "significant": pl.significant})
    stats, ref = method_stats(rows, updates, env)
    curves = {"reference": ref, "threshold": THRESHOLD, "failure_fraction": FAILURE_FRACTION,
              "methods": {m: {**dataclasses.asdict(st), "failure_rate": st.failure_rate} for m, st in stats.items()},
              "markdown": curves_markdown(stats, ref) if stats else ""}
    return {"env": env, "updates": updates, "table": table, "comparisons": comps, "level_comparisons": level_comps,
            "curves": curves}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as markdown tables (success in percent)."""
    import numpy as np

    lines = [f"Held-out success (%) after {summary['updates']} updates, per seed (mean ± std over seeds); "
             "`imitation` = the warm start continued for the RL stage's median wall time; `warmstart` = the shared "
             "starting point; train = mean training-rollout success over the RL updates (T=1.0). Seconds: the RL "
             "stage (RL variants) or the whole run; samples: env steps trained on (RL) or examples (imitation).",
             "",
             "| variant | seeds | T=0.4 | greedy | train | per seed T=0.4 | seconds / samples trained on |",
             "|---|---|---|---|---|---|---|"]
    for label, per in summary["table"].items():
        def agg(metric: str, per: dict = per) -> str:
            v = [x[metric] for x in per.values() if x.get(metric) is not None]
            if not v:
                return "n/a"
            return f"{100 * np.mean(v):.1f}" + (f" ± {100 * np.std(v, ddof=1):.1f}" if len(v) > 1 else "")
        seeds = ", ".join(_pct(x["t0.4"]) for x in per.values())
        cost = ", ".join(f"{x['seconds']:.0f}/{x['samples']}" for x in per.values())
        lines.append(f"| {label} | {len(per)} | {agg('t0.4')} | {agg('greedy')} | {agg('train_success_mean')} | "
                     f"{seeds} | {cost} |")
    lines += ["", "Paired differences a − b over seeds (points): mean, 95% t interval, paired t-test p, 95% "
              "bootstrap interval over seeds, wins/losses.", "",
              "| a − b | metric | n | mean | 95% t CI | p | bootstrap CI | W/L | significant (5%) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in summary["comparisons"]:
        tci = "n/a" if c["t_ci"] is None else f"[{100 * c['t_ci'][0]:+.1f}, {100 * c['t_ci'][1]:+.1f}]"
        p = "n/a" if c["p"] is None else f"{c['p']:.3f}"
        lines.append(f"| {c['a']} − {c['b']} | {c['metric']} | {c['n']} | {100 * c['mean']:+.1f} | {tci} | {p} | "
                     f"[{100 * c['boot_ci'][0]:+.1f}, {100 * c['boot_ci'][1]:+.1f}] | {c['wins']}/{c['losses']} | "
                     f"{'yes' if c['significant'] else 'no'} |")
    if summary.get("level_comparisons"):
        lines += ["", "Paired by held-out level (seed x level; same levels, same warm start): mean difference "
                  "(points), 95% two-stage bootstrap interval (seeds, then levels), levels only a / only b solved, "
                  "exact McNemar p.", "",
                  "| a − b | metric | seeds x levels | mean | bootstrap CI | a only / b only | McNemar p | "
                  "significant (5%) |", "|---|---|---|---|---|---|---|---|"]
        for c in summary["level_comparisons"]:
            lines.append(f"| {c['a']} − {c['b']} | {c['metric']} | {c['n_seeds']} x {c['n_levels']} | "
                         f"{100 * c['mean']:+.1f} | [{100 * c['boot_ci'][0]:+.1f}, {100 * c['boot_ci'][1]:+.1f}] | "
                         f"{c['a_only']} / {c['b_only']} | {c['p']:.3f} | {'yes' if c['significant'] else 'no'} |")
    if summary.get("curves", {}).get("markdown"):
        c = summary["curves"]
        lines += ["", "Per RL variant (docs/benchmarks.md, \"Curves and failed runs\"): final held-out success "
                  "(T=0.4), area under the held-out success curve (trapezoid over updates / span: a mean success), "
                  f"updates to the first validation at or above {100 * c['threshold']:.0f}% (censored runs enter at "
                  "the budget), failed runs with a Wilson interval; 95% bootstrap intervals over seeds, differences "
                  "paired by seed "
                  f"against {c['reference'] or 'no reference'}.", "", c["markdown"]]
    return "\n".join(lines) + "\n"


def train_curves_figure(rows: Sequence[dict[str, Any]], env: str, path: Path) -> Path:
    """Training-rollout success per update (mean over seeds) per RL variant."""
    import numpy as np
    from matplotlib.figure import Figure

    from ..io import atomic_open

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    by: dict[str, list[list[float]]] = defaultdict(list)
    for r in rows:
        if r["env"] == env and r["kind"] == "rl" and r["train_success"]:
            by[r["label"]].append(r["train_success"])
    for label, curves in by.items():
        n = min(len(c) for c in curves)
        m = 100 * np.mean([c[:n] for c in curves], axis=0)
        ax.plot(np.arange(1, n + 1), m, marker="o", markersize=2, label=f"{label} (n={len(curves)})")
    ax.set_xlabel("update")
    ax.set_ylabel("training success % (T=1.0, 64 rollouts)")
    ax.set_title(f"{env} · {SCALE}: training success per update (mean over seeds)")
    ax.legend(fontsize=7, frameon=False, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", metadata={"Software": None})
    return path


