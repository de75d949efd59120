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
    prompt_style=PromptStyle(admissible="quoted-comma"),
    extra="webshop",
    requires=("flask", "bm25s", "rapidfuzz"),
    play="agentbench_crbc.envs.webshop.play:run",
    play_modes=("browser", "terminal"),
    training={"env": {"template": "paper"}, "rollout": {"max_prompt_tokens": 1024, "max_response_tokens": 24},
              "sft": {"steps": 0}},
    score="mean final reward x 100",
    tokenizer_words=("search", "click", "buy", "now", "back", "to", "search", "next", "prev", "description",
                     "features", "reviews", "attributes", "price", "size", "color", "instruction", "[SEP]",
                     "[button]", "[button_]"),
    board_order=1,
)


@hookimpl
def abc_register_env_families(register: FamilyRegister) -> None:
    register.add(WEBSHOP)
