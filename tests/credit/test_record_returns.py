"""What a credit method receives from a Sokoban record, and GiGPO's discounted return (arXiv 2505.10978, Eq. 5:
R_t = sum_{k >= t} gamma^(k-t) r_k over the step rewards) on records with step penalties: hand-computed numbers,
and a real Sokoban episode of the rollout runner (its record's ``reward`` is the return, step rewards included)."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc import StepBatch
from agentbench_crbc.credit.returns import discounted_returns

# A solved 4-step Sokoban episode: -0.1 a step, an invalid answer costs 0.1 more (the runner's invalid_penalty),
# the last push puts the box on its target (+1) and solves the level (+10): -0.1 + 1 + 10 = 10.9.
REWARDS = [-0.1, -0.2, -0.1, 10.9]
RETURN = sum(REWARDS)  # 10.5: the record's "reward", as the rollout runner writes it


def _record(rewards: list[float], ret: float | None) -> dict:
    steps = [{"anchor": f"s{i}", "action": "up", "reward": r, "valid": r != -0.2} for i, r in enumerate(rewards)]
    rec = {"group": "level-7", "steps": steps, "success": True}
    return rec if ret is None else {**rec, "reward": ret}


def test_gigpo_return_of_a_record_with_step_penalties_is_the_papers() -> None:
    """By hand, gamma = 0.95: R_4 = 10.9; R_3 = -0.1 + 0.95 * 10.9 = 10.255; R_2 = -0.2 + 0.95 * 10.255 = 9.54225;
    R_1 = -0.1 + 0.95 * 9.54225 = 8.9651375. (Counting the return 10.5 again on the last step, as before, gave
    R_4 = 21.4.)"""
    batch = StepBatch.from_records([_record(REWARDS, RETURN)])
    assert batch.traj_outcome.tolist() == [pytest.approx(10.5)]
    np.testing.assert_allclose(discounted_returns(batch, 0.95), [8.9651375, 9.54225, 10.255, 10.9], rtol=1e-12)
    # gamma = 1: the first step's return is the episode's return
    assert discounted_returns(batch, 1.0)[0] == pytest.approx(RETURN)


def test_an_outcome_no_step_paid_is_paid_at_the_last_step() -> None:
    """Only an outcome (no step rewards): gamma^(T - t) R. Step rewards that do not add up to the record's reward:
    the rest (R - sum r) at the last step, so gamma = 1 still gives R at the first step."""
    sparse = StepBatch.from_records([{"group": "g", "steps": [{"anchor": "a", "action": "x"},
                                                              {"anchor": "b", "action": "y"}],
                                      "success": True, "reward": 2.0}])
    np.testing.assert_allclose(discounted_returns(sparse, 0.5), [1.0, 2.0])
    partial = StepBatch.from_records([_record([-0.1, -0.1], 1.0)])  # rest 1.2 at the last step
    np.testing.assert_allclose(discounted_returns(partial, 0.5), [-0.1 + 0.5 * 1.1, 1.1])
    assert discounted_returns(partial, 1.0)[0] == pytest.approx(1.0)


def test_a_real_sokoban_record_gives_the_papers_return() -> None:
    """The rollout runner's record of a solved Sokoban level: step rewards -0.1 each and +10.9 (or +9.9 ...) on the
    last push, the record's reward their sum; GiGPO's return is the paper's sum over the step rewards."""
    from agentbench_crbc.cli.rollout import policy_engine
    from agentbench_crbc.rollout import RolloutRunner, RunnerConfig

    engine, builder = policy_engine("expert", "abc/SokobanText-v0")
    with RolloutRunner("abc/SokobanText-v0", engine, builder, RunnerConfig(group_size=2, max_steps=15)) as runner:
        groups = runner.collect([3])
    batch = StepBatch.from_groups(groups)
    traj = groups[0].trajectories[0]
    rewards = [s.reward for s in traj.steps]
    assert traj.success and len(rewards) >= 2
    assert rewards[:-1] == [pytest.approx(-0.1)] * (len(rewards) - 1) and rewards[-1] >= 9.9  # solved: +10
    assert traj.reward == pytest.approx(sum(rewards))  # the record's "reward" is the return
    want, acc = [], 0.0
    for r in reversed(rewards):  # Eq. 5 by its recursion R_t = r_t + gamma R_{t+1}
        acc = r + 0.95 * acc
        want.append(acc)
    np.testing.assert_allclose(discounted_returns(batch, 0.95)[:len(rewards)], want[::-1], rtol=1e-12)
