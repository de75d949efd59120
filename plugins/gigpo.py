"""GiGPO: group-in-group policy optimisation (Feng et al. 2025, arXiv 2505.10978): episode + anchor-state groups."""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.options import GIGPO_BOUNDS, mode_uses_std
from agentbench_crbc.credit.returns import discounted_returns
from agentbench_crbc.credit.stats import episode_advantage, normalize_within
from agentbench_crbc.host import CreditRegister

__all__ = ["BOUNDS", "gigpo"]


#: GiGPO's options.
BOUNDS = GIGPO_BOUNDS


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
    # the paper presets' options (verl-agent's GiGPO scripts)
    register.add_batched("gigpo", gigpo, bounds=BOUNDS, label="GiGPO",
                         presets={"paper": {"gamma": 0.95, "step_weight": 1.0}})
