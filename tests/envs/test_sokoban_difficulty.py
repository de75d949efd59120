"""Sokoban difficulty levels (``min_moves`` / ``max_moves``) and the greedy demonstrator."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentbench_crbc.envs  # noqa: F401  (registers the ids)
from agentbench_crbc.envs.sokoban import Level, SokobanEnv, solve
from agentbench_crbc.envs.sokoban.generator import generate_level, generate_level_in_range
from agentbench_crbc.envs.sokoban.greedy import greedy_action, greedy_plan, greedy_policy
from agentbench_crbc.envs.sokoban.solver import next_level, solution_length
from agentbench_crbc.errors import ConfigError, EnvError


def lengths(env: gym.Env, seeds: range) -> list[int]:
    out = []
    for s in seeds:
        env.reset(seed=s)
        n = solution_length(env.unwrapped.level)
        assert n is not None
        out.append(n)
    return out


def test_move_range_bounds_the_optimal_solution_length() -> None:
    got = lengths(gym.make("abc/SokobanText-v0", min_moves=4, max_moves=7), range(80))
    assert min(got) >= 4 and max(got) <= 7
    assert set(got) == {4, 5, 6, 7}  # the whole range, not one length


def test_without_a_range_the_levels_are_the_plain_generators() -> None:
    env = gym.make("abc/SokobanText-v0")
    plain = gym.make("abc/SokobanText-v0", min_moves=1, max_moves=15)
    for s in range(20):
        assert env.reset(seed=s)[0] == plain.reset(seed=s)[0]
    assert min(lengths(env, range(80))) == 1  # one-move levels exist, so the range above does exclude some


def test_range_is_the_plain_distribution_restricted() -> None:
    """A level in range is the one the plain generator gives from the same generator state (rejection only)."""
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    level = generate_level_in_range(rng_a, size=6, min_moves=5, max_moves=9, walk_moves=15)
    while True:
        plain = generate_level(rng_b, size=6, max_moves=15)
        n = solution_length(plain)
        if n is not None and 5 <= n <= 9:
            break
    assert level == plain


def test_same_seed_same_level_with_a_range() -> None:
    a = gym.make("abc/SokobanText-v0", min_moves=3, max_moves=6)
    b = gym.make("abc/SokobanText-v0", min_moves=3, max_moves=6)
    assert [a.reset(seed=s)[0] for s in range(10)] == [b.reset(seed=s)[0] for s in range(10)]


def test_max_moves_is_capped_by_max_steps() -> None:
    env = SokobanEnv(obs_mode="text", max_steps=6, max_moves=40)
    assert env.max_moves == 6
    assert max(lengths(env, range(30))) <= 6


@pytest.mark.parametrize("kwargs", [{"min_moves": 0}, {"min_moves": 5, "max_moves": 4}, {"min_moves": 1.5},
                                    {"min_moves": 16}])
def test_bad_range_is_refused_in_one_line(kwargs: dict) -> None:
    with pytest.raises(ConfigError, match=r"^Expect `(min|max)_moves` to be") as err:
        SokobanEnv(obs_mode="text", **kwargs)
    assert "\n" not in str(err.value)


def test_unreachable_range_says_how_to_fix() -> None:
    with pytest.raises(EnvError, match="widen the range"):
        generate_level_in_range(np.random.default_rng(0), size=5, min_moves=30, max_moves=40, max_draws=20)


def test_greedy_solves_an_open_level_by_the_shortest_plan() -> None:
    level = Level.from_text("######\n#P_XO#\n#____#\n######")
    plan, solved = greedy_plan(level)
    assert solved and plan == ["right", "right"] == solve(level)


def test_greedy_walks_around_to_push() -> None:
    level = Level.from_text("######\n######\n####O#\n#_X__#\n#__P_#\n######")
    plan, solved = greedy_plan(level)
    assert solved and plan == solve(level) == ["left", "left", "up", "right", "right", "down", "right", "up"]


@pytest.mark.parametrize("text", ["######\n#__###\n#_X_##\n#_PO##\n#___##\n######",
                                  "######\n#_P__#\n#_X_##\n#O_###\n#___##\n######"])
def test_greedy_is_stuck_where_only_a_detour_solves(text: str) -> None:
    level = Level.from_text(text)
    plan, solved = greedy_plan(level, max_steps=50)
    assert solve(level) is not None and not solved  # the box went into a dead end a planner avoids
    state = level
    for a in plan:
        state = next_level(state, a)
    assert greedy_action(state) is None and len(plan) < 50  # stuck, not looping


def test_greedy_is_suboptimal_but_reasonable_on_generated_levels() -> None:
    env = gym.make("abc/SokobanText-v0")
    solved = []
    for s in range(120):
        env.reset(seed=s)
        level = env.unwrapped.level
        _, ok = greedy_plan(level, max_steps=15)
        solved.append(ok)
    assert 0.6 < np.mean(solved) < 1.0  # solves most, not all


def test_greedy_policy_plays_the_env() -> None:
    env = gym.make("abc/SokobanText-v0")
    obs, info = env.reset(seed=2)
    policy = greedy_policy(env)
    for _ in range(15):
        obs, _, term, trunc, info = env.step(policy(obs, info))
        if term or trunc:
            break
    assert info["success"] == greedy_plan(env.unwrapped.initial_level, max_steps=15)[1]
