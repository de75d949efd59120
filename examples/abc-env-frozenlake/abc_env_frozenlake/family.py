"""The FrozenLake family spec and its registration hook (the one module the entry point names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentbench_crbc.family import EnvFamily, EnvId, PromptStyle
from agentbench_crbc.hookspecs import hookimpl

if TYPE_CHECKING:
    from agentbench_crbc.host import FamilyRegister

__all__ = ["FROZENLAKE", "abc_register_env_families"]

FROZENLAKE = EnvFamily(
    name="frozenlake",
    label="FrozenLake",
    ids=(EnvId("abc-frozenlake/FrozenLakeText-v0", "abc_env_frozenlake.env:FrozenLakeText", 20,
               {"size": 4, "is_slippery": False}),
         EnvId("abc-frozenlake/FrozenLakeText-8x8-v0", "abc_env_frozenlake.env:FrozenLakeText", 60,
               {"size": 8, "is_slippery": False})),
    default_id="abc-frozenlake/FrozenLakeText-v0",
    anchors=("cell", "text"),  # the env's anchor= names (abc_env_frozenlake.env.ANCHORS), the first the default
    expert="abc_env_frozenlake.expert:expert_policy",
    task_key="abc_env_frozenlake.expert:task_key",
    prompts="abc_env_frozenlake.prompts",
    prompt_style=PromptStyle(admissible="double-quoted", default_actions=("left", "down", "right", "up"),
                             compact="cells"),
    # a training default table: what `abc train --env frozenlake` changes from the CPU demo
    training={"env": {"template": "compact"}, "rollout": {"max_prompt_tokens": 256, "max_response_tokens": 8},
              "sft": {"steps": 0}},
    # no tokenizer_words: the grid letters and the action words are single tokens of the tiny tokenizer already
)


@hookimpl
def abc_register_env_families(register: FamilyRegister) -> None:
    register.add(FROZENLAKE)
