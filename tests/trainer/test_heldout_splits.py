"""Every preset validates on tasks it never trains on, through the trainer's own task choice (training_seeds,
validation_seeds, validation_kwargs, the env copies EnvRecipe makes): ALFWorld by game file (its valid_unseen
split: generated games in held-out floor plans, or the official data's folder), WebShop by goal index (its test
goals), Sokoban by canonical level (the hash split over the 8 symmetries)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentbench_crbc.rollout.hosting.workers import EnvRecipe
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.eval import (
    heldout_by_construction,
    summary_lines,
    training_seeds,
    validation_kwargs,
    validation_seeds,
)
from agentbench_crbc.trainer.schema import PRESETS

N_TRAIN = 256  # training seeds drawn as an update draws them (the pools are also compared whole where finite)


def _alfworld_games(cfg) -> tuple[set[str], set[str]]:
    pytest.importorskip("alfworld")
    pytest.importorskip("textworld")
    train = EnvRecipe(cfg.env.id, dict(cfg.env.kwargs)).make().unwrapped
    val = EnvRecipe(cfg.env.id, validation_kwargs(cfg)).make().unwrapped
    assert train.split == "train" and val.split == "valid_unseen"
    pool = {str(train.game_path(i)) for i in range(train.num_games)}  # every game training can draw
    drawn = {str(train.game_path(s % train.num_games)) for s in training_seeds(cfg, np.random.default_rng(0),
                                                                              N_TRAIN)}
    assert drawn <= pool
    held = {str(val.game_path(s % val.num_games)) for s in validation_seeds(cfg, cfg.eval.episodes)}
    return pool, held


def _webshop_goals(cfg) -> tuple[set[int], set[int]]:
    pytest.importorskip("rapidfuzz")
    pytest.importorskip("bm25s")
    train = EnvRecipe(cfg.env.id, dict(cfg.env.kwargs)).make().unwrapped
    val = EnvRecipe(cfg.env.id, validation_kwargs(cfg)).make().unwrapped
    drawn = set()
    for s in training_seeds(cfg, np.random.default_rng(0), N_TRAIN):
        train.reset(seed=s)
        drawn.add(train.goal_index)
    assert drawn <= set(train.goal_indices)
    held = set()
    for s in validation_seeds(cfg, cfg.eval.episodes):
        val.reset(seed=s)
        held.add(val.goal_index)
    assert held <= set(range(500))  # WebShop's test goals
    return set(train.goal_indices), held


def _sokoban_levels(cfg) -> tuple[set[str], set[str]]:
    from agentbench_crbc.envs.sokoban.tasks import task_key

    def keys(kwargs, seeds):
        env = EnvRecipe(cfg.env.id, kwargs).make()
        out = set()
        for s in seeds:
            env.reset(seed=s)
            out.add(task_key(env))
        return out

    drawn = keys(dict(cfg.env.kwargs), training_seeds(cfg, np.random.default_rng(0), N_TRAIN))
    return drawn, keys(validation_kwargs(cfg), validation_seeds(cfg, cfg.eval.episodes))


_TASKS = {"alfworld": _alfworld_games, "webshop": _webshop_goals, "sokoban": _sokoban_levels}


def _preset_cases() -> list:
    # Sokoban's split resets ~1,000 levels (8 s on a loaded 2-core Xeon): slow
    return [pytest.param(p, marks=pytest.mark.slow) if PRESETS[p]["env"]["name"] == "sokoban" else p
            for p in sorted(PRESETS)]


@pytest.mark.parametrize("preset", _preset_cases())
def test_no_validation_task_is_a_training_task(preset: str) -> None:
    cfg = load_config(preset=preset)
    assert cfg.env.name in _TASKS, f"preset {preset}: add how its family's tasks are compared"
    trained, held = _TASKS[cfg.env.name](cfg)
    if cfg.env.name != "sokoban":  # the CPU demo's 1-4-move levels repeat among 128 seeds (79 distinct)
        assert len(held) == cfg.eval.episodes  # distinct validation tasks, as many as asked
    assert held and not trained & held
    assert heldout_by_construction(cfg)


def test_official_alfworld_data_validates_on_valid_unseen(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("alfworld")
    pytest.importorskip("textworld")
    for split, n in (("train", 5), ("valid_seen", 2), ("valid_unseen", 3)):
        for i in range(n):
            game = tmp_path / "json_2.1.1" / split / f"pick_and_place_simple-Mug-None-Desk-{300 + i}" / f"trial_{i}"
            game.mkdir(parents=True)
            (game / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
            (game / "game.tw-pddl").write_text(json.dumps({"solvable": True}))
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    cfg = load_config(preset="alfworld-qwen2.5-1.5b")
    train = EnvRecipe(cfg.env.id, dict(cfg.env.kwargs)).make().unwrapped
    val = EnvRecipe(cfg.env.id, validation_kwargs(cfg)).make().unwrapped
    assert train.num_games == 5 and val.num_games == 3
    held = {val.game_path(s % val.num_games) for s in validation_seeds(cfg, 6)}
    assert {p.parent.parent.parent.name for p in held} == {"valid_unseen"}
    assert not held & {train.game_path(i) for i in range(train.num_games)}


def test_generated_unseen_games_use_floor_plans_training_never_uses() -> None:
    from agentbench_crbc.envs.alfworld.layouts import TASK_TYPES, scenes_for

    pytest.importorskip("alfworld")
    for task_type in TASK_TYPES:
        assert scenes_for("valid_unseen", task_type)
        assert not set(scenes_for("valid_unseen", task_type)) & set(scenes_for("train", task_type))


def test_summary_says_never_trained_on_only_when_it_holds() -> None:
    out = {"modes": {"t0.4": {"untrained": None, "before": 0.1, "after": 0.2, "gain": None}}}
    held = load_config(env="webshop")
    assert "never trained on (split=test)" in summary_lines(held, out)[0]
    # a training split chosen by hand is the user's: the summary no longer vouches for the split
    mixed = load_config(env="webshop", overrides=['env.kwargs={"split": "all"}'])
    assert not heldout_by_construction(mixed) and validation_kwargs(mixed)["split"] == "test"
    line = summary_lines(mixed, out)[0]
    assert "never trained on" not in line and "not checked against the training instructions" in line
    assert "never trained on" in summary_lines(load_config(), out)[0]  # Sokoban: split by canonical level


def test_summary_names_a_greedy_episode_only_when_one_ran() -> None:
    out = {"modes": {"t0.4": {"untrained": None, "before": 0.1, "after": 0.2, "gain": None}}}
    assert "when sampling, one greedy)" in summary_lines(load_config(), out)[0]
    line = summary_lines(load_config(overrides=["eval.greedy=false"]), out)[0]
    assert "each when sampling)" in line and "greedy" not in line
