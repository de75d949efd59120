"""``abc play sokoban``: the terminal driven by stdin and the pygame window under SDL_VIDEODRIVER=dummy."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import agentbench_crbc.envs  # noqa: F401  (registers the ids)
from agentbench_crbc.envs.sokoban import solve
from agentbench_crbc.envs.sokoban.play import make_env, parse_settings, play_terminal, play_window, run
from agentbench_crbc.envs.sokoban.tasks import plan_subtask
from agentbench_crbc.errors import ConfigError

WASD = {"up": "w", "down": "s", "left": "a", "right": "d"}


def plan_for(seed: int, env_id: str = "abc/Sokoban-v0") -> list[str]:
    env = gym.make(env_id)
    env.reset(seed=seed)
    return solve(env.unwrapped.level)


def test_terminal_solves_with_keys_letters_and_words() -> None:
    plan = plan_for(3)
    keys = "".join(WASD[a] for a in plan[:-1])
    out = io.StringIO()
    info = play_terminal(
        make_env({}), seed=3, stdin=io.StringIO(f"jump\n?\n{keys}\n{plan[-1].upper()}\nq\n"), stdout=out
    )
    text = out.getvalue()
    assert info["success"]
    assert "unknown input 'jump'" in text and f"hint: {plan[0]}" in text
    assert f"solved in {len(plan)} steps" in text


def test_terminal_restart_next_and_solver() -> None:
    out = io.StringIO()
    info = play_terminal(
        make_env({"size": 7, "num_boxes": 2, "max_steps": 30}),
        seed=1,
        stdin=io.StringIO("w\nr\nn\nsolve\n"),
        stdout=out,
    )
    text = out.getvalue()
    assert info["success"] and text.count("level seed 1") == 2
    # the banner names the level's subtask, its optimal plan length (the solver's plan solved it)
    solved = int(text.rsplit("solved in ", 1)[1].split()[0])
    assert f"level seed 2 ({plan_subtask(solved)})" in text


def test_abc_play_sokoban_terminal_subprocess() -> None:
    plan = plan_for(5)
    cmd = [sys.executable, "-m", "agentbench_crbc", "play", "sokoban", "--ui", "terminal", "--seed", "5"]
    done = subprocess.run(cmd, input="\n".join(plan) + "\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "solved in" in done.stdout and "#" in done.stdout
    gave_up = subprocess.run(cmd, input="q\n", capture_output=True, text=True, timeout=60)
    assert gave_up.returncode == 1 and "solved" not in gave_up.stdout


def test_window_with_dummy_driver() -> None:
    assert os.environ.get("SDL_VIDEODRIVER") == "dummy"  # set by tests/conftest.py
    plan = plan_for(4)
    env = make_env({})
    out = io.StringIO()
    info = play_window(env, seed=4, script=plan, out=out)  # arrow-key names, posted as real pygame events
    assert info["success"] and f"solved in {len(plan)} steps" in out.getvalue()
    info = play_window(env, seed=4, script=[WASD[a] for a in plan], out=io.StringIO())
    assert info["success"]
    info = play_window(env, seed=4, script=["space"], out=io.StringIO())  # the solver plays
    assert info["success"]


def test_window_shows_scaled_frames_and_human_render_mode() -> None:
    import pygame

    from agentbench_crbc.envs.sokoban.play import Window

    window = Window(scale=2)
    frame = np.zeros((96, 96, 3), dtype=np.uint8)
    frame[:, :48] = 255
    window.show(frame)
    assert window.surface.get_size() == (192, 192)
    assert tuple(window.surface.get_at((10, 10)))[:3] == (255, 255, 255)
    assert tuple(window.surface.get_at((150, 10)))[:3] == (0, 0, 0)
    window.close()
    env = gym.make("abc/Sokoban-v0", render_mode="human")
    env.reset(seed=0)
    env.step("up")
    assert pygame.display.get_surface().get_size() == (384, 384)
    env.close()


def test_settings_and_errors() -> None:
    assert parse_settings(["size=7", "obs_mode=text", "id=abc/Sokoban-7x7-2b-v0"]) == {
        "size": 7,
        "obs_mode": "text",
        "id": "abc/Sokoban-7x7-2b-v0",
    }
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_settings(["size"])
    env = make_env({"max_steps": 40, "size": 8, "num_boxes": 2})
    assert env.spec.max_episode_steps == 40 and env.unwrapped.subtask_by == "plan"
    with pytest.raises(ConfigError, match="window"):
        run(argparse.Namespace(seed=0, ui="browser", set=[]))


def test_terminal_shows_the_legend_and_says_when_a_move_is_blocked() -> None:
    env = make_env({})
    _obs, info = env.reset(seed=3)
    blocked = []
    for action in WASD:  # a move into a wall (or an immovable box) leaves the grid as it was
        env.reset(seed=3)
        if env.step(action)[4]["text"] == info["text"]:
            blocked.append(action)
    assert blocked, "seed 3 starts the player beside a wall"
    moving = next(a for a in WASD if a not in blocked)
    out = io.StringIO()
    play_terminal(make_env({}), seed=3, stdin=io.StringIO(f"{WASD[blocked[0]]}\n{WASD[moving]}\nq\n"), stdout=out)
    lines = out.getvalue().splitlines()
    assert any("legend: # wall  _ floor  O target  X box" in line for line in lines)
    said = [line for line in lines if line.startswith(("up:", "down:", "left:", "right:"))]
    assert len(said) == 2 and "(blocked:" in said[0] and "(blocked:" not in said[1]


def test_window_without_a_display_exits_2_at_once_and_names_the_terminal() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")}
    cmd = [sys.executable, "-m", "agentbench_crbc", "play", "sokoban", "--ui", "window"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "abc play: error: --ui window: no display here (DISPLAY and WAYLAND_DISPLAY are unset); play in the "
        "terminal with --ui terminal"]
