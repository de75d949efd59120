"""Statistics of the learning benchmarks: the package's one bootstrap, paired comparisons, curve metrics, failed runs.

Bootstrap intervals are percentile intervals of seeded resamples (``numpy.random.default_rng(seed)``), in three
layouts, each drawing its indices in one fixed order so a seed gives the same interval on every run:

* :func:`stratified_bootstrap_ci`: runs resampled within each stratum (task), then one statistic of the pool
  (rliable's ``StratifiedBootstrap``; one stratum of per-seed differences is the paired bootstrap by seed);
* :func:`two_stage_means` with ``batched=True``: clusters (seeds) with replacement, then items (held-out levels)
  with replacement within each picked cluster, every replicate drawn in one array operation (equal cluster sizes);
* the same with ``batched=False``: one replicate after another (clusters of any size), as the grid report draws.

Per run of a learning curve (held-out success at validations ``[[update, success], ...]``): the area under the
curve (:func:`auc`), the updates to reach a threshold (:func:`updates_to_threshold`), the final success, the gain of
RL and whether the run failed (:func:`failed_runs`). Per method: :func:`summarise_methods`. numpy only (scipy is
imported where a t or binomial test needs it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bootstrap import percentile_interval, stratified_bootstrap_ci, two_stage_means

__all__ = ["FAILURE_FRACTION", "THRESHOLD", "TRIM", "Estimate", "MethodStats", "Paired", "PairedLevels",
           "RunStats", "auc", "failed_runs", "failure_cutoff", "mean_interval", "paired_levels", "paired_stats",
           "percentile_interval", "run_stats", "stratified_bootstrap_ci", "summarise_methods", "trimmed_mean",
           "two_stage_means", "updates_to_threshold", "wilson_interval"]

#: A run FAILED when its gain of RL (held-out success after minus before) is below this fraction of the median
#: gain of its cell (every run of one setting: all methods, all seeds).
FAILURE_FRACTION = 1.0 / 3.0
#: The held-out success that :func:`updates_to_threshold` waits for, unless told otherwise.
THRESHOLD = 0.4
#: The share cut from each end by the trimmed mean.
TRIM = 0.2



# -- the bootstrap: agentbench_crbc.bootstrap (below the leaderboard, which uses it too) --


def mean_interval(values: Sequence[float], *, confidence: float = 0.95, reps: int = 10_000,
                  seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of the mean of per-seed values (seeds resampled with replacement)."""
    return stratified_bootstrap_ci([np.asarray(values, dtype=np.float64)], statistic=np.mean, reps=reps,
                                   confidence=confidence, seed=seed)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (stays inside [0, 1], sensible at 0 of n)."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"wilson_interval needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def trimmed_mean(values: Sequence[float], cut: float = TRIM) -> float:
    """The mean after dropping ``int(cut * n)`` values from each end (``scipy.stats.trim_mean``'s rule)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    k = int(cut * x.size)
    return float(x[k:x.size - k].mean())


# -- paired comparisons ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Paired:
    """``a - b`` paired by seed: mean, t interval, paired t-test and a percentile bootstrap interval."""

    n: int
    diffs: tuple[float, ...]
    mean: float
    sd: float | None
    t_ci: tuple[float, float] | None
    boot_ci: tuple[float, float]
    t: float | None
    p: float | None
    wins: int
    """Seeds where ``a`` is higher."""
    losses: int

    @property
    def significant(self) -> bool:
        """Two-sided paired t-test at the 5% level (needs 2+ seeds and some spread)."""
        return self.p is not None and self.p < 0.05


def paired_stats(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, reps: int = 10_000,
                 seed: int = 0) -> Paired:
    """Paired comparison of per-seed values ``a[i]`` and ``b[i]`` (same seed, same start).

    The bootstrap resamples seeds with replacement (``reps`` replicates, seeded): with 3 seeds it can only take
    10 distinct values, so it is too narrow; the t interval and the p-value are the ones to read.
    """
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"paired_stats needs two equally long non-empty sequences, got {x.shape} and {y.shape}")
    d = x - y
    n, mean = int(d.size), float(d.mean())
    boot = stratified_bootstrap_ci([d], statistic=np.mean, reps=reps, confidence=confidence, seed=seed)
    sd = float(d.std(ddof=1)) if n > 1 else None
    t = p = t_ci = None
    if sd is not None and sd > 1e-12:  # identical differences (up to rounding): no t-test
        res = stats.ttest_rel(x, y)
        t, p = float(res.statistic), float(res.pvalue)
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
        t_ci = (mean - half, mean + half)
    return Paired(n=n, diffs=tuple(float(v) for v in d), mean=mean, sd=sd, t_ci=t_ci, boot_ci=boot, t=t, p=p,
                  wins=int((d > 0).sum()), losses=int((d < 0).sum()))


@dataclass(frozen=True)
class PairedLevels:
    """``a - b`` paired by (seed, held-out level): both variants played the same levels from the same start."""

    n_seeds: int
    n_levels: int
    mean: float
    boot_ci: tuple[float, float]
    """Two-stage bootstrap: seeds with replacement, then levels with replacement within each seed."""
    a_only: int
    """Pairs that ``a`` solved and ``b`` did not."""
    b_only: int
    p: float
    """Exact McNemar test on the discordant pairs (treats pairs as independent; the interval does not)."""

    @property
    def significant(self) -> bool:
        """The bootstrap interval (which respects the clustering by seed) excludes 0."""
        return not self.boot_ci[0] <= 0.0 <= self.boot_ci[1]


def paired_levels(a: Mapping[Any, Mapping[str, float]], b: Mapping[Any, Mapping[str, float]], *,
                  confidence: float = 0.95, reps: int = 10_000, seed: int = 0) -> PairedLevels:
    """Compare per-level outcomes ``a[seed][level]`` and ``b[seed][level]`` on the seeds and levels both have.

    Resolves smaller gaps than :func:`paired_stats` on per-seed means: with 3 seeds x 64 levels the paired outcomes
    cancel level difficulty, which dominates the per-seed spread.
    """
    from scipy import stats

    seeds = sorted(set(a) & set(b), key=str)
    levels = sorted(set.intersection(*(set(a[s]) & set(b[s]) for s in seeds)), key=str) if seeds else []
    if not levels:
        raise ValueError("paired_levels needs at least one seed and level that both sides played")
    x = np.array([[a[s][lv] for lv in levels] for s in seeds], dtype=float)
    y = np.array([[b[s][lv] for lv in levels] for s in seeds], dtype=float)
    d = x - y
    boot = two_stage_means(d, reps=reps, rng=np.random.default_rng(seed))
    lo, hi = percentile_interval(boot, confidence)
    a_only, b_only = int((d > 0).sum()), int((d < 0).sum())
    p = float(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue) if a_only + b_only else 1.0
    return PairedLevels(n_seeds=d.shape[0], n_levels=d.shape[1], mean=float(d.mean()), boot_ci=(lo, hi),
                        a_only=a_only, b_only=b_only, p=p)


# -- learning curves and failed runs ----------------------------------------------------------------------------------
def _points(curve: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted((float(u), float(s)) for u, s in curve)
    if not pts:
        raise ValueError("a learning curve needs at least one validation [update, success]")
    u, s = np.array(pts).T
    return u, s


def auc(curve: Sequence[Sequence[float]]) -> float:
    """Area under the held-out success curve by the trapezoid rule over updates, divided by the span of updates:
    the curve's mean success over the run (a curve of one point: that point).

    >>> auc([[0, 0.1], [10, 0.3], [20, 0.3]])
    0.25
    """
    u, s = _points(curve)
    if u[-1] == u[0]:
        return float(s.mean())
    return float(np.sum((u[1:] - u[:-1]) * (s[1:] + s[:-1]) / 2) / (u[-1] - u[0]))


def updates_to_threshold(curve: Sequence[Sequence[float]], threshold: float = THRESHOLD) -> int | None:
    """The update of the first validation at or above ``threshold``; ``None`` when none reaches it (censored)."""
    u, s = _points(curve)
    hit = np.flatnonzero(s >= threshold)
    return int(u[hit[0]]) if hit.size else None


def failure_cutoff(gains: Sequence[float], fraction: float = FAILURE_FRACTION) -> float:
    """The gain below which a run of the cell failed: ``fraction`` x the median gain of the cell's runs; when that
    median is not above 0 nothing learned, and the cutoff is ``+inf`` (every run failed)."""
    med = float(np.median(np.asarray(gains, dtype=np.float64)))
    return fraction * med if med > 0 else math.inf


def failed_runs(gains: Sequence[float], fraction: float = FAILURE_FRACTION) -> list[bool]:
    """Per run of one cell: whether it FAILED, its gain below :func:`failure_cutoff` of the cell."""
    cut = failure_cutoff(gains, fraction)
    return [float(g) < cut for g in gains]


@dataclass(frozen=True)
class RunStats:
    """One run's numbers: held-out success before and after RL, its curve metrics (``None`` without a curve of
    more than the validations before and after), and whether it failed (set by :func:`summarise_methods`)."""

    seed: int
    before: float
    final: float
    auc: float | None
    to_threshold: int | None
    """Update of the first validation at or above the threshold; ``None``: censored (or no curve)."""
    budget: int | None
    """The last validated update (what a censored run enters the mean of updates-to-threshold as)."""
    failed: bool = False

    @property
    def gain(self) -> float:
        return self.final - self.before


def _mean(levels: Mapping[str, float]) -> float:
    return float(np.mean(list(levels.values())))


def run_stats(row: Mapping[str, Any], threshold: float = THRESHOLD) -> RunStats:
    """A result line's run (``seed``, per-level ``before`` / ``after``, optional ``curve``) as :class:`RunStats`."""
    before, final = _mean(row["before"]), _mean(row["after"])
    curve = row.get("curve") or []
    if len(curve) > 2:  # validations between before and after: a curve to integrate
        u, _ = _points(curve)
        return RunStats(seed=int(row["seed"]), before=before, final=final, auc=auc(curve),
                        to_threshold=updates_to_threshold(curve, threshold), budget=int(u[-1]))
    return RunStats(seed=int(row["seed"]), before=before, final=final, auc=None, to_threshold=None, budget=None)


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its 95% bootstrap interval, and, against the reference method, the paired
    difference (``None`` for the reference itself or without common seeds)."""

    mean: float
    ci: tuple[float, float]
    vs: Paired | None = None


@dataclass(frozen=True)
class MethodStats:
    """One method over its seeds."""

    method: str
    seeds: tuple[int, ...]
    runs: tuple[RunStats, ...]
    final: Estimate
    gain: Estimate
    auc: Estimate | None
    """``None`` unless every run has a curve."""
    to_threshold: Estimate | None
    """Mean updates to the threshold, censored runs entered at their budget (a lower bound when any is)."""
    censored: int
    failures: int
    failure_ci: tuple[float, float]
    """Wilson 95% interval of the failure rate."""
    failure_vs: Paired | None
    """The paired difference of failure indicators (0/1 per seed) to the reference."""
    final_median: float
    final_trimmed: float
    """20% trimmed mean of the final success over seeds."""

    @property
    def failure_rate(self) -> float:
        return self.failures / len(self.runs)


def _estimate(vals: Mapping[int, float], ref: Mapping[int, float] | None) -> Estimate:
    x = list(vals.values())
    vs = None
    if ref is not None:
        both = sorted(set(vals) & set(ref))
        vs = paired_stats([vals[s] for s in both], [ref[s] for s in both]) if both else None
    return Estimate(mean=float(np.mean(x)), ci=mean_interval(x), vs=vs)


def summarise_methods(runs: Mapping[str, Sequence[RunStats]], reference: str | None = None,
                      fraction: float = FAILURE_FRACTION) -> dict[str, MethodStats]:
    """Per method: means over seeds with bootstrap intervals, paired by seed against ``reference`` (seeds share
    the random init and the evaluation before RL); runs failed by :func:`failed_runs` over the whole cell (every
    run given here); failure rate with a Wilson interval; median and 20% trimmed mean of the final success."""
    flat = [r for rs in runs.values() for r in rs]
    cut = failure_cutoff([r.gain for r in flat], fraction) if flat else math.inf
    marked = {m: tuple(dataclasses.replace(r, failed=r.gain < cut) for r in rs) for m, rs in runs.items()}

    def per_seed(rs: Sequence[RunStats], key: Callable[[RunStats], float | None]) -> dict[int, float] | None:
        vals = {r.seed: key(r) for r in rs}
        return None if any(v is None for v in vals.values()) else {s: float(v) for s, v in vals.items()}

    def threshold(r: RunStats) -> float | None:
        return None if r.budget is None else float(r.to_threshold if r.to_threshold is not None else r.budget)

    keys: dict[str, Callable[[RunStats], float | None]] = {
        "final": lambda r: r.final, "gain": lambda r: r.gain, "auc": lambda r: r.auc, "to_threshold": threshold,
        "failed": lambda r: float(r.failed)}
    ref = {k: per_seed(marked[reference], f) for k, f in keys.items()} if reference in marked else {}
    out = {}
    for m, rs in marked.items():
        got = {k: per_seed(rs, f) for k, f in keys.items()}
        est = {k: None if v is None else _estimate(v, None if m == reference else ref.get(k)) for k, v in got.items()}
        finals = [r.final for r in rs]
        k = sum(r.failed for r in rs)
        assert est["final"] is not None and est["gain"] is not None and est["failed"] is not None
        out[m] = MethodStats(method=m, seeds=tuple(r.seed for r in rs), runs=rs, final=est["final"],
                             gain=est["gain"], auc=est["auc"], to_threshold=est["to_threshold"],
                             censored=sum(r.budget is not None and r.to_threshold is None for r in rs), failures=k,
                             failure_ci=wilson_interval(k, len(rs)), failure_vs=est["failed"].vs,
                             final_median=float(np.median(finals)), final_trimmed=trimmed_mean(finals))
    return out
