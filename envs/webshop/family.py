"""The WebShop environment family: its Gymnasium id, oracle expert, prompts, training defaults and play UI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentbench_crbc.family import EnvFamily, EnvId, PromptStyle
from agentbench_crbc.hookspecs import hookimpl

if TYPE_CHECKING:
    from agentbench_crbc.host import FamilyRegister

__all__ = ["WEBSHOP", "abc_register_env_families"]

WEBSHOP = EnvFamily(
    name="webshop",
    label="WebShop",
    # the paper's 15 steps
    ids=(EnvId("abc/WebShop-v0", "agentbench_crbc.envs.webshop.env:WebShopEnv", 15,
               {"mode": "text", "split": "train", "anchor": "page"}),),
    default_id="abc/WebShop-v0",
    anchors=("page", "state"),
    expert="agentbench_crbc.envs.webshop.oracle:oracle_policy",
    prompts="agentbench_crbc.envs.webshop.prompts",
    prompt_style=PromptStyle(admissible="quoted-comma",
                             task_pattern=r"(?s)Instruction:\s*(?:\[SEP\])?\s*(.*?)\s*\[SEP\]",
                             free_arguments=("...", "<query>", "<your query>")),
    extra="webshop",
    requires=("flask", "bm25s", "rapidfuzz"),
    play="agentbench_crbc.envs.webshop.play:run",
    play_modes=("browser", "terminal"),
    # free-text answers can turn invalid and absorb: the KL guard at lr 1e-3 (constrained Sokoban runs without it)
    training={"env": {"template": "paper"}, "rollout": {"max_prompt_tokens": 1024, "max_response_tokens": 24},
              "sft": {"steps": 0}, "optim": {"lr": 1e-3, "target_kl": 0.1}},
    score="mean final reward x 100",
    tokenizer_words=("search", "click", "buy", "now", "back", "to", "search", "next", "prev", "description",
                     "features", "reviews", "attributes", "price", "size", "color", "instruction", "[SEP]",
                     "[button]", "[button_]"),
    task_word="instruction",
    # validation plays the test goals (indices 0-499), training the train split (goal 500 on)
    heldout_kwargs={"split": "test"},
    board_order=1,
    # a remote client may pick a goal by its index (the env range-checks it); nothing else of reset's options
    client_reset_options=("goal_index",),
    # the CRBC paper's WebShop settings (verl-agent's run_webshop.sh: 16 groups, 5120-token prompts, 8 x G)
    presets={
        "webshop-qwen2.5-1.5b": {
            "base": "paper", "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
            "rollout": {"groups": 16, "max_prompt_tokens": 5120}, "optim": {"mini_batch_size": 64},
        },
        "webshop-qwen2.5-7b": {
            "base": "paper", "model": {"name": "Qwen/Qwen2.5-7B-Instruct"},
            "rollout": {"groups": 16, "max_prompt_tokens": 5120}, "optim": {"mini_batch_size": 64},
        },
    },
)


@hookimpl
def abc_register_env_families(register: FamilyRegister) -> None:
    register.add(WEBSHOP)
