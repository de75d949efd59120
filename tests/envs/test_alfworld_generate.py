"""ALFWorld game generation: pure, deterministic, room splits, goals for all six families (no engine calls)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("alfworld")

from agentbench_crbc.envs.alfworld.generate import POOL_SIZES, build_game, default_cache_dir, game_dir
from agentbench_crbc.envs.alfworld.layouts import (
    PAPER_NAMES,
    TASK_TYPES,
    load_layout,
    scenes_for,
    task_type_of,
)
from agentbench_crbc.errors import ConfigError


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_build_game_is_a_pure_function_of_its_arguments(task_type: str) -> None:
    a, b = build_game("train", task_type, 5), build_game("train", task_type, 5)
    assert a == b
    assert build_game("train", task_type, 6).pddl_problem != a.pddl_problem
    assert build_game("valid_seen", task_type, 5).pddl_problem != a.pddl_problem
    assert a.traj_data["task_type"] == task_type
    assert a.traj_data["subtask"] == PAPER_NAMES[task_type]
    params = a.traj_data["pddl_params"]
    assert params["object_target"] and (params["parent_target"] or task_type == "look_at_obj_in_light")
    assert a.walkthrough, "the generator writes the walkthrough of its own placement"


def test_goals_and_facts_follow_alfworlds_rules() -> None:
    look = build_game("train", "look_at_obj_in_light", 0)
    assert look.traj_data["pddl_params"]["toggle_target"] == "DeskLamp"
    assert look.traj_data["pddl_params"]["parent_target"] == ""
    assert "(toggleable desklamp" in look.pddl_problem.lower()
    assert "(pickupable desklamp" not in look.pddl_problem.lower()
    assert look.walkthrough[-1][0] == "use {}"
    pick2 = build_game("train", "pick_two_obj_and_place", 0)
    moves = [ids for t, ids in pick2.walkthrough if t.startswith("move")]
    assert len(moves) == 2 and moves[0][0] != moves[1][0] and moves[0][1] == moves[1][1]  # one receptacle
    heat = build_game("train", "pick_heat_then_place_in_recep", 0)
    assert any(t.startswith("heat") for t, _ in heat.walkthrough)
    assert heat.scene < 100  # kitchens only, as ALFRED
    assert "(:domain alfred)" in heat.pddl_problem and "|" not in heat.pddl_problem


def test_valid_unseen_rooms_never_occur_in_training() -> None:
    for task_type in TASK_TYPES:
        train, unseen = set(scenes_for("train", task_type)), set(scenes_for("valid_unseen", task_type))
        assert train and unseen and not train & unseen
        assert set(scenes_for("valid_seen", task_type)) == train
        assert build_game("valid_unseen", task_type, 1).scene in unseen
    # every look room has a desk lamp
    assert all("DeskLamp" in load_layout(s).object_types for s in scenes_for("train", "look_at_obj_in_light"))


def test_task_names_and_sizes() -> None:
    assert task_type_of("pick2") == "pick_two_obj_and_place"
    assert task_type_of("pick_and_place_simple") == "pick_and_place_simple"
    with pytest.raises(ConfigError, match="pick2"):
        task_type_of("pick3")
    assert POOL_SIZES == {"train": 3553, "valid_seen": 140, "valid_unseen": 134}


def test_cache_folder_follows_xdg_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("ABC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "agentbench_crbc" / "alfworld"
    monkeypatch.setenv("ABC_CACHE_DIR", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "alfworld"
    assert game_dir(tmp_path, "train", "pick_and_place_simple", 7).name == "00007"


def test_importing_the_envs_registers_without_loading_the_engine() -> None:
    code = ("import sys, gymnasium, agentbench_crbc.envs; "
            "assert 'abc/ALFWorld-v0' in gymnasium.registry; "
            "assert gymnasium.registry['abc/ALFWorld-v0'].max_episode_steps == 50; "
            "assert not {'alfworld', 'textworld'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_generate_writes_alfworld_game_folders(tmp_path) -> None:
    from agentbench_crbc.cli import main

    assert main(["alfworld", "generate", "--out", str(tmp_path), "--n", "1", "--seed", "36", "--task-type", "pick",
                 "-q"]) == 0
    folder = game_dir(tmp_path, "train", "pick_and_place_simple", 36)
    game = json.loads((folder / "game.tw-pddl").read_text())
    assert game["solvable"] is True and game["walkthrough"]
    assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
    assert "UNKNOWN GOAL" not in game["grammar"]
    assert json.loads((folder / "traj_data.json").read_text())["task_type"] == "pick_and_place_simple"
    assert (folder / "initial_state.pddl").read_text() == game["pddl_problem"]
    assert main(["alfworld", "generate", "--out", str(tmp_path), "--n", "0"]) == 2


def test_games_are_identical_across_processes_and_hash_seeds() -> None:
    code = ("import hashlib; from agentbench_crbc.envs.alfworld.generate import build_game as b; "
            "from agentbench_crbc.envs.alfworld.layouts import TASK_TYPES as T; "
            "print(hashlib.sha1(''.join(b('train', t, 2).pddl_problem + str(b('train', t, 2).walkthrough) "
            "for t in T).encode()).hexdigest())")
    outs = {subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1


def test_cli_generate_with_jobs_writes_the_same_files(tmp_path) -> None:
    from agentbench_crbc.cli import main

    for jobs, out in (("1", tmp_path / "one"), ("2", tmp_path / "two")):
        assert main(["alfworld", "generate", "--out", str(out), "--n", "4", "--seed", "40", "--task-type", "pick",
                     "--task-type", "heat", "--jobs", jobs, "-q"]) == 0
    one = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    two = sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two").rglob("*") if p.is_file())
    assert one == two and len(one) == 4 * 3  # 2 games of each type, three files per game
    assert all((tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes() for f in one)
    assert main(["alfworld", "generate", "--out", str(tmp_path), "--jobs", "0"]) == 2
