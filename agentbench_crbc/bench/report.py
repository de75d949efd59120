"""Tables (markdown, CSV), figures and leaderboard records of ``abc bench fidelity``."""

from __future__ import annotations

import csv
import io
import math
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..host import get_host
from ..io import atomic_write_text
from ..textsafe import csv_safe, md_code, md_text
from .learn import LearnConfig, LearningCurves
from .metrics import METRICS, Estimate, bc_interval
from .rows import FidelityRow

__all__ = ["LearningSummary", "summarise_learning", "write_report"]

_FIG_PREFIX = "fidelity"


def _slug(name: str) -> str:
    """A family name as a file-name part (a name from an MDP file may hold ``/`` or quotes)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "x"


def _fmt(e: Estimate | None, digits: int = 2) -> str:
    if e is None or not math.isfinite(e.value):
        return "n/a"
    return f"{e.value:.{digits}f} [{e.lo:.{digits}f}, {e.hi:.{digits}f}]"


@dataclass(frozen=True, eq=False)
class LearningSummary:
    """One method's learning on one family: final success and updates to reach a threshold, with intervals."""

    method: str
    final: Estimate
    updates_to: Estimate
    reached: int
    to_graphgpo: Estimate | None


def _first_reach(curve: np.ndarray, updates: np.ndarray, threshold: float) -> float:
    hit = np.flatnonzero(curve >= threshold)
    return float(updates[hit[0]]) if len(hit) else math.nan


def _boot(values: np.ndarray, fn: object, reps: int, rng: np.random.Generator) -> Estimate:
    """Bootstrap over seeds (the last axis of ``values``) of ``fn(values) -> float``."""
    n = values.shape[-1]
    idx = rng.integers(0, n, size=(reps, n))
    draws = np.array([fn(values[..., i]) for i in idx])  # type: ignore[operator]
    point = float(fn(values))  # type: ignore[operator]
    lo, hi = bc_interval(point, draws)
    return Estimate(point, lo, hi, draws)


def summarise_learning(curves: Sequence[LearningCurves], *, reps: int = 2000, seed: int = 0
                       ) -> tuple[float, list[LearningSummary]]:
    """The threshold (90% of the best final mean success) and each method's summary.

    ``updates_to`` is the mean over seeds of the first evaluated update at or above the threshold, a seed that
    never gets there counting the whole budget (so it is a lower bound when ``reached`` < seeds).
    ``to_graphgpo`` is the first update at which the method's mean curve reaches GraphGPO's final mean success,
    as a fraction of the budget: the paper's "CRBC reaches GraphGPO's final reward in about half the updates".
    """
    rng = np.random.default_rng(seed)
    best = max(float(c.success[-1].mean()) for c in curves)
    threshold = 0.9 * best
    ref = next((c for c in curves if c.method == "graphgpo"), None)
    out = []
    for c in curves:
        budget = float(c.updates[-1])
        per_seed = np.array([_first_reach(c.success[:, k], c.updates, threshold) for k in range(c.success.shape[1])])
        capped = np.where(np.isnan(per_seed), budget, per_seed)
        to_ref = None
        if ref is not None:
            def frac(block: np.ndarray, c: LearningCurves = c, ref: LearningCurves = ref, budget: float = budget
                     ) -> float:
                return _first_reach(block[0].mean(1), c.updates, float(block[1][-1].mean())) / budget
            to_ref = _boot(np.stack([c.success, ref.success]), frac, reps, rng)
        out.append(LearningSummary(c.method, _boot(c.success[-1], np.mean, reps, rng),
                                   _boot(capped, np.mean, reps, rng), int(np.isfinite(per_seed).sum()), to_ref))
    return threshold, out


def _csv(header: Sequence[str], rows: Sequence[Sequence[object]], names: Sequence[int]) -> str:
    """CSV text; the cells at ``names`` are names (family, setting, method: from plugins and MDP files), escaped
    with :func:`~agentbench_crbc.textsafe.csv_safe`; the others are numbers."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([csv_safe(str(c)) if i in names else c for i, c in enumerate(row)] for row in rows)
    return buf.getvalue()


def _fidelity_md(rows: Sequence[object]) -> list[str]:
    rs = [r for r in rows if isinstance(r, FidelityRow)]
    lines: list[str] = []
    settings = list(dict.fromkeys((r.family, r.setting) for r in rs))
    sizes = sorted({r.group_size for r in rs})
    for fam, label in settings:
        mine = [r for r in rs if (r.family, r.setting) == (fam, label)]
        g8 = 8 if 8 in sizes else sizes[0]
        head = next(r for r in mine if r.group_size == g8).extra
        lines += [f"#### {md_text(fam)}/{md_text(label)} (G = {g8}; behaviour success {head['success_rate']:.2f}, "
                  f"{head['steps']} steps)", "",
                  "| method | Pearson | Spearman | sign agreement | error after best scale | cosine (per group) "
                  "| cosine (pooled) | Pearson gain over best of GRPO/RLOO |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in sorted((r for r in mine if r.group_size == g8), key=lambda r: -r.metrics["pearson"].value):
            gain = _fmt(r.gain) + (" **beats**" if r.gain is not None and r.gain.lo > 0 else "")
            lines.append(f"| {md_text(r.method)} | " + " | ".join(_fmt(r.metrics[m]) for m in METRICS)
                         + f" | {gain} |")
        lines += ["", "Pearson by group size:", "", "| method | " + " | ".join(f"G={g}" for g in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        for method in dict.fromkeys(r.method for r in mine):
            cells = [next((_fmt(r.metrics["pearson"]) for r in mine if r.method == method and r.group_size == g),
                          "") for g in sizes]
            lines.append(f"| {md_text(method)} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _figures(out: Path, rows: Sequence[object], curves: Mapping[str, Sequence[LearningCurves]]) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the leaderboard extra is not installed: tables only
        return []
    rs = [r for r in rows if isinstance(r, FidelityRow)]
    paths = []
    # trajectory-level methods (the baselines; their plugins say so) are drawn dashed
    dashed = {m.name for m in get_host().credit if m.trajectory_level}
    for fam in dict.fromkeys(r.family for r in rs):
        labels = list(dict.fromkeys(r.setting for r in rs if r.family == fam))
        cols = min(4, len(labels))
        nrows = math.ceil(len(labels) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3.2 * nrows), squeeze=False, sharey=True)
        for ax, label in zip(axes.flat, labels, strict=False):
            mine = [r for r in rs if r.family == fam and r.setting == label]
            for method in dict.fromkeys(r.method for r in mine):
                pts = sorted((r.group_size, r.metrics["pearson"]) for r in mine if r.method == method)
                x = [p[0] for p in pts]
                style = "--" if method in dashed else "-"
                ax.plot(x, [p[1].value for p in pts], style, marker="o", ms=3, label=method)
                ax.fill_between(x, [p[1].lo for p in pts], [p[1].hi for p in pts], alpha=0.15)
            ax.set_xscale("log", base=2)
            ax.set_title(label, fontsize=9)
            ax.set_xlabel("G")
        for ax in axes.flat[len(labels):]:
            ax.axis("off")
        axes[0, 0].set_ylabel("Pearson with true advantage")
        axes.flat[0].legend(fontsize=6, ncol=2)
        fig.tight_layout()
        path = out / f"{_FIG_PREFIX}_corr_{_slug(fam)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    for fam, cs in curves.items():
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for c in cs:
            mean = c.success.mean(1)
            se = c.success.std(1, ddof=1) / math.sqrt(c.success.shape[1]) if c.success.shape[1] > 1 else 0 * mean
            style = "--" if c.method in dashed else "-"
            ax.plot(c.updates, mean, style, label=c.method)
            ax.fill_between(c.updates, mean - 1.96 * se, mean + 1.96 * se, alpha=0.15)
        ax.set_xlabel("update")
        ax.set_ylabel("exact success probability")
        ax.set_title(f"{Path(fam).stem}: tabular softmax, G = 8, mean and 95% CI over seeds", fontsize=9)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = out / f"{_FIG_PREFIX}_learning_{_slug(Path(fam).stem)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _records(out: Path, curves: Mapping[str, Sequence[LearningCurves]], cfg: LearnConfig, command: str) -> Path:
    """Final exact success of every (family, method, seed) as leaderboard records on the ``fidelity`` board."""
    import hashlib

    from ..leaderboard.records import RunRecord, write_records

    digest = hashlib.sha256(repr((cfg, command.split(" --out")[0])).encode()).hexdigest()[:12]
    recs = []
    for fam, cs in curves.items():
        for c in cs:
            for k in range(c.success.shape[1]):
                recs.append(RunRecord.measured(
                    env=Path(fam).stem.lower(), subtask="tabular", model="tabular-softmax", model_scale="fidelity",
                    method=c.method, seed=k, update=int(c.updates[-1]), success=float(c.success[-1, k]),
                    n_episodes=cfg.updates * cfg.groups * cfg.group_size, config_hash=digest))
    path = out / "records.jsonl"
    write_records(path, recs)
    return path


def write_report(out: Path, rows: Sequence[object], curves: Mapping[str, Sequence[LearningCurves]],
                 cfg: LearnConfig, *, command: str, elapsed: float) -> list[Path]:
    """Write ``fidelity.md``, ``fidelity.csv``, ``learning.csv``, figures and ``records.jsonl`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rs = [r for r in rows if isinstance(r, FidelityRow)]
    paths = []
    header = ["family", "setting", "G", "method"] + [f"{m}{s}" for m in METRICS for s in ("", "_lo", "_hi")] + [
        "pearson_gain", "pearson_gain_lo", "pearson_gain_hi", "behaviour_success", "steps"]
    table = [[r.family, r.setting, r.group_size, r.method,
              *[f"{getattr(r.metrics[m], a):.6g}" for m in METRICS for a in ("value", "lo", "hi")],
              *([f"{getattr(r.gain, a):.6g}" for a in ("value", "lo", "hi")] if r.gain else ["", "", ""]),
              f"{r.extra['success_rate']:.4f}", r.extra["steps"]] for r in rs]
    atomic_write_text(out / "fidelity.csv", _csv(header, table, (0, 1, 3)))
    paths.append(out / "fidelity.csv")
    lines = ["# Credit fidelity", "", f"Command: {md_code(command)} ({elapsed:.0f} s).", "",
             "Values are point estimates with 95% bootstrap intervals over groups (paired across methods).", ""]
    lines += _fidelity_md(rs)
    learn_rows = []
    for fam, cs in curves.items():
        threshold, summary = summarise_learning(cs)
        lines += [f"#### Learning on {md_text(Path(fam).stem)} ({cfg.seeds} seeds, {cfg.updates} updates, G = "
                  f"{cfg.group_size}, {cfg.groups} groups per update)", "",
                  f"Threshold: 90% of the best final mean success = {threshold:.3f}.", "",
                  "| method | final success | updates to threshold | seeds reaching it | updates to GraphGPO's final "
                  "(fraction of budget) |", "|---|---|---|---|---|"]
        for s in sorted(summary, key=lambda s: s.updates_to.value):
            lines.append(f"| {md_text(s.method)} | {_fmt(s.final, 3)} | {_fmt(s.updates_to, 0)} | "
                         f"{s.reached}/{cfg.seeds} | {_fmt(s.to_graphgpo)} |")
            learn_rows.append([fam, s.method, f"{s.final.value:.6g}", f"{s.final.lo:.6g}", f"{s.final.hi:.6g}",
                               f"{s.updates_to.value:.6g}", f"{s.updates_to.lo:.6g}", f"{s.updates_to.hi:.6g}",
                               s.reached, f"{threshold:.6g}",
                               *([f"{s.to_graphgpo.value:.6g}", f"{s.to_graphgpo.lo:.6g}", f"{s.to_graphgpo.hi:.6g}"]
                                 if s.to_graphgpo else ["", "", ""])])
        lines.append("")
    if curves:
        atomic_write_text(out / "learning.csv", _csv(
            ["family", "method", "final", "final_lo", "final_hi", "updates_to", "updates_to_lo", "updates_to_hi",
             "reached", "threshold", "to_graphgpo", "to_graphgpo_lo", "to_graphgpo_hi"], learn_rows, (0, 1)))
        curve_rows = [[fam, c.method, int(u), k, f"{c.success[i, k]:.6g}"] for fam, cs in curves.items() for c in cs
                      for i, u in enumerate(c.updates) for k in range(c.success.shape[1])]
        atomic_write_text(out / "curves.csv", _csv(["family", "method", "update", "seed", "success"], curve_rows,
                                                   (0, 1)))
        paths += [out / "learning.csv", out / "curves.csv", _records(out, curves, cfg, command)]
    figs = _figures(out, rs, curves)
    lines += [f"![{md_text(p.stem)}]({urllib.parse.quote(p.name)})" for p in figs]
    atomic_write_text(out / "fidelity.md", "\n".join(lines) + "\n")
    return [out / "fidelity.md", *paths, *figs]
