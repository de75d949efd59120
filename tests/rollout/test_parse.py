"""Action projection: valid forms, every invalid form flagged, and fuzzing that it never raises."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbench_crbc.family import style_of
from agentbench_crbc.rollout.episodes.parse import INVALID_ACTION, MAX_ACTION_CHARS, parse_action

SOKO = ["up", "down", "left", "right"]
SHOP = ["search[...]", "click[Buy Now]", "click[< Prev]"]
#: WebShop's template placeholders, from its family's prompt style (the parser itself knows none)
FREE = style_of("webshop").free_arguments


@pytest.mark.parametrize("text, admissible, action", [
    ("<think>box is left</think><action>left</action>", SOKO, "left"),
    ("<action> UP </action>", SOKO, "up"),
    ("<action>go to  Fridge 1</action>", ["go to fridge 1", "look"], "go to fridge 1"),
    ("<action>search[red  shoes]</action>", SHOP, "search[red  shoes]"),
    ("<action>Click[buy now]</action>", SHOP, "click[Buy Now]"),
    ("<action>anything goes</action>", None, "anything goes"),
])
def test_valid(text, admissible, action):
    p = parse_action(text, admissible, free_arguments=FREE)
    assert (p.action, p.valid, p.reason) == (action, True, "")


def test_free_arguments_come_from_the_family_not_the_parser():
    assert FREE == ("...", "<query>", "<your query>")
    assert parse_action("<action>search[red shoes]</action>", SHOP, free_arguments=FREE).valid
    # without the family's placeholders search[...] is one literal command, as for any other family
    assert parse_action("<action>search[red shoes]</action>", SHOP).reason == "not_admissible"
    assert parse_action("<action>search[...]</action>", SHOP).action == "search[...]"


@pytest.mark.parametrize("text, reason", [
    ("left", "no_tag"),
    ("<action>left", "unclosed"),
    ("<action><action>left</action></action>", "nested"),
    ("<action>left</action><action>up</action>", "multiple"),
    ("</action><action>left</action>", "multiple"),
    ("<action>   </action>", "empty"),
    ("<action>jump</action>", "not_admissible"),
    ("<action>search[]</action>", "not_admissible"),
    ("<action>向左</action>", "non_ascii"),
    ("<action>" + "x" * (MAX_ACTION_CHARS + 1) + "</action>", "too_long"),
    (None, "error"),
    (b"<action>left</action>", "error"),
])
def test_invalid(text, reason):
    p = parse_action(text, SOKO + SHOP[:1])
    assert (p.action, p.valid, p.reason) == (INVALID_ACTION, False, reason)


def test_megabyte_strings_are_linear():
    big = "<action>" * 200_000 + "left" + "</action>" * 200_000
    t = time.perf_counter()
    for text in (big, "x" * 2_000_000, "<action>" + "y" * 2_000_000 + "</action>", "<" * 1_000_000):
        assert not parse_action(text, SOKO).valid
    assert time.perf_counter() - t < 2.0


tags = st.sampled_from(["<action>", "</action>", "<think>", "</think>", "left", "up", "<", ">", "/", " "])
texts = st.one_of(st.text(), st.lists(st.one_of(tags, st.text(max_size=5)), max_size=30).map("".join))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.one_of(st.none(), st.lists(st.text(max_size=12), max_size=6)))
def test_fuzz_never_raises(text, admissible):
    p = parse_action(text, admissible)
    assert isinstance(p.valid, bool)
    if p.valid:
        assert text.count("<action>") == 1 and text.count("</action>") == 1
        if admissible is not None:
            assert p.action in admissible
    else:
        assert p.action == INVALID_ACTION and p.reason


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=10), st.integers(0, 3))
def test_fuzz_nested_and_repeated(word, depth):
    text = "<action>" * (depth + 1) + word + "</action>" * (depth + 1)
    p = parse_action(text, None)
    assert p.valid == (depth == 0 and bool(word.strip()) and word.strip().isascii() and word.strip().isprintable()
                       and "<action>" not in word and "</action>" not in word)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(st.text(max_size=20), st.sampled_from(["x" * 512, "x" * 513, " up ", "\u00e9", "<action>",
                                                        "a</action>b", "\t", "", " ", "go  to desk 1"])))
def test_the_family_contract_and_the_parser_agree_on_every_action(action):
    # #40 item 13: an action is answerable (constrained decoding offers it) exactly when its answer parses
    from agentbench_crbc.family import action_problem

    parsed = parse_action(f"<action>{action}</action>", [action])
    assert (action_problem(action) is None) == parsed.valid, (action, parsed)
