"""GRPO, RLOO and GiGPO against the worked toy numbers of credit-methods.md sections 1-2."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc.credit import assign

from .toy import toy

flat = np.concatenate


def test_grpo_per_trajectory_and_cross_steps() -> None:
    out = assign("grpo", toy())
    np.testing.assert_allclose([o[0] for o in out], [0.8660, -0.8660, 0.8660, -0.8660], atol=1e-4)
    assert all(np.all(o == o[0]) for o in out)
    cross = flat(assign("grpo", toy(), cross_steps=True))
    np.testing.assert_allclose(np.unique(np.round(cross, 4)), [-0.8704, 1.0445])


def test_grpo_norm_none_and_lone_trajectory() -> None:
    out = assign("grpo", toy(10.0), norm="none")
    np.testing.assert_allclose([o[0] for o in out], [5.0, -5.0, 5.0, -5.0])
    lone = assign("grpo", [{"group": "x", "steps": [{"anchor": 1, "action": "a"}], "success": True}])
    assert lone[0].tolist() == [0.0]


def test_equal_rewards_give_exact_zeros() -> None:
    recs = toy(0.1)
    for r in recs:
        r["reward"] = 0.1
    for method in ("grpo", "rloo"):
        assert not flat(assign(method, recs)).any(), method
    # GiGPO: equal discounted returns (gamma = 1) give exactly zero; with gamma < 1 shorter paths still win
    assert not flat(assign("gigpo", recs, gamma=1.0)).any()
    assert flat(assign("gigpo", recs)).any()


def test_rloo_leave_one_out() -> None:
    out = assign("rloo", toy())
    np.testing.assert_allclose([o[0] for o in out], [1 - 1 / 3, 0 - 2 / 3, 1 - 1 / 3, 0 - 2 / 3])


GIGPO_STD = [2.1861, 1.7516, -1.6003, -1.5775, -1.4477, 2.0925, 1.0445, 2.1992, -1.6003, -1.6003, -1.4477]
GIGPO_MEAN = [11.2495, 10.4545, -8.2505, -9.5455, -7.8788, 10.7745, 5.4545, 12.1212, -8.2505, -8.2505, -7.8788]
GIGPO_STEP = [1.1416, 0.7071, -0.7299, -0.7071, -0.5774, 1.0481, 0, 1.1547, -0.7299, -0.7299, -0.5774]


def test_gigpo_toy_table_cross_steps() -> None:
    got = flat(assign("gigpo", toy(10.0), cross_steps=True))
    np.testing.assert_allclose(got, GIGPO_STD, atol=1e-4)
    got = flat(assign("gigpo", toy(10.0), cross_steps=True, mode="mean_norm"))
    np.testing.assert_allclose(got, GIGPO_MEAN, atol=1e-4)


def test_gigpo_default_episode_part() -> None:
    got = flat(assign("gigpo", toy(10.0)))
    episode = np.repeat([0.8660, -0.8660, 0.8660, -0.8660], [2, 3, 3, 3])
    np.testing.assert_allclose(got, episode + np.array(GIGPO_STEP), atol=1e-4)
    # the step part is scale-free under mean_std_norm: R in {0, 1} gives the same numbers
    np.testing.assert_allclose(flat(assign("gigpo", toy())), got, atol=1e-4)


def test_gigpo_intermediate_rewards_are_discounted() -> None:
    recs = [{"group": "g", "steps": [{"anchor": "A", "action": "x", "reward": 1.0}, {"anchor": "B", "action": "y"}],
             "success": True, "reward": 2.0},
            {"group": "g", "steps": [{"anchor": "A", "action": "z"}], "success": False}]
    got = assign("gigpo", recs, gamma=0.5, mode="mean_norm", norm="none", step_weight=1.0)
    # the record's reward 2.0 is the return: step A paid 1.0 of it, the last step (B) the rest 1.0
    # returns at A: 1 + 0.5 * 1 = 1.5 and 0 -> step part +-0.75; episode part +-1
    assert got[0][0] == pytest.approx(1.75) and got[1][0] == pytest.approx(-1.75)
    assert got[0][1] == pytest.approx(1.0)  # B seen once: step part 0


def test_number_anchors_are_json_canonical_and_lists_hash_canonically() -> None:
    """1, 1.0 and true are one Python dict key but three JSON values: they must be three anchors."""
    from agentbench_crbc import StepBatch

    recs = [{"group": "g", "steps": [{"anchor": 1, "action": "x"}, {"anchor": 1.0, "action": "x"},
                                     {"anchor": True, "action": "x"}, {"anchor": "1", "action": "x"}], "success": True},
            {"group": "g", "steps": [{"anchor": [1, 2], "action": "x"}, {"anchor": [1, 2], "action": "y"},
                                     {"anchor": [2, 1], "action": "x"}], "success": False}]
    b = StepBatch.from_records(recs)
    assert b.step_state.tolist() == [0, 1, 2, 3, 4, 4, 5]
    b = StepBatch.from_records(recs[:1])
    assert len(set(b.step_state.tolist())) == 4
