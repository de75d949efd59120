"""abc/Sokoban*: Gymnasium contract, gym-sokoban's rules and rewards, seeding, renderings and anchors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import agentbench_crbc.envs  # noqa: F401  (registers the ids)
from agentbench_crbc.envs.sokoban import ENV_IDS, Level, SokobanEnv
from agentbench_crbc.envs.sokoban.anchors import get_anchor_extractor, register_anchor_extractor
from agentbench_crbc.envs.sokoban.render import render_rgb, render_text, render_tiny
from agentbench_crbc.envs.sokoban.solver import solution_length
from agentbench_crbc.envs.sokoban.tasks import PLAN_SUBTASKS, plan_subtask
from agentbench_crbc.errors import ConfigError, DuplicateNameError, UnknownNameError


def sokoban_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("abc/Sokoban"))


def play(text: str, *actions: str) -> tuple[SokobanEnv, list[tuple]]:
    env = SokobanEnv(level=text, max_steps=None)
    env.reset()
    return env, [env.step(a) for a in actions]


def test_registered_ids_and_paper_setting() -> None:
    assert set(ENV_IDS) <= set(sokoban_ids())
    env = gym.make("abc/Sokoban-v0")
    assert env.spec.max_episode_steps == 15
    obs, info = env.reset(seed=0)
    assert obs.shape == (96, 96, 3) and obs.dtype == np.uint8
    assert info["subtask"] == plan_subtask(solution_length(env.unwrapped.level))
    assert info["admissible_actions"] == ["up", "down", "left", "right"]
    assert info["success"] is False and info["action_valid"] is True
    assert len(info["text"].splitlines()) == 6


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_check_env_every_id(env_id: str) -> None:
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=False)
    env.close()


def test_walk_and_wall() -> None:
    env, [(_, r1, t1, _, i1), (_, r2, _, _, _)] = play("######\n#P_O##\n#_X__#\n######", "right", "up")
    assert env.player == 8 and r1 == pytest.approx(-0.1) and not t1
    assert i1["action_valid"] and not i1["pushed_box"]
    assert r2 == pytest.approx(-0.1)  # walked into the wall: no move, still a valid action


def test_box_against_wall_does_not_move() -> None:
    env, [(_, reward, terminated, _, info)] = play("######\n#PX#O#\n######", "right")
    assert env.player == 7 and env.boxes == {8}
    assert reward == pytest.approx(-0.1) and not terminated and not info["pushed_box"]


def test_box_against_box_does_not_move() -> None:
    env, [(_, reward, _, _, _)] = play("#######\n#PXX_O#\n#____O#\n#######", "right")
    assert env.player == 8 and env.boxes == {9, 10} and reward == pytest.approx(-0.1)


def test_box_on_target_solves_with_bonus() -> None:
    _, [(_, reward, terminated, truncated, info)] = play("#####\n#PXO#\n#####", "right")
    assert reward == pytest.approx(-0.1 + 1 + 10)
    assert terminated and not truncated and info["success"] and info["boxes_on_target"] == 1
    assert info["text"] == "#####\n#_P√#\n#####"


def test_steps_after_solving_pay_nothing_and_change_nothing() -> None:
    _, steps = play("#####\n#PXO#\n#####", "right", "left", "right", "up")
    assert [s[1] for s in steps] == pytest.approx([-0.1 + 1 + 10, 0.0, 0.0, 0.0])
    assert all(s[2] and s[4]["success"] for s in steps) and steps[-1][4]["text"] == "#####\n#_P√#\n#####"


def test_box_on_then_off_target() -> None:
    level = "########\n#PX_O__#\n#_____O#\n#___X__#\n########"
    _, steps = play(level, "right", "right", "right")
    rewards = [s[1] for s in steps]
    assert rewards == pytest.approx([-0.1, -0.1 + 1, -0.1 - 1])
    assert [s[4]["boxes_on_target"] for s in steps] == [0, 1, 0]
    assert not any(s[2] for s in steps)


def test_solving_two_boxes_gives_one_bonus_at_the_end() -> None:
    _, steps = play("#######\n#PXO__#\n#__XO_#\n#_____#\n#######", "right", "down", "right")
    assert [s[1] for s in steps] == pytest.approx([0.9, -0.1, 10.9])
    assert [s[2] for s in steps] == [False, False, True]


def test_no_pulling() -> None:
    env, [(_, reward, _, _, _)] = play("######\n#_XP_#\n#O___#\n######", "right")
    assert env.boxes == {8} and env.player == 10 and reward == pytest.approx(-0.1)


@pytest.mark.parametrize("action", ["jump", "", "upp", "push up", 3, None])
def test_invalid_action_is_answered_not_raised(action: object) -> None:
    env, [(_, reward, terminated, _, info)] = play("#####\n#PXO#\n#####", action)  # type: ignore[arg-type]
    assert info["action_valid"] is False and reward == pytest.approx(-0.1) and not terminated
    assert env.player == 6 and env.boxes == {7}


@pytest.mark.parametrize("action", ["RIGHT", " right\n", "Right"])
def test_actions_ignore_case_and_whitespace(action: str) -> None:
    _, [(_, _, terminated, _, info)] = play("#####\n#PXO#\n#####", action)
    assert info["action_valid"] and terminated


def test_truncation_comes_from_time_limit() -> None:
    env = gym.make("abc/Sokoban-v0")
    env.reset(seed=5)
    results = [env.step("nonsense") for _ in range(15)]
    assert [r[3] for r in results] == [False] * 14 + [True]
    assert not any(r[2] for r in results)


def test_same_seed_same_level_different_seeds_differ() -> None:
    env = gym.make("abc/SokobanText-v0")
    texts = [env.reset(seed=s)[0] for s in range(40)]
    assert texts == [env.reset(seed=s)[0] for s in range(40)]
    assert len(set(texts)) >= 35
    assert isinstance(texts[0], str) and env.observation_space.contains(texts[0])


def test_seed_stream_continues_after_first_seed() -> None:
    a, b = gym.make("abc/SokobanText-v0"), gym.make("abc/SokobanText-v0")
    first = [a.reset(seed=7)[0], a.reset()[0], a.reset()[0]]
    assert first == [b.reset(seed=7)[0], b.reset()[0], b.reset()[0]]
    assert len(set(first)) == 3


def test_same_seed_same_level_in_other_processes() -> None:
    code = (
        "import json, gymnasium as gym, agentbench_crbc.envs\n"
        "e = gym.make('abc/Sokoban-7x7-2b-v0', obs_mode='text')\n"
        "print(json.dumps([e.reset(seed=s)[0] for s in range(12)]))"
    )
    here = gym.make("abc/Sokoban-7x7-2b-v0", obs_mode="text")
    expected = [here.reset(seed=s)[0] for s in range(12)]
    for hash_seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert json.loads(out.stdout) == expected


def test_reset_does_not_touch_global_rngs() -> None:
    import random

    random.seed(1)
    np.random.seed(1)
    state, np_state = random.getstate(), np.random.get_state()[1].copy()
    gym.make("abc/Sokoban-10x10-3b-v0").reset(seed=3)
    assert random.getstate() == state and np.array_equal(np.random.get_state()[1], np_state)


def test_generated_levels_fit_the_step_limit() -> None:
    from agentbench_crbc.envs.sokoban import solve

    env = gym.make("abc/SokobanText-v0")
    lengths = []
    for s in range(60):
        env.reset(seed=s)
        plan = solve(env.unwrapped.level)
        assert plan is not None and 1 <= len(plan) <= 15
        lengths.append(len(plan))
    assert np.mean(lengths) > 3  # not a collection of one-push levels


def test_rgb_rendering_shape_dtype_and_sensitivity() -> None:
    env = SokobanEnv(level="######\n#P_O##\n#_X__#\n######", max_steps=None)
    obs0, _ = env.reset()
    obs1, *_ = env.step("right")
    assert obs0.shape == obs1.shape == (64, 96, 3) and obs0.dtype == np.uint8
    assert not np.array_equal(obs0, obs1)
    diff_rows = np.flatnonzero(np.any(obs0 != obs1, axis=(1, 2)))
    assert diff_rows.min() >= 16 and diff_rows.max() < 32  # only row 1 changed
    obs1[:] = 0  # fresh arrays: mutating one observation leaves the env's next one alone
    assert env.step("left")[0].any()


def test_all_cell_kinds_render_differently() -> None:
    codes = np.arange(7, dtype=np.uint8).reshape(1, 7)
    rgb, tiny = render_rgb(codes, 16), render_tiny(codes, 2)
    assert rgb.shape == (16, 112, 3) and tiny.shape == (2, 14, 3) and tiny.dtype == np.uint8
    tiles = {rgb[:, 16 * k : 16 * (k + 1)].tobytes() for k in range(7)}
    assert len(tiles) == 7 and len({tuple(tiny[0, 2 * k]) for k in range(7)}) == 7
    assert render_text(codes) == "#_O√XPS"


@pytest.mark.parametrize(("obs_mode", "shape"), [("rgb", (112, 112, 3)), ("tiny_rgb", (14, 14, 3))])
def test_observation_modes(obs_mode: str, shape: tuple[int, ...]) -> None:
    env = gym.make("abc/Sokoban-7x7-2b-v0", obs_mode=obs_mode, tiny_scale=2)
    obs, info = env.reset(seed=1)
    assert obs.shape == shape and env.observation_space.contains(obs)
    text_env = gym.make("abc/Sokoban-7x7-2b-v0", obs_mode="text")
    assert text_env.reset(seed=1)[0] == info["text"]


def test_render_modes() -> None:
    env = gym.make("abc/Sokoban-v0", render_mode="ansi")
    _, info = env.reset(seed=2)
    assert env.render() == info["text"]
    env = gym.make("abc/Sokoban-v0", render_mode="rgb_array")
    obs, _ = env.reset(seed=2)
    assert np.array_equal(env.render(), obs)


def test_anchors_state_pixels_text() -> None:
    level = "#######\n#P_X_O#\n#_____#\n#######"
    anchors = {}
    for name in ("state", "pixels", "text"):
        env = SokobanEnv(level=level, anchor=name, max_steps=None)
        a0 = env.reset()[1]["anchor"]
        a1 = env.step("up")[4]["anchor"]  # into the wall: same state, same anchor
        a2 = env.step("right")[4]["anchor"]
        a3 = env.step("left")[4]["anchor"]
        assert a0 == a1 == a3 != a2
        hash(a0)
        anchors[name] = a0
    assert anchors["state"] == (8, (10,)) and anchors["text"] == level
    assert isinstance(anchors["pixels"], str) and len(anchors["pixels"]) == 32


def test_pixel_anchor_is_stable_across_processes() -> None:
    code = (
        "import gymnasium as gym, agentbench_crbc.envs\n"
        "print(gym.make('abc/Sokoban-v0', anchor='pixels').reset(seed=4)[1]['anchor'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == gym.make("abc/Sokoban-v0", anchor="pixels").reset(seed=4)[1]["anchor"]


def test_anchor_registry() -> None:
    with pytest.raises(UnknownNameError, match="pixels"):
        get_anchor_extractor("pixel")
    with pytest.raises(DuplicateNameError):
        register_anchor_extractor("state", lambda env: 0)
    register_anchor_extractor("test_player_only", lambda env: env.player)
    try:
        env = gym.make("abc/Sokoban-v0", anchor="test_player_only")
        assert env.reset(seed=0)[1]["anchor"] == env.unwrapped.player
    finally:
        from agentbench_crbc.envs.sokoban.anchors import ANCHOR_EXTRACTORS

        del ANCHOR_EXTRACTORS["test_player_only"]


def test_level_text_round_trip_and_errors() -> None:
    text = "######\n#_XO##\n#_X√S#\n######"
    level = Level.from_text(text)
    assert level.to_text() == text and len(level.boxes) == len(level.targets) == 3
    assert Level.from_text("#####\n#@$.#\n#####") == Level.from_text("#####\n#PXO#\n#####")  # XSB accepted
    with pytest.raises(ConfigError, match="surround"):
        Level.from_text("#####\n_PXO#\n#####")
    with pytest.raises(ConfigError, match="as many targets"):
        Level.from_text("######\n#PXX_#\n#__O_#\n######")
    with pytest.raises(ConfigError, match="symbol"):
        Level.from_text("#####\n#PX?#\n#####")
    with pytest.raises(ConfigError, match="size"):
        SokobanEnv(size=6).reset(options={"level": "#####\n#PXO#\n#####"})
    with pytest.raises(ConfigError, match="obs_mode"):
        SokobanEnv(obs_mode="pixels")


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"size": 0}, "size"), ({"size": "6"}, "size"), ({"size": (6,)}, "size"), ({"size": 5.5}, "size"),
    ({"size": (6, 3)}, "size"), ({"size": True}, "size"), ({"max_steps": 1.5}, "max_steps"),
    ({"max_steps": 0}, "max_steps"), ({"cell_px": 0}, "cell_px"), ({"num_boxes": 1.5}, "num_boxes"),
    ({"num_boxes": 0}, "num_boxes"), ({"tiny_scale": -1}, "tiny_scale"),
])
def test_constructor_refuses_bad_kwargs_in_one_line(kwargs: dict, name: str) -> None:
    with pytest.raises(ConfigError, match=rf"^Expect `{name}` to be an integer") as err:
        gym.make("abc/Sokoban-v0", **kwargs)
    assert "\n" not in str(err.value) and "actually: " in str(err.value)


def test_constructor_accepts_numpy_and_pairs() -> None:
    env = SokobanEnv(size=np.int64(7), num_boxes=np.int32(2), max_steps=np.int64(20), obs_mode="text")
    assert env.shape == (7, 7) and env.num_boxes == 2 and env.max_steps == 20
    assert SokobanEnv(size=[6, 8], obs_mode="text").shape == (6, 8)


@pytest.mark.parametrize("key", ["max_steps", "min_moves", "max_moves"])
def test_level_lengths_past_any_level_are_refused_before_reset_hangs(key) -> None:
    # #31 item 9: --set env.kwargs.max_steps=1000000000000 made reset walk forever
    with pytest.raises(ConfigError, match=f"`{key}` to be an integer in"):
        gym.make("abc/Sokoban-v0", **{key: 10**12})


@pytest.mark.parametrize(("moves", "name"), [(None, "unsolvable"), (0, "0 moves"), (1, "1 move"), (4, "4 moves"),
                                             (5, "5-8 moves"), (8, "5-8 moves"), (9, "9-16 moves"),
                                             (16, "9-16 moves"), (17, "17-32 moves"), (32, "17-32 moves"),
                                             (33, "33+ moves"), (500, "33+ moves")])
def test_plan_subtask_names(moves: int | None, name: str) -> None:
    assert plan_subtask(moves) == name and name in PLAN_SUBTASKS


def test_subtask_is_the_levels_optimal_plan_length() -> None:
    # a step to the box and one push (2 moves); three pushes in a row (3 moves)
    assert SokobanEnv(level="######\n#P_XO#\n######").reset()[1]["subtask"] == "2 moves"
    assert SokobanEnv(level="#######\n#PX__O#\n#######").reset()[1]["subtask"] == "3 moves"
    assert SokobanEnv(level="######\n#PXO##\n######").reset()[1]["subtask"] == "1 move"
    assert SokobanEnv(level="#####\n#X_O#\n#P__#\n#####").reset()[1]["subtask"] == "unsolvable"  # a box in a corner
    sized = SokobanEnv(level="######\n#P_XO#\n######", subtask="size")
    assert sized.reset()[1]["subtask"] == "3x6-1box"
    # the demo's levels (1-4 moves) are named by their plan length, every level of a seed the same on each reset
    env = SokobanEnv(obs_mode="text", max_moves=4, max_steps=8)
    names = [env.reset(seed=s)[1]["subtask"] for s in range(40)]
    assert set(names) <= {"1 move", "2 moves", "3 moves", "4 moves"} and len(set(names)) >= 3
    assert names == [env.reset(seed=s)[1]["subtask"] for s in range(40)]


def test_large_boards_keep_size_subtasks() -> None:
    env = gym.make("abc/Sokoban-10x10-3b-v0")
    assert env.unwrapped.subtask_by == "size" and env.reset(seed=0)[1]["subtask"] == "10x10-3box"
    with pytest.raises(ConfigError, match="subtask='moves'; choose one of plan, size"):
        SokobanEnv(subtask="moves")
