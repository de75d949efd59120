"""The ALFWorld environment family: its Gymnasium id, planner expert, subtasks, prompts and ``abc alfworld``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentbench_crbc.family import EnvFamily, EnvId, PromptStyle
from agentbench_crbc.hookspecs import hookimpl

if TYPE_CHECKING:
    from agentbench_crbc.host import FamilyRegister

__all__ = ["ALFWORLD", "abc_register_env_families"]

ALFWORLD = EnvFamily(
    name="alfworld",
    label="ALFWorld",
    # 50 steps, as the CRBC/GiGPO papers
    ids=(EnvId("abc/ALFWorld-v0", "agentbench_crbc.envs.alfworld.env:ALFWorldEnv", 50),),
    default_id="abc/ALFWorld-v0",
    anchors=("paper", "observation", "state"),
    expert="agentbench_crbc.envs.alfworld.expert:expert_policy",
    # the paper's Table 1 column order
    subtasks=("pick", "clean", "cool", "look", "heat", "pick2"),
    prompts="agentbench_crbc.envs.alfworld.prompts",
    prompt_style=PromptStyle(admissible="quoted-lines", task_pattern=r"Your task is to:\s*([^\n]*)",
                             hidden_actions=("help",)),
    extra="alfworld",
    requires=("alfworld", "textworld"),
    play="agentbench_crbc.envs.alfworld.play:run",
    play_modes=("terminal",),
    # free-text answers, as the paper trains ALFWorld (its admissible actions are a finite list, so the CPU demo
    # would constrain them: this table says no); they can turn invalid and absorb: the KL guard at lr 1e-3
    # (constrained Sokoban runs without it)
    training={"env": {"template": "paper"}, "rollout": {"max_prompt_tokens": 1024, "max_response_tokens": 24,
                                                        "constrain": False},
              "sft": {"steps": 0}, "optim": {"lr": 1e-3, "target_kl": 0.1}},
    tokenizer_words=("go", "to", "take", "from", "put", "in", "on", "open", "close", "toggle", "clean", "heat",
                     "cool", "use", "examine", "look", "inventory", "with", "move", "fridge", "microwave",
                     "sinkbasin", "countertop", "cabinet", "drawer", "shelf", "desk", "desklamp", "sidetable",
                     "dresser", "garbagecan", "Your", "task", "is", "to:", "Nothing", "happens.", "You", "arrive",
                     "at", "You", "see", "a"),
    commands="agentbench_crbc.envs.alfworld.cli:register",
    task_word="game",
    # validation plays ALFWorld's out-of-distribution split (the papers' held-out set): generated games in the 6
    # floor plans of each room type that training never uses (official data: its valid_unseen folder); explicit
    # training game files are not carried over
    heldout_kwargs={"split": "valid_unseen", "game_files": None},
    board_order=0,
    # the CRBC paper's ALFWorld settings (verl-agent's run_alfworld.sh: 16 groups, 2048-token prompts, 256 x G)
    presets={
        "alfworld-qwen2.5-1.5b": {
            "base": "paper", "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
            "rollout": {"groups": 16, "max_prompt_tokens": 2048}, "optim": {"mini_batch_size": 2048},
        },
        "alfworld-qwen2.5-7b": {
            "base": "paper", "model": {"name": "Qwen/Qwen2.5-7B-Instruct"},
            "rollout": {"groups": 16, "max_prompt_tokens": 2048}, "optim": {"mini_batch_size": 2048},
        },
    },
)


@hookimpl
def abc_register_env_families(register: FamilyRegister) -> None:
    register.add(ALFWORLD)
