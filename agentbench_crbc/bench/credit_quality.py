"""``abc bench credit``: how well each credit method ranks a family's good moves on the trainer's own rollouts.

G copies of N training tasks are rolled out with a model (the random init, or a run's ``model/``) exactly as
``abc train`` rolls them out (its prompt builder, engine, sampling and constrained answers), every installed credit
method credits the same groups with the options ``abc train --credit NAME`` would give it, and each step is labelled
by the family's :attr:`~agentbench_crbc.family.EnvFamily.optimal_actions` hook (does the move begin an optimal plan;
states where all or none of the admissible moves are optimal carry no label). The score is the within-group AUC:
P(credit of an optimal step > credit of a non-optimal step of the same group), ties counting one half, pooled over
all such pairs; intervals come from a bootstrap over groups, paired across methods (every replicate draws the same
groups for all of them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import rankdata

from ..argtypes import bounded_int
from ..errors import ConfigError
from ..family import ADMISSIBLE_ACTIONS
from ..io import atomic_open, json_text

__all__ = ["CreditQuality", "Variant", "add_arguments", "group_auc_counts", "label_groups", "parse_variant",
           "run", "score_variants"]


@dataclass(frozen=True)
class Variant:
    """One column of the table: a credit method with option overrides on top of its ``abc train`` options."""

    label: str
    method: str
    options: Mapping[str, Any]


@dataclass(frozen=True)
class CreditQuality:
    """One variant's within-group AUC, its 95% bootstrap interval, and its difference to the reference's."""

    label: str
    auc: float
    ci95: tuple[float, float]
    minus_reference: float | None
    minus_reference_ci95: tuple[float, float] | None


#: CRBC with its step part weighed like the trajectory part, and its step part alone (the issue's ablation columns)
DEFAULT_EXTRA = ("crbc w_step 1=crbc:w_step=1", "crbc step part only=crbc:w_traj=0")


def parse_variant(text: str) -> tuple[str, str, dict[str, Any]]:
    """``LABEL=METHOD[:KEY=VALUE,...]`` -> (label, method, options); values are parsed as TOML scalars."""
    import tomllib

    label, eq, rest = text.partition("=")
    if not eq or not label.strip() or not rest.strip():
        raise ConfigError(f"--variant {text!r}: write LABEL=METHOD[:KEY=VALUE,...], e.g. 'crbc w1=crbc:w_step=1'")
    method, _, opts = rest.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, (o.strip() for o in opts.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"--variant {text!r}: option {item!r} is not KEY=VALUE")
        try:
            options[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            options[key.strip()] = value.strip()
    return label.strip(), method.strip(), options


def label_groups(groups: Sequence[Any], make_env: Callable[[str], Any],
                 optimal: Callable[[Any], frozenset[str] | None]) -> list[list[list[bool | None]]]:
    """Per group, trajectory and step: whether the step's action begins an optimal plan (``None``: no label).

    Each trajectory is replayed from its group's seed with its recorded actions; ``optimal(env)`` is asked before
    every step. A state where the hook answers ``None``, or where all or none of the admissible actions are optimal,
    gets no label. Replays of equal action prefixes are answered once.
    """
    out: list[list[list[bool | None]]] = []
    for g in groups:
        env = make_env(g.env_id)
        cache: dict[tuple[str, ...], tuple[frozenset[str] | None, frozenset[str]]] = {}
        labels_g = []
        try:
            for traj in g.trajectories:
                _, info = env.reset(seed=int(g.seed))
                labels_t: list[bool | None] = []
                prefix: tuple[str, ...] = ()
                for step in traj.steps:
                    if prefix not in cache:
                        cache[prefix] = (optimal(env), frozenset(info.get(ADMISSIBLE_ACTIONS) or ()))
                    best, allowed = cache[prefix]
                    if best is None or not best or (allowed and allowed <= best):
                        labels_t.append(None)
                    else:
                        labels_t.append(step.action in best)
                    _, _, term, trunc, info = env.step(step.action)
                    prefix = (*prefix, str(step.action))
                    if term or trunc:
                        break
                labels_t += [None] * (len(traj.steps) - len(labels_t))
                labels_g.append(labels_t)
        finally:
            env.close()
        out.append(labels_g)
    return out


def group_auc_counts(credit: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(wins, pairs) of one group: over (optimal, non-optimal) step pairs, how often the optimal one has the larger
    credit (ties count 1/2), by ranks (Mann-Whitney U)."""
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((labels == 0).sum())
    if not n_pos or not n_neg:
        return 0.0, 0.0
    ranks = rankdata(credit)
    return float(ranks[pos].sum() - n_pos * (n_pos + 1) / 2), float(n_pos * n_neg)


def score_variants(credits: Mapping[str, np.ndarray], labels: np.ndarray, group: np.ndarray, n_groups: int, *,
                   reference: str | None, reps: int = 2000, seed: int = 0) -> list[CreditQuality]:
    """Pooled within-group AUC of each variant's credit (one float per step), with paired bootstrap intervals.

    :param labels: per step 1 (optimal), 0 (not) or -1 (no label); ``group``: each step's group index.
    """
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups), size=reps).astype(np.float64)
    counts: dict[str, np.ndarray] = {}
    for name, c in credits.items():
        wp = np.zeros((n_groups, 2))
        for k in range(n_groups):
            m = (group == k) & (labels >= 0)
            wp[k] = group_auc_counts(np.asarray(c)[m], labels[m])
        counts[name] = wp
    pairs = next(iter(counts.values()))[:, 1]
    if pairs.sum() == 0:
        raise ConfigError("no group has both an optimal and a non-optimal labelled step: roll out more groups")
    boot_pairs = weights @ pairs
    boot = {n: (weights @ wp[:, 0]) / np.maximum(boot_pairs, 1e-12) for n, wp in counts.items()}
    out = []
    for name, wp in counts.items():
        auc = float(wp[:, 0].sum() / wp[:, 1].sum())
        lo, hi = np.quantile(boot[name], [0.025, 0.975])
        d = d_ci = None
        if reference is not None and reference in counts and name != reference:
            ref = counts[reference]
            d = auc - float(ref[:, 0].sum() / ref[:, 1].sum())
            dl, dh = np.quantile(boot[name] - boot[reference], [0.025, 0.975])
            d_ci = (float(dl), float(dh))
        out.append(CreditQuality(name, auc, (float(lo), float(hi)), d, d_ci))
    return out


#: Bounds of the flags (checked before any model or env is built): tasks or rollouts per task, bootstrap replicates,
#: and the bootstrap's weight matrix (--groups x --reps float64s: 10**8 are 0.8 GB).
MAX_GROUPS, MAX_REPS, MAX_BOOTSTRAP_CELLS = 4096, 100_000, 10**8


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's own flags (the config flags of ``abc train`` come from the CLI layer)."""
    p.add_argument("--groups", type=bounded_int(1, MAX_GROUPS), default=64, help="training tasks to roll out "
                   "(default 64)")
    p.add_argument("--group-size", type=bounded_int(2, MAX_GROUPS), default=None,
                   help="rollouts per task (default: the config's G)")
    p.add_argument("--seed", type=int, default=0, help="which training tasks and sampling seed (default 0)")
    p.add_argument("--method", action="append", help="only these credit methods (repeatable; default: all)")
    p.add_argument("--variant", action="append", default=None, metavar="LABEL=METHOD[:KEY=VALUE,...]",
                   help="an extra column: a method with other options (repeatable; default: "
                   f"{'; '.join(DEFAULT_EXTRA)})")
    p.add_argument("--reference", default="grpo", help="differences are taken to this column (default grpo)")
    p.add_argument("--reps", type=bounded_int(1, MAX_REPS), default=2000,
                   help="bootstrap replicates over groups (default 2000)")
    p.add_argument("-o", "--out", help="also write the table's numbers to this JSON file")


def _variants(args: argparse.Namespace, host: Any, config_for: Callable[[str | None], Any]) -> list[Variant]:
    from ..trainer.config import check_credit

    names = list(args.method) if args.method else host.credit.names()
    extra = [parse_variant(v) for v in (args.variant if args.variant is not None else DEFAULT_EXTRA)]
    out = []
    for label, method, over in [(n, n, {}) for n in names] + extra:
        if method not in host.credit:
            if args.method is None and args.variant is None:
                continue  # a default column whose method is not installed
            host.credit_method(method)  # one line listing the installed ones
        _, opts = check_credit(config_for(method))  # the options `abc train --credit METHOD` would run with
        out.append(Variant(label, method, {**opts, **over}))
    return out


def run(args: argparse.Namespace, config_for: Callable[[str | None], Any]) -> int:
    """Roll out, label, credit and score; prints a markdown table (and writes ``--out``).

    :param config_for: the resolved training config with ``--credit`` set to a method (``None``: the config's own).
    """
    import torch

    from ..host import get_host
    from ..rollout.episodes.base import SamplingParams
    from ..rollout.episodes.runner import MAX_ENV_COPIES
    from ..rollout.hosting.workers import EnvRecipe
    from ..trainer.config import family_of
    from ..trainer.eval import training_seeds
    from ..trainer.policy import build_builder, build_policy, build_rollout_engine, compute_dtype
    from ..trainer.rollouts import Rollouts
    from ..trainer.threads import torch_threads
    from ..trainer.update import compute_advantages

    cfg = config_for(None)
    fam = family_of(cfg)
    if fam.optimal_actions is None:
        print(f"abc bench credit: env family {fam.name!r} declares no optimal_actions hook (EnvFamily."
              "optimal_actions), so its moves cannot be labelled; skipped")
        return 0
    g = args.group_size or cfg.rollout.group_size
    if args.groups * g > MAX_ENV_COPIES or args.groups * args.reps > MAX_BOOTSTRAP_CELLS:
        raise ConfigError(f"abc bench credit: --groups {args.groups} x G {g} env copies (at most {MAX_ENV_COPIES}) "
                          f"and --groups x --reps {args.reps} bootstrap weights (at most {MAX_BOOTSTRAP_CELLS:.0e}): "
                          "lower them")
    host = get_host()
    variants = _variants(args, host, config_for)
    optimal = fam.load("optimal_actions")
    threads = torch_threads(cfg.threads)[0]
    torch.set_num_threads(threads)
    torch.manual_seed(cfg.seed)
    model, tok, proc = build_policy(cfg, "cpu")
    builder = build_builder(cfg, tok, proc)
    engine = build_rollout_engine(cfg, model, tok, proc, autocast_dtype=compute_dtype(cfg.model.dtype, "cpu"),
                                  device="cpu", dist=None)
    rng = np.random.default_rng([args.seed, 0, 0])  # as the trainer's first update on rank 0 draws them
    seeds = training_seeds(cfg, rng, args.groups)
    sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                              max_tokens=cfg.rollout.max_response_tokens, seed=int(rng.integers(2**31)))
    with Rollouts(cfg) as rollouts:
        groups = rollouts.collect(engine, builder, seeds, group_size=g, sampling=sampling, prefix="credit-")
    groups = [gr for gr in groups if all(t.steps for t in gr.trajectories) and not gr.gated]
    kwargs = dict(cfg.env.kwargs)
    labels_nested = label_groups(groups, lambda env_id: EnvRecipe(env_id, kwargs).make(), optimal)
    labels = np.array([-1 if x is None else int(x) for lg in labels_nested for lt in lg for x in lt])
    group = np.array([k for k, lg in enumerate(labels_nested) for lt in lg for _ in lt])
    credits = {v.label: compute_advantages(groups, v.method, v.options) for v in variants}
    reference = args.reference if args.reference in credits else None
    rows = score_variants(credits, labels, group, len(groups), reference=reference, reps=args.reps,
                          seed=args.seed)
    success = float(np.mean([t.success for gr in groups for t in gr.trajectories]))
    head = (f"{len(groups)} groups x G = {g} of {cfg.env.id} rolled out by {cfg.model.name} at T = "
            f"{cfg.rollout.temperature:g}{' (constrained answers)' if cfg.rollout.constrain else ''}: success "
            f"{100 * success:.1f}%, {int((labels >= 0).sum())} of {labels.size} steps labelled "
            f"({int((labels == 1).sum())} optimal); model.dtype={cfg.model.dtype}, {threads} torch thread(s)")
    print(head)
    print(f"| credit | within-group AUC (95% CI) | minus {reference or '-'} (95% CI) |")
    print("|---|---|---|")
    for r in rows:
        d = "-" if r.minus_reference is None or r.minus_reference_ci95 is None else \
            f"{r.minus_reference:+.3f} ({r.minus_reference_ci95[0]:+.3f} .. {r.minus_reference_ci95[1]:+.3f})"
        print(f"| {r.label} | {r.auc:.3f} ({r.ci95[0]:.3f} .. {r.ci95[1]:.3f}) | {d} |")
    if args.out:
        data = {"summary": head, "model": cfg.model.name, "groups": len(groups), "group_size": g,
                "seed": args.seed, "success": success, "variants": [v.__dict__ | {"options": dict(v.options)}
                                                                     for v in variants],
                "rows": [r.__dict__ for r in rows]}
        with atomic_open(Path(args.out), "w") as fh:
            fh.write(json_text(data, indent=1, default=str))
        print(f"saved: {args.out}", file=sys.stderr)
    return 0
