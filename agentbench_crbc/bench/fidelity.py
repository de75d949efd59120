"""``abc bench fidelity``: every installed credit method's step credit against the exact advantage, and learning.

Fidelity: per setting (an MDP with a behaviour policy) and group size G, sample groups from pi, turn them into
credit records with the MDP's anchors, run every method through the plugin host, and compare its credit with
``Q_{T-k}(s, a) - V_{T-k}(s)`` at the same steps (:mod:`.metrics`). Learning: tabular softmax policies trained with
each method's credit (:mod:`.learn`). Outputs: markdown and CSV tables, figures, leaderboard records.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

from ..argtypes import bounded_int
from ..credit import assign_batch
from ..credit.batch import StepBatch
from ..errors import ConfigError
from ..host import Host, get_host
from ..io import atomic_open
from ..tabular.dp import exact_gradient, exact_values, write_exact_json
from ..tabular.families import Setting, fidelity_settings, learning_task, tabular_families
from ..tabular.mdp import load_mdp
from ..tabular.sample import sample_episodes, to_records
from .learn import LearnConfig, LearningCurves, learn
from .metrics import bootstrap_weights, fidelity_metrics, policy_gradients
from .report import write_report
from .rows import FidelityRow

__all__ = ["MODES", "FidelityRow", "Mode", "add_arguments", "measure_setting", "run"]


@dataclass(frozen=True)
class Mode:
    """Budgets of one mode (in groups, bootstrap replicates and updates, never minutes)."""

    group_sizes: tuple[int, ...]
    groups: int
    reps: int
    learn: LearnConfig
    out: str


MODES = {
    "quick": Mode((4, 8, 16, 32), 100, 300, LearnConfig(updates=300, seeds=10, eval_every=20),
                  "runs/bench/fidelity-quick"),
    "full": Mode((4, 8, 16, 32), 500, 1000, LearnConfig(updates=2000, seeds=10, eval_every=20),
                 "leaderboards/fidelity"),
}


def measure_setting(setting: Setting, methods: Sequence[str], group_size: int, n_groups: int, reps: int, *,
                    seed: int = 0, host: Host | None = None) -> list[FidelityRow]:
    """Fidelity of each method on ``n_groups`` groups of ``group_size`` rollouts of one setting."""
    host = host or get_host()
    mdp = setting.mdp()
    values = exact_values(mdp)
    exact = exact_gradient(mdp, values).ravel()
    rng = np.random.default_rng([seed, group_size])
    ep = sample_episodes(mdp, n_groups * group_size, rng)
    batch = StepBatch.from_records(to_records(mdp, ep, group_size))
    epi, k, s, a = ep.steps()
    truth = values.step_advantage(k, s, a)
    truth_rank = rankdata(truth)
    group = epi // group_size
    weights = bootstrap_weights(n_groups, reps, rng)
    rows = []
    for name in methods:
        credit = assign_batch(name, batch, host=host)
        grads = policy_gradients(credit, group, s, a, mdp.policy, n_groups, group_size)
        rows.append(FidelityRow(setting.family, setting.label, group_size, name,
                                fidelity_metrics(credit, truth, truth_rank, group, grads, exact, weights),
                                extra={"success_rate": float(ep.success.mean()), "steps": len(truth)}))
    # the trajectory-level methods (their plugins say so): every step-level method must beat the better of them
    baselines = {m.name for m in host.credit if m.trajectory_level}
    base = [r for r in rows if r.method in baselines]
    if base:
        best = max(base, key=lambda r: r.metrics["pearson"].value)
        rows = [FidelityRow(r.family, r.setting, r.group_size, r.method, r.metrics,
                            r.metrics["pearson"].minus(best.metrics["pearson"]), r.extra) for r in rows]
    return rows


# -- command line -------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``abc bench fidelity``."""
    p.add_argument("--quick", action="store_true", help="the quick mode (small budgets; under 2 minutes)")
    p.add_argument("--family", action="append", metavar="NAME|FILE.json",
                   help=f"only these families (repeatable): {', '.join(tabular_families())} or an MDP JSON file")
    p.add_argument("--method", action="append", help="only these credit methods (repeatable; default: all installed)")
    p.add_argument("--out", type=Path, help="tables, figures and records go here (default: the mode's folder)")
    p.add_argument("--groups", type=bounded_int(2, 10_000), help="groups per (setting, G) (default: the mode's)")
    p.add_argument("--updates", type=bounded_int(0, 100_000),
                   help="learning updates (default: the mode's; 0 skips learning)")
    p.add_argument("--seed", type=int, default=0, help="base random seed")
    p.add_argument("--mdp", type=Path, help="with --exact: the MDP JSON file whose exact values to write")
    p.add_argument("--exact", type=Path, help="write {V: {t: {s: v}}, Q: {t: {s: {a: q}}}} of --mdp here")


def _write_exact(args: argparse.Namespace) -> int:
    if args.mdp is None or args.exact is None:
        raise ConfigError("--mdp and --exact go together: abc bench fidelity --mdp FILE.json --exact OUT.json")
    mdp = load_mdp(args.mdp)
    with atomic_open(args.exact) as fh:  # streamed: memory stays the DP arrays
        write_exact_json(fh, mdp)
    print(f"exact V and Q of {mdp.name} (T={mdp.horizon}, {mdp.n_states} states) -> {args.exact}")
    return 0


def _methods(host: Host, wanted: Sequence[str] | None) -> list[str]:
    names = list(wanted) if wanted else host.credit.names()
    for n in names:
        host.credit_method(n)  # unknown names fail here, listing the installed ones
    return names


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Measure fidelity and learning, then write tables, figures and records."""
    if args.mdp is not None or args.exact is not None:
        return _write_exact(args)
    mode = MODES["quick" if args.quick else "full"]
    host = get_host()
    methods = _methods(host, args.method)
    families = args.family or list(tabular_families())
    settings = [s for f in families for s in fidelity_settings(f, "quick" if args.quick else "full")]
    n_groups = args.groups or mode.groups
    if n_groups < 2:
        raise ConfigError(f"--groups {n_groups}: need at least 2 groups for an interval")
    cfg = mode.learn if args.updates is None else LearnConfig(**{**mode.learn.__dict__, "updates": args.updates})
    out = args.out or Path(mode.out)
    line = "abc bench fidelity " + " ".join(sys.argv[3:] if argv is None else argv)
    t0 = time.perf_counter()
    rows: list[FidelityRow] = []
    for setting in settings:
        for g in mode.group_sizes:
            rows += measure_setting(setting, methods, g, n_groups, mode.reps, seed=args.seed, host=host)
        print(f"fidelity {setting.family}/{setting.label}: {len(mode.group_sizes)} group sizes x {n_groups} groups "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    curves: dict[str, list[LearningCurves]] = {}
    if cfg.updates > 0:
        for fam in families:
            task = learning_task(fam)
            mdp = task.mdp() if task is not None else load_mdp(fam)
            curves[fam] = [learn(mdp, m, cfg, seed=args.seed, host=host) for m in methods]
            print(f"learning {fam}: {len(methods)} methods x {cfg.seeds} seeds x {cfg.updates} updates "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    paths = write_report(out, rows, curves, cfg, command=line, elapsed=time.perf_counter() - t0)
    print(f"wrote {', '.join(str(p) for p in paths)} ({time.perf_counter() - t0:.0f} s)")
    return 0

