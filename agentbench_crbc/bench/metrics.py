"""Credit fidelity metrics against the exact advantage, with paired 95% bootstrap intervals over groups.

Every metric is a function of per-group sums, so a bootstrap replicate is a weighted sum (multinomial counts of
the groups) and one weight matrix, shared by all methods on the same groups, gives paired intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm, rankdata

__all__ = ["METRICS", "SIGN_THRESHOLD", "Estimate", "bc_interval", "bootstrap_weights", "fidelity_metrics",
           "policy_gradients"]

#: Reported metrics: Pearson and Spearman correlation with the true advantage (pooled over the steps of all
#: groups), sign agreement where ``|A| > SIGN_THRESHOLD``, normalised error after the best scale
#: ``min_c sum (c x - A)^2 / sum A^2``, the mean per-group cosine of the policy-gradient estimate with the exact
#: gradient, and the cosine of the estimate averaged over all groups (its bias direction).
METRICS = ("pearson", "spearman", "sign", "nmse", "cos", "cos_pooled")
SIGN_THRESHOLD = 0.05


@dataclass(frozen=True, eq=False)
class Estimate:
    """A point estimate, its 95% percentile bootstrap interval and the bootstrap draws (for paired differences)."""

    value: float
    lo: float
    hi: float
    draws: np.ndarray

    def minus(self, other: Estimate) -> Estimate:
        """The paired difference ``self - other`` (same groups, same bootstrap weights)."""
        d = self.draws - other.draws
        lo, hi = bc_interval(self.value - other.value, d)
        return Estimate(self.value - other.value, lo, hi, d)


def bootstrap_weights(n_groups: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``(reps + 1, n_groups)`` group counts: row 0 all ones (the point estimate), then multinomial resamples."""
    w = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups), size=reps).astype(np.float64)
    return np.vstack([np.ones(n_groups), w])


def bc_interval(point: float, draws: np.ndarray) -> tuple[float, float]:
    """95% bias-corrected percentile interval (Efron): shifts the percentiles by how far the draws sit off the
    point estimate, so statistics such as the norm of a mean, whose resamples are biased, keep it inside."""
    ok = draws[np.isfinite(draws)]
    if not len(ok) or not np.isfinite(point):
        return math.nan, math.nan
    frac = (np.sum(ok < point) + 0.5 * np.sum(ok == point)) / len(ok)
    z0 = norm.ppf(np.clip(frac, 1 / (len(ok) + 1), len(ok) / (len(ok) + 1)))
    q = norm.cdf(2 * z0 + norm.ppf([0.025, 0.975])) * 100
    lo, hi = np.percentile(ok, q)
    return float(lo), float(hi)


def _estimate(values: np.ndarray) -> Estimate:
    lo, hi = bc_interval(float(values[0]), values[1:])
    return Estimate(float(values[0]), lo, hi, values[1:])


def _pearson(w: np.ndarray, x: np.ndarray, y: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    stats = np.stack([np.bincount(group, v, minlength=n_groups) for v in
                      (np.ones_like(x), x, y, x * x, y * y, x * y)], axis=1)
    n, sx, sy, sxx, syy, sxy = (w @ stats).T
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = sxy - sx * sy / n
        return cov / np.sqrt((sxx - sx * sx / n) * (syy - sy * sy / n))  # type: ignore[no-any-return]


def policy_gradients(credit: np.ndarray, group: np.ndarray, state: np.ndarray, action: np.ndarray,
                     policy: np.ndarray, n_groups: int, group_size: int) -> np.ndarray:
    """Per-group tabular-softmax policy-gradient estimates ``sum_steps credit x grad log pi / G``: ``(n, S * A)``.

    ``grad_theta[s, :] log pi(a|s) = onehot(a) - pi(s, :)``.
    """
    S, A = policy.shape
    hit = np.bincount((group * S + state) * A + action, credit, minlength=n_groups * S * A).reshape(n_groups, S, A)
    mass = np.bincount(group * S + state, credit, minlength=n_groups * S).reshape(n_groups, S)
    return ((hit - mass[:, :, None] * policy[None]) / group_size).reshape(n_groups, S * A)  # type: ignore[no-any-return]


def fidelity_metrics(credit: np.ndarray, truth: np.ndarray, truth_rank: np.ndarray, group: np.ndarray,
                     grads: np.ndarray, exact: np.ndarray, weights: np.ndarray) -> dict[str, Estimate]:
    """Every :data:`METRICS` entry for one method's credit on one batch of groups.

    :param credit: the method's credit per step; ``truth`` the exact advantage at the same steps and
        ``truth_rank`` its ranks; ``group`` each step's group id ``0..n-1``.
    :param grads: per-group gradient estimates (:func:`policy_gradients`); ``exact`` the exact gradient, flat.
    :param weights: :func:`bootstrap_weights`, shared by the methods compared.
    """
    n_groups = weights.shape[1]
    out = {"pearson": _estimate(_pearson(weights, credit, truth, group, n_groups)),
           "spearman": _estimate(_pearson(weights, rankdata(credit), truth_rank, group, n_groups))}
    big = np.abs(truth) > SIGN_THRESHOLD
    agree = np.bincount(group[big], (np.sign(credit[big]) == np.sign(truth[big])).astype(float), minlength=n_groups)
    total = np.bincount(group[big], minlength=n_groups).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["sign"] = _estimate((weights @ agree) / (weights @ total))
        sums = np.stack([np.bincount(group, v, minlength=n_groups) for v in
                         (credit * credit, truth * truth, credit * truth)], axis=1)
        sxx, syy, sxy = (weights @ sums).T
        out["nmse"] = _estimate(np.where(sxx > 0, 1.0 - sxy * sxy / (sxx * syy), 1.0))
        norms = np.linalg.norm(grads, axis=1)
        e_norm = float(np.linalg.norm(exact))
        dots = grads @ exact
        cos = np.where(norms > 0, dots / (norms * e_norm), 0.0)  # a zero estimate points nowhere: cosine 0
        out["cos"] = _estimate((weights @ cos) / weights.sum(1))
        gram = grads @ grads.T
        pooled_norm = np.sqrt(np.einsum("bi,ij,bj->b", weights, gram, weights, optimize=True))
        out["cos_pooled"] = _estimate(np.where(pooled_norm > 0, (weights @ dots) / (pooled_norm * e_norm), 0.0))
    return out
