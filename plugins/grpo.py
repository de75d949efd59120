"""GRPO: trajectory-level group-relative advantage (Shao et al. 2024, arXiv 2402.03300; CRBC paper Eq. 3)."""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.stats import episode_advantage
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["grpo"]


def grpo(batch: StepBatch, *, norm: str = "std", cross_steps: bool = False) -> np.ndarray:
    """GRPO: A_i = (R_i - mean_j R_j) / (std_j R_j + 1e-6) within each group, broadcast to every step.

    :param norm: ``"std"`` divides by the unbiased std (ddof=1); ``"none"`` keeps the numerator (Dr. GRPO).
    :param cross_steps: take mean and std over step rows, as verl-agent's multi-turn GRPO does.
    :returns: one float per step of the batch; a group of one trajectory gets 0.
    """
    return episode_advantage(batch, norm=norm, cross_steps=cross_steps)


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("grpo", grpo, bounds={"norm": Bound(choices=("std", "none"))}, label="GRPO",
                         trajectory_level=True)
