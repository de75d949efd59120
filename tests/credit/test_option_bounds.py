"""Declared option bounds: every built-in default lies inside them, values outside give one line naming the bound,
and a huge crbc depth or hgpo alpha is refused before any work (issue 17)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentbench_crbc import OptionError, hookimpl
from agentbench_crbc.credit import assign
from agentbench_crbc.host import Bound, Host, get_host, get_plugin_manager

from .toy import toy


def _registered():
    host = get_host()
    return [*host.credit, *host.gates]


@pytest.mark.parametrize("entry", _registered(), ids=lambda e: e.name)
def test_every_builtin_default_is_inside_its_bounds(entry):
    assert set(entry.bounds) <= set(entry.options)
    for key, bound in entry.bounds.items():
        assert bound.allows(entry.options[key]), (key, entry.options[key], str(bound))
    assert entry.check_options(dict(entry.options)) == {k: v for k, v in entry.options.items()}


@pytest.mark.parametrize("method, options, bound", [
    ("crbc", {"depth": 1e9}, "depth=1000000000.0 must be an integer in [0, 1000], or one of null"),
    ("crbc", {"depth": 2.5}, "must be an integer in [0, 1000]"),
    ("crbc", {"beta": 2.0}, "beta=2.0 must be a finite number in (0, 1]"),
    ("crbc", {"w_step": math.inf}, "w_step=inf must be a finite number"),
    ("crbc", {"norm": "l2"}, "norm='l2' must be one of 'std', 'none'"),
    ("hgpo", {"alpha": 1000.0}, "alpha=1000.0 must be a finite number in [0, 20]"),
    ("hgpo", {"history": 10**9}, "history=1000000000 must be an integer in [0, 1000]"),
    ("gigpo", {"gamma": -0.1}, "gamma=-0.1 must be a finite number in [0, 1]"),
    ("gigpo", {"mode": "max"}, "mode='max' must be one of 'mean_std_norm', 'mean_norm'"),
    ("progpo", {"prior": 0.0}, "prior=0.0 must be a finite number > 0"),
    ("gated_bepo", {"min_successors": -1}, "min_successors=-1 must be an integer >= 0"),
])
def test_values_outside_the_bounds_are_one_line_errors_naming_the_bound(method, options, bound):
    with pytest.raises(OptionError) as info:
        assign(method, toy(), **options)
    msg = str(info.value)
    assert msg.startswith(f"{method}: option ") and bound in msg and "\n" not in msg


def test_depth_inf_spellings_and_the_deepest_depth_still_work():
    for depth in (None, "inf", "INF", "full", math.inf, 1000, 3.0):
        adv = assign("crbc", toy(), depth=depth)
        assert all(np.isfinite(a).all() for a in adv)


def test_the_gate_checks_its_bounds():
    gate = get_host().gate("selective_rollout")
    assert gate.check_options({"K": 5}) == {"K": 5}
    with pytest.raises(OptionError, match=r"end_fraction=1.5 must be a finite number in \[0, 1\]"):
        gate.check_options({"end_fraction": 1.5})


@given(lo=st.floats(-10, 10), width=st.floats(0.001, 10), x=st.floats(allow_nan=True, allow_infinity=True))
def test_an_interval_allows_exactly_its_finite_members(lo, width, x):
    b = Bound(lo, lo + width, lo_open=True)
    assert b.allows(x) == (math.isfinite(x) and lo < x <= lo + width)
    assert not b.allows(True) and not b.allows("1")


class _BadBounds:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add("badbounds", lambda group, *, k=0.5: [np.zeros(len(t.steps)) for t in group.trajectories],
                     bounds={"kk": Bound(0, 1)})


def test_bounds_naming_no_option_break_only_that_plugin():
    pm = get_plugin_manager()
    pm.register(_BadBounds(), name="badbounds-plugin")
    host = Host(pm)
    assert "badbounds" not in host.credit and "crbc" in host.credit
    (broken,) = [b for b in host.broken if b.entry_point == "badbounds-plugin"]
    assert "bounds of credit method 'badbounds'" in broken.error and "'kk'" in broken.error
