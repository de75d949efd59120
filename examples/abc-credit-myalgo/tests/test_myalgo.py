"""The example plugin keeps the credit contract (fixtures come from agentbench-crbc's pytest plugin)."""

import pytest
from abc_credit_myalgo import myalgo

from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import get_host
from agentbench_crbc.testing import check_credit_assigner


def test_contract(make_group) -> None:
    check_credit_assigner(myalgo, extra=[make_group(n_traj=4, n_steps=3, shared_anchors=True)])


def test_alpha_is_a_scale_of_at_least_zero() -> None:
    method = get_host().credit_method("myalgo")
    assert method.check_options({"alpha": 2}) == {"alpha": 2.0}
    with pytest.raises(OptionError, match=r"^myalgo: option alpha=-1.0 must be a finite number >= 0$"):
        method.check_options({"alpha": -1})
