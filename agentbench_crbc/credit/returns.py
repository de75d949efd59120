"""Discounted step returns within each rollout (GiGPO Eq. 5), shared by the methods that normalise returns."""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from ..errors import OptionError
from .batch import StepBatch

__all__ = ["discounted_returns"]


def discounted_returns(batch: StepBatch, gamma: float) -> np.ndarray:
    """Eq. 5: R_{i,t} = sum_{k >= t} gamma^(k-t) r_{i,k}, where the outcome R_i is the last step's reward on top of
    any intermediate step reward (sparse reward gives gamma^(T_i - t) R_i)."""
    if not 0.0 <= gamma <= 1.0:
        raise OptionError(f"option gamma={gamma!r} must lie in [0, 1]")
    T = batch.traj_len[batch.step_traj]
    if not batch.step_reward.any():
        return np.power(gamma, (T - batch.step_t).astype(np.float64)) * batch.traj_outcome[batch.step_traj]
    r = batch.step_reward.copy()
    r[batch.step_last] += batch.traj_outcome
    out = np.empty_like(r)
    for s, n in zip(batch.traj_start.tolist(), batch.traj_len.tolist(), strict=True):
        out[s:s + n] = lfilter([1.0], [1.0, -gamma], r[s:s + n][::-1])[::-1]
    return out
