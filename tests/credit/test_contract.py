"""Every installed credit method keeps the contract's promises (section 5), via check_credit_assigner."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc.host import get_host
from agentbench_crbc.testing import check_credit_assigner

METHODS = get_host().credit.names()


@pytest.mark.parametrize("method", METHODS)
def test_installed_method_keeps_the_contract(method: str) -> None:
    check_credit_assigner(method)


@pytest.mark.parametrize("options", [{"depth": 0}, {"depth": 3}, {"beta": 1.0}, {"traj_advantage": "rloo"},
                                     {"cross_steps": True}, {"norm": "none", "sigma_min": 1.0}])
def test_crbc_variants_keep_the_contract(options: dict) -> None:
    check_credit_assigner("crbc", options=options)


def test_checker_catches_a_broken_method() -> None:
    def leaky(group, *, scale: float = 1.0):  # depends on trajectory order: breaks permutation equivariance
        return [np.full(len(t.steps), float(i) * scale) for i, t in enumerate(group.trajectories)]

    with pytest.raises(AssertionError, match="reordering"):
        check_credit_assigner(leaky)

    def nan_on_lone(group):
        return [np.full(len(t.steps), np.nan if len(group.trajectories) == 1 else 0.0) for t in group.trajectories]

    with pytest.raises(AssertionError, match="non-finite"):
        check_credit_assigner(nan_on_lone)


def test_pytest_plugin_fixture(make_group) -> None:  # provided by the pytest11 entry point
    recs = make_group(n_traj=3, n_steps=2)
    assert len(recs) == 3 and all(len(r["steps"]) == 2 for r in recs)
    assert make_group is not None and recs == make_group(n_traj=3, n_steps=2)
