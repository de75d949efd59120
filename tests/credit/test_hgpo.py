"""HGPO (reconstruction from the verl-agent recipe): history keys, hand-computed toy credit, options."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc import OptionError, StepBatch
from agentbench_crbc.credit import assign
from agentbench_crbc.plugins.hgpo import history_keys

from .toy import toy

EPS = 1e-6


def test_history_keys_on_toy() -> None:
    b = StepBatch.from_records(toy())
    (m0, k0, _), (m1, k1, _), (m2, _k2, _) = history_keys(b, 2)
    assert m0.all() and np.array_equal(k0, b.step_state)
    # k = 1: (A,B) is shared by t1.2 and t2.2; every other pair of anchors is seen once
    assert m1.tolist() == [False, True, False, True, True, False, True, True, False, True, True]
    assert k1[1] == k1[3] and len(set(k1[m1].tolist())) == 6
    # k = 2 needs two predecessors: only third steps
    assert np.flatnonzero(m2).tolist() == [4, 7, 10]


def test_toy_credit_by_hand() -> None:
    """k = 0 groups: A {1,0,1,0,0}, B {1,0}, C {0,1,0}; k = 1 group (A,B) {1,0}; population std."""
    out = np.concatenate(assign("hgpo", toy(), history=2))
    sd_a, sd_c = np.sqrt(0.24) + EPS, np.sqrt(2 / 9) + EPS  # population std + 1e-6
    a_win, a_lose = 0.6 / sd_a, -0.4 / sd_a
    c_win, c_lose = (2 / 3) / sd_c, -(1 / 3) / sd_c
    w = 2 / (2 + EPS)  # weight (k + 2)^alpha / (sum + 1e-6) with one item
    b = (2 + 3) * (0.5 / (0.5 + EPS)) / (5 + EPS)  # B rows: k = 0 (weight 2) and k = 1 (weight 3) both +-1
    want = [a_win * w, b, a_lose * w, -b, c_lose * w, a_win * w, 0.0, c_win * w, a_lose * w, a_lose * w,
            c_lose * w]
    np.testing.assert_allclose(out, want, atol=1e-9)


def test_base_group_adds_the_episode_item() -> None:
    out = np.concatenate(assign("hgpo", toy(), base_group=True))
    ep = float(assign("grpo", toy())[0][0])  # 0.8660
    # D row (t3.2): only the episode item (weight 1)
    assert out[6] == pytest.approx(ep / (1 + EPS), abs=1e-12)
    a_win = 0.6 / (np.sqrt(0.24) + EPS)
    assert out[0] == pytest.approx((2 * a_win + ep) / (3 + EPS), abs=1e-12)


def test_alpha_zero_is_a_plain_mean_and_mean_norm_centres() -> None:
    out = np.concatenate(assign("hgpo", toy(), alpha=0.0, mode="mean_norm"))
    assert out[1] == pytest.approx((0.5 + 0.5) / (2 + EPS))  # B: k=0 and k=1 both centred to +0.5
    assert out[0] == pytest.approx(0.6 / (1 + EPS))


def test_all_equal_returns_give_zero() -> None:
    recs = toy()
    for r in recs:
        r["success"] = True
    assert not np.concatenate(assign("hgpo", recs, gamma=1.0)).any()


def test_bad_history() -> None:
    with pytest.raises(OptionError, match="history"):
        assign("hgpo", toy(), history=-1)
