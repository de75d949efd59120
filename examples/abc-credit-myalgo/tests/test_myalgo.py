"""The example plugin keeps the credit contract (fixtures come from agentbench-crbc's pytest plugin)."""

from abc_credit_myalgo import myalgo

from agentbench_crbc.testing import check_credit_assigner


def test_contract(make_group) -> None:
    check_credit_assigner(myalgo, extra=[make_group(n_traj=4, n_steps=3, shared_anchors=True)])
