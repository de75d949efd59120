"""``abc/ALFWorld-v0`` on the real engine: the expert solves all six families, random play fails, API contract."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

import agentbench_crbc.envs  # noqa: F401
from agentbench_crbc.envs.alfworld import expert_policy
from agentbench_crbc.envs.alfworld.generate import build_game, ensure_game
from agentbench_crbc.envs.alfworld.layouts import PAPER_NAMES, TASK_TYPES


def _small(task_type: str) -> int:
    """The game number (of the first 40) with the smallest room: keeps engine time in tests low."""
    return min(range(40), key=lambda i: len(build_game("train", task_type, i).pddl_problem))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("alfworld-cache"))


@pytest.fixture(scope="module")
def pick_game(cache: str) -> str:
    return str(ensure_game("train", "pick_and_place_simple", _small("pick_and_place_simple"), root=cache))


@pytest.fixture(scope="module")
def env(pick_game: str):
    e = gym.make("abc/ALFWorld-v0", game_files=[pick_game])
    yield e
    e.close()


def test_reset_step_info_contract(env) -> None:
    obs, info = env.reset(seed=0)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-") and "Your task is to:" in obs
    assert info["subtask"] == "pick" and info["task_type"] == "pick_and_place_simple"
    assert info["task"] and info["task"] in obs
    assert info["success"] is False and info["action_valid"] is True
    adm = info["admissible_actions"]
    assert adm == sorted(adm) and "help" not in adm and "look" in adm and any(a.startswith("go to ") for a in adm)
    action = next(a for a in adm if a.startswith("go to "))
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("You arrive at ") and reward == 0.0 and not terminated and not truncated
    assert info["action_valid"] is True


@pytest.mark.parametrize("action", ["jump around", "", "go to the moon", "take everything", "\t\n", "TAKE X 1"])
def test_malformed_actions_answered_like_the_engine_and_flagged(env, action: str) -> None:
    _, info0 = env.reset(seed=0)
    obs, reward, terminated, _truncated, info = env.step(action)
    assert obs == "Nothing happens."
    assert info["action_valid"] is False and reward == 0.0 and not terminated
    assert info["admissible_actions"] == info0["admissible_actions"]  # the game state did not change


def test_same_seed_same_game_and_anchors(env, cache: str) -> None:
    other = gym.make("abc/ALFWorld-v0", cache_dir=cache, task_types=["pick"])
    a = other.reset(seed=36)
    b = other.reset(seed=36)
    assert a == b
    _obs, info = env.reset(seed=7)
    path = info["gamefile"]
    moves = [x for x in info["admissible_actions"] if x.startswith("go to")][:3]
    run1 = [env.step(m)[4]["anchor"] for m in moves]
    env.reset(seed=7)
    run2 = [env.step(m)[4]["anchor"] for m in moves]
    assert run1 == run2 and env.unwrapped._loaded.as_posix() == path
    other.close()


@pytest.mark.slow
def test_anchor_extractors(pick_game: str) -> None:
    envs = {name: gym.make("abc/ALFWorld-v0", game_files=[pick_game], anchor=name)
            for name in ("paper", "observation", "state")}
    walk = None
    anchors = {}
    for name, e in envs.items():
        _obs, info = e.reset(seed=0)
        walk = walk or e.unwrapped.walkthrough
        seq = [info["anchor"]] + [e.step(c)[4]["anchor"] for c in walk]
        anchors[name] = seq
        assert all(isinstance(a, str) for a in seq)
    assert anchors["observation"][1].startswith("You arrive at")
    assert "holds(agent1" in anchors["state"][-2] or "holds(" in "\n".join(anchors["state"])
    assert len(set(anchors["paper"])) == len(anchors["paper"])
    with pytest.raises(KeyError, match="choose one of observation, paper, state"):
        gym.make("abc/ALFWorld-v0", game_files=[pick_game], anchor="pixels")


def test_paper_anchor_merges_orders_of_the_same_moves(env) -> None:
    """Look actions do not move the game, so paper anchors of a look/no-look pair match after the same move."""
    _obs, info = env.reset(seed=0)
    go = next(a for a in info["admissible_actions"] if a.startswith("go to "))
    a1 = env.step(go)[4]["anchor"]
    env.reset(seed=0)
    env.step("inventory")
    a2 = env.step(go)[4]["anchor"]
    assert a1 == a2


@pytest.mark.slow
def test_check_env(pick_game: str) -> None:
    e = gym.make("abc/ALFWorld-v0", game_files=[pick_game])
    check_env(e.unwrapped, skip_render_check=True)
    e.close()


def _solve(e, seed_options: dict) -> tuple[bool, int]:
    obs, info = e.reset(options=seed_options)
    policy = expert_policy(e)
    for step in range(50):
        obs, reward, terminated, truncated, info = e.step(policy(obs, info))
        assert info["action_valid"]
        if terminated or truncated:
            return bool(info["success"]) and reward == 1.0, step + 1
    return False, 50


def test_expert_solves_a_pick_game(env) -> None:
    ok, steps = _solve(env, {})
    assert ok and steps <= 10
    obs = env.unwrapped._last_obs
    after = [env.step(a) for a in ("look", "inventory", "look")]  # steps after the win pay nothing
    assert [(r, term, i["success"]) for _, r, term, _, i in after] == [(0.0, True, True)] * 3
    assert all(o == obs for o, *_ in after)


@pytest.mark.slow
@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_expert_solves_every_task_family_through_the_gym_api(task_type: str, cache: str) -> None:
    e = gym.make("abc/ALFWorld-v0", cache_dir=cache)
    ok, _steps = _solve(e, {"task_type": task_type, "index": _small(task_type)})
    assert ok, f"expert failed on {task_type}"
    assert e.unwrapped.task_type == task_type
    e.close()


@pytest.mark.slow
def test_expert_replans_with_the_engine_planner_after_a_detour(env) -> None:
    obs, info = env.reset(seed=0)
    walk = env.unwrapped.walkthrough
    detour = next(a for a in info["admissible_actions"] if a.startswith("go to ") and a != walk[0])
    obs, _, _, _, info = env.step(detour)
    policy = expert_policy(env, planner_timeout=60)
    for _ in range(20):
        obs, _reward, terminated, _, info = env.step(policy(obs, info))
        if terminated:
            break
    assert info["success"]


@pytest.mark.slow
def test_random_agent_mostly_fails(cache: str) -> None:
    e = gym.make("abc/ALFWorld-v0", cache_dir=cache)
    rng = random.Random(0)
    wins = 0
    for task_type in ("pick_and_place_simple", "pick_clean_then_place_in_recep", "look_at_obj_in_light"):
        _, info = e.reset(options={"task_type": task_type, "index": _small(task_type)})
        for _ in range(25):
            _obs, _reward, terminated, _truncated, info = e.step(rng.choice(info["admissible_actions"]))
            if terminated:
                break
        wins += bool(info["success"])
        assert info["subtask"] == PAPER_NAMES[task_type]
    assert wins <= 1
    e.close()



def test_play_in_the_terminal(pick_game: str) -> None:
    import argparse

    from agentbench_crbc.envs.alfworld.play import run

    walk = gym.make("abc/ALFWorld-v0", game_files=[pick_game])
    walk.reset(seed=0)
    commands = iter(["?", "dance", *walk.unwrapped.walkthrough])
    shown: list[str] = []
    args = argparse.Namespace(seed=0, ui="auto", set=[f"game_files={pick_game}"])
    assert run(args, input_fn=lambda _: next(commands), print_fn=shown.append) == 0
    assert "Nothing happens." in shown and shown[-1] == "You won!"
    assert any("go to " in s for s in shown[:3])
    assert run(args, input_fn=lambda _: "quit", print_fn=shown.append) == 1  # quitting before the win
