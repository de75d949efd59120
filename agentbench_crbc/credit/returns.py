"""Discounted step returns within each rollout (GiGPO Eq. 5), shared by the methods that normalise returns."""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from ..errors import OptionError
from .batch import StepBatch

__all__ = ["discounted_returns"]


def discounted_returns(batch: StepBatch, gamma: float) -> np.ndarray:
    """Eq. 5: R_{i,t} = sum_{k >= t} gamma^(k-t) r_{i,k} over the episode's step rewards r_{i,k}.

    The trajectory's ``reward`` is the episode's return R_i (the rollout runner's records: the sum of the step
    rewards, step and invalid-answer penalties included); the part of it no step paid, R_i - sum_k r_{i,k}, is paid
    at the last step. So records with step rewards get the paper's R_{i,t} exactly (nothing is counted twice), a
    record with only an outcome gets gamma^(T_i - t) R_i, and with gamma = 1 the first step's return is R_i."""
    if not 0.0 <= gamma <= 1.0:
        raise OptionError(f"option gamma={gamma!r} must lie in [0, 1]")
    T = batch.traj_len[batch.step_traj]
    if not batch.step_reward.any():
        return np.power(gamma, (T - batch.step_t).astype(np.float64)) * batch.traj_outcome[batch.step_traj]
    r = batch.step_reward.copy()
    paid = np.add.reduceat(r, batch.traj_start)  # every trajectory has at least one step
    rest = batch.traj_outcome - paid
    rest[np.abs(rest) <= 1e-9 * np.maximum(1.0, np.abs(batch.traj_outcome))] = 0.0  # float sums of the same rewards
    r[batch.step_last] += rest
    out = np.empty_like(r)
    for s, n in zip(batch.traj_start.tolist(), batch.traj_len.tolist(), strict=True):
        out[s:s + n] = lfilter([1.0], [1.0, -gamma], r[s:s + n][::-1])[::-1]
    return out
