"""An example third-party credit method: outcome minus the group median, scaled by ``alpha``."""

from __future__ import annotations

import numpy as np

from agentbench_crbc import Group, hookimpl
from agentbench_crbc.host import Bound

__all__ = ["myalgo"]


def myalgo(group: Group, *, alpha: float = 0.5) -> list[np.ndarray]:
    """A_i = alpha * (R_i - median_j R_j), broadcast over the steps of trajectory i."""
    rewards = np.array([t.outcome for t in group.trajectories])
    base = float(np.median(rewards))
    return [np.full(len(t.steps), alpha * (t.outcome - base)) for t in group.trajectories]


@hookimpl
def abc_register_credit_assigners(register) -> None:
    register.add("myalgo", myalgo, bounds={"alpha": Bound(0)})  # a scale >= 0, checked when a config resolves
