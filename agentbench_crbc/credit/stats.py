"""Vectorised statistics over keyed rows (group means and stds) shared by the credit assigners."""

from __future__ import annotations

import numpy as np

from ..errors import OptionError
from .batch import StepBatch

__all__ = ["EPS", "episode_advantage", "keyed_mean_std", "normalize_within", "trajectory_advantage"]

#: Added to a standard deviation before dividing (verl-agent's and GRPO's epsilon).
EPS = 1e-6


def keyed_mean_std(values: np.ndarray, keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row mean, unbiased std (ddof=1; 0 for a key seen once) and count of the row's key.

    Deviations are taken from the first value of each key, so a key whose values are all equal gets a mean equal
    to that value and a std of exactly zero (no rounding residue).
    """
    values = np.asarray(values, dtype=np.float64)
    count = np.bincount(keys, minlength=n_keys).astype(np.float64)
    ref = np.zeros(n_keys)
    ref[keys[::-1]] = values[::-1]  # first occurrence wins
    shifted = values - ref[keys]
    mean_shift = np.bincount(keys, weights=shifted, minlength=n_keys) / np.maximum(count, 1.0)
    dev = shifted - mean_shift[keys]
    var = np.bincount(keys, weights=dev * dev, minlength=n_keys) / np.maximum(count - 1.0, 1.0)
    c = count[keys]
    return ref[keys] + mean_shift[keys], np.sqrt(var)[keys], c


def normalize_within(values: np.ndarray, keys: np.ndarray, n_keys: int, *, std: bool = True,
                     singleton: str = "zero") -> np.ndarray:
    """``(v - mean) / (std + EPS)`` (or ``v - mean`` when ``std`` is false) within rows of equal key.

    :param singleton: what a key seen once gets: ``"zero"`` (0) or ``"raw"`` (the value itself, verl-agent's
        mean 0 / std 1 convention for a lone sample).
    """
    values = np.asarray(values, dtype=np.float64)
    mean, sd, count = keyed_mean_std(values, keys, n_keys)
    dev = values - mean
    out = dev / (sd + EPS) if std else dev
    lone = count < 2
    if lone.any():
        out[lone] = 0.0 if singleton == "zero" else values[lone]
    out[dev == 0.0] = 0.0
    return out


def _check_norm(norm: str) -> bool:
    if norm not in ("std", "none"):
        raise OptionError(f"option norm={norm!r} must be 'std' or 'none'")
    return norm == "std"


def trajectory_advantage(batch: StepBatch, *, norm: str = "std", kind: str = "grpo") -> np.ndarray:
    """Per-trajectory outcome advantage within each group (CRBC Eq. 3 for ``grpo``; leave-one-out for ``rloo``).

    A group of one trajectory gets 0.
    """
    R = batch.traj_outcome
    if kind == "grpo":
        return normalize_within(R, batch.traj_group, batch.n_groups, std=_check_norm(norm))
    if kind == "rloo":
        mean, _, count = keyed_mean_std(R, batch.traj_group, batch.n_groups)
        out = (R - mean) * count / np.maximum(count - 1.0, 1.0)
        out[count < 2] = 0.0
        out[mean == R] = 0.0
        return out
    raise OptionError(f"trajectory advantage {kind!r} must be 'grpo' or 'rloo'")


def episode_advantage(batch: StepBatch, *, norm: str = "std", cross_steps: bool = False,
                      kind: str = "grpo") -> np.ndarray:
    """Per-step episode advantage: the trajectory advantage broadcast over its steps, or with ``cross_steps``
    verl-agent's statistics over step rows (longer trajectories weigh more; a lone row keeps its raw score)."""
    if cross_steps:
        if kind != "grpo":
            raise OptionError("cross_steps=true applies to the grpo episode advantage only")
        R = batch.traj_outcome[batch.step_traj]
        return normalize_within(R, batch.step_group, batch.n_groups, std=_check_norm(norm), singleton="raw")
    return trajectory_advantage(batch, norm=norm, kind=kind)[batch.step_traj]
