"""RLOO: REINFORCE leave-one-out baseline (Kool et al. 2019; Ahmadian et al. 2024, arXiv 2402.14740)."""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.stats import episode_advantage
from agentbench_crbc.host import CreditRegister

__all__ = ["rloo"]


def rloo(batch: StepBatch) -> np.ndarray:
    """RLOO: A_i = R_i - mean_{j != i} R_j within each group, broadcast to every step (a lone trajectory gets 0)."""
    return episode_advantage(batch, kind="rloo")


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("rloo", rloo, label="RLOO", trajectory_level=True)
