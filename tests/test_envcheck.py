"""``check_env_family``: a well-behaved toy family passes; each broken promise fails with a message naming it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentbench_crbc.errors import PluginError
from agentbench_crbc.family import EnvFamily, EnvId, PromptStyle
from agentbench_crbc.testing import check_env_family
from tests.rollout.toyenv import Corridor

TOY = EnvFamily(
    name="toycorridor",
    label="Corridor",
    ids=(EnvId("test-family/Corridor-v0", "tests.rollout.toyenv:Corridor", 12, {"length": 3}),),
    default_id="test-family/Corridor-v0",
    anchors=("position",),
    expert="tests.rollout.toyenv:expert_policy",
    subtasks=("walk",),
    prompt_style=PromptStyle(default_actions=("left", "right", "stay")),
)


def never_there(env: Any) -> Any:
    return lambda obs, info: "left"


def test_a_good_family_passes() -> None:
    check_env_family(TOY)


def test_without_expert_a_wanderer_checks_the_step_info() -> None:
    check_env_family(dataclasses.replace(TOY, expert=None))


@pytest.mark.parametrize(("change", "message"), [
    ({"expert": "tests.test_envcheck:never_there"}, "the expert did not succeed on seed 0 within 12 steps"),
    ({"subtasks": ("run",)}, "subtask 'walk' is not one of the family's"),
    ({"prompts": "agentbench_crbc.rollout"}, "no template toycorridor.txt"),
    ({"prompts": "toy_corridor.prompts"}, r"^env family 'toycorridor': prompts package 'toy_corridor.prompts' does "
                                          r"not import \(no module named 'toy_corridor'\); set EnvFamily.prompts"),
    ({"requires": ("numpy",)}, "names no extra"),
    ({"expert": "tests.rollout.toyenv:ACTIONS"}, "is not callable"),
])
def test_broken_promises_are_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_env_family(dataclasses.replace(TOY, **change))


def test_a_prompts_package_that_does_not_import_is_one_line() -> None:
    bad = dataclasses.replace(TOY, prompts="toy_corridor.prompts")
    with pytest.raises(PluginError, match=r"prompts package 'toy_corridor.prompts' does not import") as info:
        bad.prompt_folder()  # what the prompt builder reads templates from
    assert "\n" not in str(info.value) and "holding toycorridor.txt and toycorridor_first.txt" in str(info.value)


def test_a_step_limit_registered_elsewhere_is_caught() -> None:
    other = dataclasses.replace(TOY, ids=(EnvId("test-family/Corridor-v0", "tests.rollout.toyenv:Corridor", 7),))
    check_env_family(TOY)  # registers the id with 12 steps
    with pytest.raises(AssertionError, match="another step limit"):
        check_env_family(other)


def test_unhashable_anchor_is_caught() -> None:
    fam = dataclasses.replace(TOY, ids=(EnvId("test-family/ListAnchor-v0", "tests.test_envcheck:ListAnchor", 12),),
                              default_id="test-family/ListAnchor-v0")
    with pytest.raises(AssertionError, match="not hashable"):
        check_env_family(fam)


def test_nondeterministic_reset_is_caught() -> None:
    fam = dataclasses.replace(TOY, ids=(EnvId("test-family/Drift-v0", "tests.test_envcheck:Drift", 12),),
                              default_id="test-family/Drift-v0", expert=None)
    with pytest.raises(AssertionError, match="reset"):
        check_env_family(fam, check_api=False)


def test_spec_errors_at_construction() -> None:
    with pytest.raises(PluginError, match="default_id"):
        dataclasses.replace(TOY, default_id="test-family/Nope-v0")
    with pytest.raises(PluginError, match="admissible"):
        PromptStyle(admissible="bullets")
    with pytest.raises(PluginError, match="lowercase"):
        dataclasses.replace(TOY, name="Toy")


class ListAnchor(Corridor):
    def _info(self, valid: bool = True) -> dict[str, Any]:
        return {**super()._info(valid), "anchor": [self.pos]}


class Drift(Corridor):
    calls = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        Drift.calls += 1
        return super().reset(seed=(seed or 0) + Drift.calls, options=options)


def test_an_id_listed_twice_is_refused() -> None:
    with pytest.raises(PluginError, match="twice"):
        dataclasses.replace(TOY, ids=TOY.ids * 2)


class Unanswerable(Corridor):
    """Lists one action the action parser always rejects (#40 item 13)."""

    def _info(self, valid: bool = True) -> dict[str, Any]:
        return {**super()._info(valid), "admissible_actions": ["left", "right", "stay", "caf\u00e9"]}


@pytest.mark.parametrize("bad", ["caf\u00e9", "x" * 513, "   ", "", "<action>up</action>", "tab\there"])
def test_an_action_the_parser_rejects_is_refused_by_the_family_contract(bad: str) -> None:
    from agentbench_crbc.family import action_problem

    assert action_problem(bad) is not None
    with pytest.raises(PluginError, match=r"default action .* the action parser accepts printable ASCII"):
        PromptStyle(default_actions=("left", bad))
    assert action_problem("go to fridge 1") is None and action_problem("x" * 512) is None


def test_an_env_listing_an_unanswerable_admissible_action_fails_the_check() -> None:
    fam = dataclasses.replace(TOY, ids=(EnvId("test-family/Unanswerable-v0", "tests.test_envcheck:Unanswerable",
                                              12),), default_id="test-family/Unanswerable-v0")
    with pytest.raises(AssertionError, match=r"admissible action 'caf\u00e9' is not printable ASCII; the action "
                                             r"parser never accepts it"):
        check_env_family(fam, check_api=False)
