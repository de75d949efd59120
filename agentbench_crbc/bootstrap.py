"""The package's one bootstrap: percentile intervals, the stratified (paired) bootstrap, two-stage cluster means.

Bootstrap intervals are percentile intervals of seeded resamples (``numpy.random.default_rng(seed)``), each layout
drawing its indices in one fixed order so a seed gives the same interval on every run. Used by the learning
benchmarks' statistics (:mod:`agentbench_crbc.bench.stats`) and the leaderboard's aggregates; numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["Draws", "percentile_interval", "stratified_bootstrap_ci", "two_stage_means"]

Draws = np.ndarray


def percentile_interval(draws: Draws | Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` percentile interval of bootstrap replicates (linear interpolation)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = 100.0 * (1.0 - confidence) / 2.0
    lo, hi = np.percentile(np.asarray(draws, dtype=np.float64), [tail, 100.0 - tail])
    return float(lo), float(hi)


def stratified_bootstrap_ci(strata: Sequence[np.ndarray | Sequence[float]] | np.ndarray, *,
                            statistic: Callable[..., np.ndarray | float], reps: int = 10_000,
                            confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over the pooled runs of all strata, resampling runs within each stratum.

    Each replicate draws, for every stratum in turn, as many runs as it has, with replacement
    (``rng.integers(0, size, (reps, size))``), and applies ``statistic(samples, axis=1)`` to the pool.

    :param strata: one array of per-run values per stratum (sizes may differ), or a ``(runs, strata)`` matrix.
    """
    if isinstance(strata, np.ndarray) and strata.ndim == 2:
        columns = [strata[:, j] for j in range(strata.shape[1])]
    else:
        columns = [np.asarray(t, dtype=np.float64).ravel() for t in strata]
    columns = [c for c in columns if c.size]
    if not columns:
        raise ValueError("stratified_bootstrap_ci of no values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    samples = np.concatenate([c[rng.integers(0, c.size, size=(reps, c.size))] for c in columns], axis=1)
    return percentile_interval(np.asarray(statistic(samples, axis=1), dtype=np.float64), confidence)


def two_stage_means(clusters: Sequence[np.ndarray | Sequence[float]] | np.ndarray, *, reps: int,
                    rng: np.random.Generator, batched: bool = True) -> Draws:
    """``reps`` replicates of the mean of cluster means: clusters with replacement, then items with replacement
    within each picked cluster.

    ``batched``: all cluster picks ``(reps, n)`` first, then all item picks ``(reps, n, m)`` (clusters of equal
    size ``m``). Otherwise per replicate, in turn: the cluster picks, then each picked cluster's item picks. The
    layouts draw the same distribution from different streams: a caller keeps its layout to keep its numbers.
    """
    if batched:
        d = np.asarray(clusters, dtype=np.float64)
        n_s, n_l = d.shape
        pick_s = rng.integers(0, n_s, size=(reps, n_s))
        pick_l = rng.integers(0, n_l, size=(reps, n_s, n_l))
        return d[pick_s[:, :, None], pick_l].mean(axis=(1, 2))
    per = [np.asarray(c, dtype=np.float64) for c in clusters]
    out = np.empty(reps)
    for k in range(reps):
        pick = rng.integers(0, len(per), len(per))
        out[k] = np.mean([per[i][rng.integers(0, len(per[i]), len(per[i]))].mean() for i in pick])
    return out
