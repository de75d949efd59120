"""Test helpers for plugin authors, registered as a pytest plugin (pytest11): fixtures and the credit test kit.

Plugin authors get the fixtures automatically once agentbench-crbc is installed::

    def test_contract(make_group):
        check_credit_assigner(myalgo)                         # every promise, on generated and degenerate groups
        check_credit_assigner(myalgo, extra=[make_group(n_traj=4, n_steps=3, shared_anchors=True)])

The credit kit itself is :mod:`agentbench_crbc.credit.testing`; this module re-exports it.
"""

from __future__ import annotations

from collections.abc import Callable

from .credit.testing import Records, check_credit_assigner, degenerate_groups, make_group, random_groups
from .envcheck import check_env_family

__all__ = ["check_credit_assigner", "check_env_family", "degenerate_groups", "make_group", "random_groups"]


# -- pytest plugin (registered through the pytest11 entry point) -----------------------------------------------
try:  # pragma: no cover - pytest is present whenever this is used as a plugin
    import pytest

    @pytest.fixture(name="make_group")
    def _make_group_fixture() -> Callable[..., Records]:
        """Build credit-contract records of one group: ``make_group(n_traj=4, n_steps=3, shared_anchors=True)``."""
        return make_group

    @pytest.fixture(name="credit_checker")
    def _credit_checker_fixture() -> Callable[..., None]:
        """``check_credit_assigner`` as a fixture."""
        return check_credit_assigner
except ImportError:  # pragma: no cover
    pass
