"""GiGPO: group-in-group policy optimisation (Feng et al. 2025, arXiv 2505.10978): episode + anchor-state groups."""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from agentbench_crbc import hookimpl
from agentbench_crbc.batch import StepBatch
from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import Bound, CreditRegister
from agentbench_crbc.stats import episode_advantage, normalize_within

__all__ = ["BOUNDS", "GAMMA", "MODE", "NORM", "OPTIONAL_NORM", "WEIGHT", "discounted_returns", "gigpo",
           "mode_uses_std"]


#: Bounds shared by the GiGPO family (gigpo, graphgpo, g2po, hgpo, progpo).
GAMMA = Bound(0.0, 1.0)
WEIGHT = Bound()
MODE = Bound(choices=("mean_std_norm", "mean_norm"))
NORM = Bound(choices=("std", "none"))
OPTIONAL_NORM = Bound(choices=(None, "std", "none"))
BOUNDS = {"gamma": GAMMA, "step_weight": WEIGHT, "mode": MODE, "norm": OPTIONAL_NORM}


def mode_uses_std(mode: str) -> bool:
    """verl-agent's ``mean_std_norm`` (divide by std) or ``mean_norm`` (do not)."""
    if mode not in ("mean_std_norm", "mean_norm"):
        raise OptionError(f"option mode={mode!r} must be 'mean_std_norm' or 'mean_norm'")
    return mode == "mean_std_norm"


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


def gigpo(batch: StepBatch, *, gamma: float = 0.95, step_weight: float = 1.0, mode: str = "mean_std_norm",
          norm: str | None = None, cross_steps: bool = False) -> np.ndarray:
    """GiGPO: A = A^E + step_weight * A^S (Eq. 8).

    Episode part A^E (Eq. 3) is GRPO's; step part A^S (Eq. 7) normalises the discounted return R_{i,t} (Eq. 5)
    within the anchor-state group of equal anchors in one task (Eq. 6); an anchor seen once gets A^S = 0.

    :param mode: ``mean_std_norm`` or ``mean_norm``, for both parts (verl-agent); ``norm`` overrides the episode part.
    :param cross_steps: episode statistics over step rows (verl-agent's default).
    """
    use_std = mode_uses_std(mode)
    ep = episode_advantage(batch, norm=norm or ("std" if use_std else "none"), cross_steps=cross_steps)
    ret = discounted_returns(batch, gamma)
    step = normalize_within(ret, batch.step_state, batch.n_states, std=use_std)
    return ep + step_weight * step


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("gigpo", gigpo, bounds=BOUNDS)
