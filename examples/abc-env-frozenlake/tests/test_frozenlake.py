"""The FrozenLake family passes agentbench-crbc's family test kit; its expert, maps and held-out split."""

from __future__ import annotations

import gymnasium as gym
import pytest
from abc_env_frozenlake.expert import expert_policy, task_key
from abc_env_frozenlake.family import FROZENLAKE

from agentbench_crbc.errors import UnknownNameError
from agentbench_crbc.family import is_heldout, register_gym_ids, resolve_env
from agentbench_crbc.testing import check_env_family

ENV_ID = "abc-frozenlake/FrozenLakeText-v0"


@pytest.fixture(scope="module", autouse=True)
def _ids() -> None:
    register_gym_ids(FROZENLAKE)


def test_family_kit() -> None:
    check_env_family(FROZENLAKE, expert_seeds=range(8))


def test_registered_through_the_entry_point() -> None:
    got = resolve_env("frozenlake")
    assert got.family.name == "frozenlake" and got.env_id == ENV_ID


def test_observation_actions_and_invalid_text() -> None:
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=3)
    assert obs.splitlines()[0][0] == "A" and obs.splitlines()[-1][-1] == "G" and info["anchor"] == 0
    assert info["admissible_actions"] == ["left", "down", "right", "up"] and info["subtask"] == "4x4"
    obs2, reward, terminated, _, info2 = env.step("jump")
    assert obs2 == "Nothing happens." and reward == 0.0 and not terminated and not info2["action_valid"]
    _, _, _, _, info3 = env.step("down")
    assert info3["action_valid"] and info3["anchor"] == 4


def test_the_anchor_keyword_picks_the_state_key() -> None:
    obs, info = gym.make(ENV_ID, anchor="text").reset(seed=3)
    assert info["anchor"] == obs  # the grid with the agent
    assert gym.make(ENV_ID).reset(seed=3)[1]["anchor"] == 0  # the default, the family's first: the cell index
    with pytest.raises(UnknownNameError, match="unknown frozenlake anchor 'pixels'; choose one of cell, text"):
        gym.make(ENV_ID, anchor="pixels")


def test_expert_reaches_the_goal_on_every_map_by_the_shortest_path() -> None:
    env = gym.make(ENV_ID)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        policy = expert_policy(env)
        for steps in range(1, 21):  # noqa: B007  (the count is asserted below)
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            if terminated or truncated:
                break
        assert info["success"] and reward == 1.0, seed
        assert steps == 6  # 4x4 without slip: 3 down and 3 right around the holes


def test_maps_by_seed_and_a_held_out_share() -> None:
    env = gym.make(ENV_ID)
    keys = []
    for seed in range(200):
        env.reset(seed=seed)
        keys.append(task_key(env))
    assert len(set(keys)) > 50  # generated maps differ
    held = [k for k in set(keys) if is_heldout(k)]
    assert 0 < len(held) < len(set(keys)) / 3
