"""Family knowledge lives behind ``EnvFamily`` / ``PromptStyle``: the core holds no family's task pattern, hidden
or template actions or default moves, and reads them from the family it resolves (one resolver)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench_crbc.errors import PluginError
from agentbench_crbc.family import PromptStyle, style_of
from agentbench_crbc.rollout.engines.factory import EngineRequest, build_engine
from agentbench_crbc.rollout.episodes.base import SamplingParams

CORE = Path(__file__).resolve().parents[2] / "agentbench_crbc"
#: conventions of one family each, that once sat in core modules
CONVENTIONS = ("Your task is to", "Instruction:", "<your query>", '!= "help"', "\"look\"", 'DEFAULT_ACTIONS')


#: family.py documents the fields with the built-in families' values; the rooms MDP has its own ``look`` action
EXEMPT = {"family.py", "tabular/rooms.py"}


def test_no_core_module_holds_a_family_convention():
    found = [f"{p.relative_to(CORE)}: {c}" for p in sorted(CORE.rglob("*.py")) for c in CONVENTIONS
             if str(p.relative_to(CORE)) not in EXEMPT and c in p.read_text(encoding="utf-8")]
    assert found == []


def test_the_random_engine_plays_the_familys_default_and_template_actions():
    sok = build_engine("random", EngineRequest(env_id="abc/SokobanText-v0"))
    assert sok.actions == ("up", "down", "left", "right") == style_of("sokoban").default_actions
    assert build_engine("random", EngineRequest()).actions == ()  # no family: no made-up moves
    shop = build_engine("random", EngineRequest(env_id="abc/WebShop-v0"))
    info = {"admissible_actions": ["search[<query>]"]}
    assert shop.act(["obs"], [info], [0], SamplingParams(seed=0)) == ["<action>search[item]</action>"]
    generic = build_engine("random", EngineRequest())
    assert generic.act(["obs"], [info], [0], SamplingParams(seed=0)) == ["<action>search[<query>]</action>"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"task_pattern": "Task: ("}, "is no regular expression"),
    ({"task_pattern": "Task: .*"}, "has no group"),
    ({"hidden_actions": "help"}, "must be a tuple of non-empty strings"),
    ({"free_arguments": ("",)}, "must be a tuple of non-empty strings"),
])
def test_a_malformed_prompt_style_is_one_line_naming_the_field(kwargs, message):
    with pytest.raises(PluginError, match=message):
        PromptStyle(**kwargs)


def test_builtin_families_declare_their_conventions():
    alf, shop = style_of("alfworld"), style_of("webshop")
    assert alf.hidden_actions == ("help",) and alf.task_pattern.startswith("Your task is to")
    assert shop.free_arguments == ("...", "<query>", "<your query>") and "Instruction" in shop.task_pattern
    assert style_of("sokoban").hidden_actions == () and style_of("sokoban").free_arguments == ()
