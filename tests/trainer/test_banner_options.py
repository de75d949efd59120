"""The run's banner shows a third-party method's resolved options: its defaults under the given values, whether
it wrote them keyword-only or as ordinary parameters with defaults."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc.credit import StepBatch
from agentbench_crbc.credit.stats import normalize_within
from agentbench_crbc.hookspecs import hookimpl
from agentbench_crbc.host import Host, get_plugin_manager, reset_host
from agentbench_crbc.testing import check_credit_assigner
from agentbench_crbc.trainer.config import check_credit, load_config, resolved_options


def discgrpo(batch: StepBatch, gamma: float = 0.9) -> np.ndarray:
    """Outcome discounted by the steps left, normalised within the group's steps (an ordinary parameter)."""
    left = batch.traj_len[batch.step_traj] - batch.step_t
    return normalize_within(batch.traj_outcome[batch.step_traj] * gamma ** left, batch.step_group, batch.n_groups)


def discgrpo_kw(batch: StepBatch, *, gamma: float = 0.8) -> np.ndarray:
    """The same, its option keyword-only."""
    return discgrpo(batch, gamma)


class _Methods:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add_batched("discgrpo", discgrpo)
        register.add_batched("discgrpo_kw", discgrpo_kw)


@pytest.fixture
def methods():
    pm = get_plugin_manager()
    pm.register(_Methods(), name="disc-methods")
    reset_host(Host(pm))
    yield
    reset_host(None)


@pytest.mark.parametrize("name, default", [("discgrpo", 0.9), ("discgrpo_kw", 0.8)])
def test_the_banner_shows_a_third_party_methods_defaults(methods, name, default):
    method, opts = check_credit(load_config(credit=name))
    assert opts == {} and resolved_options(method, opts) == {"gamma": default}
    method, opts = check_credit(load_config(credit=name, overrides=["credit.options.gamma=0.5"]))
    assert opts == {"gamma": 0.5} and resolved_options(method, opts) == {"gamma": 0.5}
    check_credit_assigner(name, options={"gamma": 0.5})


def test_an_unknown_option_is_still_refused(methods):
    with pytest.raises(Exception, match="unknown option 'gama'; options are: gamma"):
        check_credit(load_config(credit="discgrpo", overrides=["credit.options.gama=0.5"]))
