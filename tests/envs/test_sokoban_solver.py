"""Sokoban generator, solver and symmetries: plans are optimal (brute force through the env) and win."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest

import agentbench_crbc.envs  # noqa: F401  (registers the ids)
from agentbench_crbc.envs.sokoban import (
    ACTIONS,
    Level,
    SokobanEnv,
    canonical_key,
    dihedral,
    dihedral_action,
    expert_policy,
    generate_level,
    optimal_actions,
    solve,
)
from agentbench_crbc.errors import ConfigError, EnvError


def brute_force_distances(env: SokobanEnv, start: Level, limit: int = 40) -> dict[Level, int]:
    """Breadth-first search with the env itself as the rules oracle; returns moves-to-goal for every state
    from which the goal was reached (computed backwards over the explored graph)."""
    depth, parents, frontier = {start: 0}, {}, [start]
    while frontier and min(depth[s] for s in frontier) < limit:
        nxt = []
        for state in frontier:
            if state.solved:
                continue
            for action in ACTIONS:
                env.reset(options={"level": state})
                env.step(action)
                after = env.level
                parents.setdefault(after, set()).add(state)
                if after not in depth:
                    depth[after] = depth[state] + 1
                    nxt.append(after)
        frontier = nxt
    to_goal = {s: 0 for s in depth if s.solved}
    queue = list(to_goal)
    while queue:
        state = queue.pop(0)
        for parent in parents.get(state, ()):
            if parent not in to_goal and parent != state:
                to_goal[parent] = to_goal[state] + 1
                queue.append(parent)
    return to_goal


def replay(level: Level, plan: list[str]) -> tuple[bool, float]:
    env = SokobanEnv(level=level, max_steps=None)
    env.reset()
    total, info = 0.0, {}
    for action in plan:
        _, reward, _, _, info = env.step(action)
        total += reward
    return bool(info.get("success")), total


SMALL = [generate_level(s, size=6, num_boxes=1, max_moves=15) for s in range(12)] + [
    generate_level(s, size=6, num_boxes=2, max_moves=20) for s in range(4)
]


@pytest.mark.parametrize("level", SMALL, ids=range(len(SMALL)))
def test_plans_are_optimal_by_brute_force(level: Level) -> None:
    env = SokobanEnv(level=level, max_steps=None)
    to_goal = brute_force_distances(env, level)
    plan = solve(level)
    assert plan is not None and len(plan) == to_goal[level]
    assert replay(level, plan)[0]
    assert optimal_actions(level) == {
        a for a in ACTIONS if (after := _after(env, level, a)) != level and to_goal.get(after) == to_goal[level] - 1
    }


def _after(env: SokobanEnv, level: Level, action: str) -> Level:
    env.reset(options={"level": level})
    env.step(action)
    return env.level


def test_solver_on_known_level() -> None:
    level = Level.from_text("#######\n#P_X_O#\n#_____#\n#######")
    assert solve(level) == ["right", "right", "right"]
    assert optimal_actions(level) == {"right"}
    around = Level.from_text("#######\n#_____#\n#PO_X_#\n#_____#\n#######")  # walk round the box, push twice
    plan = solve(around)
    assert plan is not None and len(plan) == 8 and plan[-2:] == ["left", "left"]
    assert replay(around, plan) == (True, pytest.approx(8 * -0.1 + 1 + 10))
    assert optimal_actions(around) == {"up", "down", "right"}  # right: over the target, then round
    assert brute_force_distances(SokobanEnv(level=around, max_steps=None), around)[around] == 8


def test_several_optimal_first_actions() -> None:
    level = Level.from_text("#######\n#_____#\n#__X__#\n#__O__#\n#__P__#\n#######")  # round either side
    assert optimal_actions(level) == {"left", "right", "up"}
    assert len(solve(level)) == 6


def test_unsolvable_and_solved_levels() -> None:
    corner = Level.from_text("######\n#X__O#\n#__P_#\n######")
    assert solve(corner) is None and optimal_actions(corner) == frozenset()
    done = Level.from_text("#####\n#P√_#\n#####")
    assert solve(done) == [] and optimal_actions(done) == frozenset()
    with pytest.raises(EnvError, match="max_nodes"):
        solve(generate_level(1, size=10, num_boxes=4, max_moves=120), max_nodes=5)


def test_expert_policy_reaches_success_through_gymnasium() -> None:
    env = gym.make("abc/Sokoban-v0")
    policy = expert_policy(env)
    wins, returns = 0, []
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total += reward
            done = terminated or truncated
        wins += info["success"]
        returns.append(total)
    assert wins == 30 and min(returns) >= 11 - 0.1 * 15 - 1e-9  # +1 +10, minus 0.1 a step, at most 15 steps


def test_expert_replans_after_a_detour() -> None:
    env = gym.make("abc/SokobanText-7x7-2b-v0")
    policy = expert_policy(env)
    obs, info = env.reset(seed=3)
    obs, *_, info = env.step("up")
    obs, *_, info = env.step("left")
    steps = 2
    while not info["success"] and steps < 30:
        obs, _, _, _, info = env.step(policy(obs, info))
        steps += 1
    assert info["success"]


def test_generator_validates_arguments() -> None:
    with pytest.raises(ConfigError, match="size"):
        generate_level(0, size=3)
    with pytest.raises(ConfigError, match="num_boxes"):
        generate_level(0, num_boxes=0)
    with pytest.raises(EnvError, match="fewer boxes"):
        generate_level(0, size=4, num_boxes=4, max_attempts=3)


def test_generator_is_seeded_and_leaves_global_state_alone() -> None:
    assert generate_level(11, size=8, num_boxes=2) == generate_level(11, size=8, num_boxes=2)
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    assert [generate_level(rng_a) for _ in range(3)] == [generate_level(rng_b) for _ in range(3)]


@pytest.mark.slow
def test_generator_every_level_solvable_within_bound_and_fast() -> None:
    for size, boxes, bound, n in ((6, 1, 15, 200), (7, 2, 30, 60), (10, 3, 100, 15)):
        for seed in range(n):
            level = generate_level(seed, size=size, num_boxes=boxes, max_moves=bound)
            assert not level.solved and len(level.boxes) == boxes
            plan = solve(level)
            assert plan is not None and len(plan) <= bound, (size, boxes, seed)
    start = time.perf_counter()
    for seed in range(20):
        generate_level(seed, size=10, num_boxes=4, max_moves=120)
    assert (time.perf_counter() - start) / 20 < 0.05  # tens of milliseconds at most (about 4 ms measured)


def test_dihedral_symmetries_map_levels_and_actions() -> None:
    level = generate_level(2, size=(6, 8), num_boxes=2, max_moves=30)
    plan = solve(level)
    keys = set()
    for k in range(8):
        image = dihedral(level, k)
        assert image.shape == (level.shape if k in (0, 2, 5, 7) else level.shape[::-1])
        moved = [dihedral_action(a, k) for a in plan]
        assert replay(image, moved)[0]
        assert solve(image) is not None and len(solve(image)) == len(plan)
        keys.add(canonical_key(image))
    assert keys == {canonical_key(level)}
    assert dihedral(level, 0) == level
    assert [dihedral_action(a, 1) for a in ACTIONS] == ["left", "right", "down", "up"]
    with pytest.raises(ConfigError):
        dihedral(level, 8)


def test_canonical_key_separates_different_levels() -> None:
    keys = {canonical_key(generate_level(s, max_moves=15)) for s in range(300)}
    assert 50 < len(keys) <= 300
