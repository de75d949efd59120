"""The Sokoban environment family: its Gymnasium ids, expert, task key, prompts, imitation data and tabular twin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentbench_crbc.family import EnvFamily, EnvId, PromptStyle
from agentbench_crbc.hookspecs import hookimpl

from .tasks import PLAN_SUBTASKS, SIZE_SUBTASKS

if TYPE_CHECKING:
    from agentbench_crbc.host import FamilyRegister

__all__ = ["SOKOBAN", "abc_register_env_families"]

_ENTRY_POINT = "agentbench_crbc.envs.sokoban.env:SokobanEnv"


def _id(env_id: str, size: int, boxes: int, steps: int, obs_mode: str) -> EnvId:
    return EnvId(env_id, _ENTRY_POINT, steps, {"size": size, "num_boxes": boxes, "max_steps": steps,
                                               "obs_mode": obs_mode},
                 observation="text" if obs_mode == "text" else "rgb")


SOKOBAN = EnvFamily(
    name="sokoban",
    label="Sokoban",
    ids=(
        _id("abc/Sokoban-v0", 6, 1, 15, "rgb"),
        _id("abc/SokobanText-v0", 6, 1, 15, "text"),
        _id("abc/SokobanTiny-v0", 6, 1, 15, "tiny_rgb"),
        _id("abc/Sokoban-7x7-2b-v0", 7, 2, 30, "rgb"),
        _id("abc/SokobanText-7x7-2b-v0", 7, 2, 30, "text"),
        _id("abc/Sokoban-10x10-3b-v0", 10, 3, 100, "rgb"),
        _id("abc/Sokoban-10x10-4b-v0", 10, 4, 120, "rgb"),
    ),
    # the text env the trainer uses; the pixel env is chosen by its id
    default_id="abc/SokobanText-v0",
    anchors=("state", "pixels", "text"),
    expert="agentbench_crbc.envs.sokoban.solver:expert_policy",
    optimal_actions="agentbench_crbc.envs.sokoban.solver:env_optimal_actions",
    task_key="agentbench_crbc.envs.sokoban.tasks:task_key",
    # a level's subtask is its optimal plan length (the 10 x 10 ids: size and boxes; see SokobanEnv's `subtask`)
    subtasks=PLAN_SUBTASKS + SIZE_SUBTASKS,
    prompts="agentbench_crbc.envs.sokoban.prompts",
    prompt_style=PromptStyle(admissible="double-quoted", default_actions=("up", "down", "left", "right"),
                             compact="cells"),
    extra="sokoban",
    requires=(),
    extra_modules=("pygame",),
    imitation="agentbench_crbc.envs.sokoban.imitation:imitation_data",
    tabular="agentbench_crbc.envs.sokoban.tabular:TWIN",
    play="agentbench_crbc.envs.sokoban.play:run",
    play_modes=("window", "terminal"),
    score="mean episode return",
    tokenizer_words=("up", "down", "left", "right", "<action>up</action>", "<action>down</action>",
                     "<action>left</action>", "<action>right</action>", "wall", "floor", "target", "box", "player"),
    tokenizer_symbols="#_OX√PS.@$*+ ",
    task_word="level",
    board_order=2,
    # the CPU demo (the default of `abc train`), and the paper's Sokoban with Qwen2.5-VL on RGB frames (32 groups)
    presets={
        # the CPU demo: levels of 1-4 moves (8 steps allowed) in the egocentric view (the board re-centred on the
        # player, so "box above me, target above it" is always the same cells), answers restricted to the 4 moves
        "cpu-demo": {"base": "cpu-demo", "env": {"kwargs": {"view": "egocentric", "max_moves": 4}, "max_steps": 8},
                     "rollout": {"constrain": True}},
        "sokoban-qwen2.5-vl-3b": {
            "base": "paper", "model": {"name": "Qwen/Qwen2.5-VL-3B-Instruct"},
            "rollout": {"groups": 32, "max_prompt_tokens": 1024}, "optim": {"mini_batch_size": 512},
            "env": {"id": "abc/Sokoban-v0"},  # RGB observations for the VL model
        },
    },
)


@hookimpl
def abc_register_env_families(register: FamilyRegister) -> None:
    register.add(SOKOBAN)
