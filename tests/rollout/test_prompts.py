"""Prompt templates: the paper's per-env prompts, history, overrides, the compact tiny-model prompt, VLM images."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("transformers")

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.family import PromptStyle, style_of
from agentbench_crbc.rollout.engines.models import tiny_tokenizer
from agentbench_crbc.rollout.episodes.prompts import PromptBuilder, task_description

GRID = "######\n#_OX_#\n#__P_#\n#____#\n#____#\n######"


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def text(tok, prompt):
    return tok.decode(list(prompt.ids))


def test_the_builder_finds_its_family_through_the_one_resolver(tok):
    assert [PromptBuilder(tok, e).family for e in ("abc/Sokoban-v0", "abc/SokobanText-7x7-2b-v0", "alfworld",
                                                   "abc/WebShop-v0", "CartPole-v1")] == [
        "sokoban", "sokoban", "alfworld", "webshop", "generic"]
    assert style_of("CartPole-v1") == PromptStyle() and style_of("sokoban").compact == "cells"


def test_family_conventions_live_in_the_prompt_style(tok):
    """The task pattern and hidden actions are the family's: a generic env keeps 'help' and parses no task."""
    obs = "You are in a room.\n\nYour task is to: put a mug in desk."
    assert task_description(obs, {}) == ""  # the core knows no family's pattern
    assert task_description(obs, {}, style_of("alfworld").task_pattern) == "put a mug in desk."
    info = {"admissible_actions": ["look", "help"]}
    assert style_of("alfworld").visible(info["admissible_actions"]) == ["look"]
    assert PromptStyle().visible(info["admissible_actions"]) == ["look", "help"]
    generic = text(tok, PromptBuilder(tok, "CartPole-v1").build("a pole", info))
    assert "'help'" in generic


def test_sokoban_paper_prompt_first_step_and_history(tok):
    pb = PromptBuilder(tok, "abc/SokobanText-v0")
    first = text(tok, pb.build(GRID, {"admissible_actions": ["up", "down", "left", "right"]}))
    assert first.startswith("<|im_start|>user\nYou are an expert agent operating in the Sokoban environment.")
    assert first.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert GRID in first and "<think> </think>" in first and "<action> </action>" in first
    assert 'Your admissible actions are ["up", "down", "left", "right"]' in first
    assert "Prior to this step" not in first
    hist = [("g0", "up"), ("g1", "left"), ("g2", "down")]
    later = text(tok, pb.build(GRID, {}, hist, step=3))
    assert "you have already taken 3 step(s)" in later and "most recent 2 observations" in later
    assert "[Observation 2: 'g1', Action 2: 'left']\n[Observation 3: 'g2', Action 3: 'down']" in later
    assert "g0" not in later and "You are now at step 4" in later


def test_alfworld_and_webshop_prompts(tok):
    obs = "-= Welcome =-\nYou are in a room.\n\nYour task is to: put a mug in desk."
    info = {"admissible_actions": ["go to desk 1", "look", "help"]}
    task = task_description(obs, info, style_of("alfworld").task_pattern)
    assert task == "put a mug in desk."
    p = text(tok, PromptBuilder(tok, "alfworld").build("You arrive at desk 1.", info, [(obs, "look")], 1, task))
    assert "ALFRED Embodied Environment. Your task is to: put a mug in desk." in p
    assert "[\'go to desk 1\'\n \'look\']" in p and "'help'" not in p
    shop = "WebShop [SEP] Instruction: [SEP] red shoes under 30 dollars [SEP] Search"
    shop_pattern = style_of("webshop").task_pattern
    assert task_description(shop, {}, shop_pattern) == "red shoes under 30 dollars"
    assert task_description(shop, {"instruction": "blue hat"}, shop_pattern) == "blue hat"
    w = text(tok, PromptBuilder(tok, "webshop").build(shop, {"admissible_actions": ["search[<query>]"]}, [], 0,
                                                      "red shoes"))
    assert "WebShop e-commerce platform.\nYour task is to: red shoes." in w and "'search[<query>]'" in w


def test_user_override_folder_and_errors(tok, tmp_path, monkeypatch):
    (tmp_path / "sokoban_first.txt").write_text("Board:\n{current_observation}\nMove with <action>dir</action>.")
    p = text(tok, PromptBuilder(tok, "sokoban", template=str(tmp_path)).build(GRID, {}))
    assert "Board:\n" + GRID + "\nMove with <action>dir</action>." in p and "expert agent" not in p
    monkeypatch.setenv("ABC_PROMPT_DIR", str(tmp_path))
    assert "Board:" in text(tok, PromptBuilder(tok, "sokoban").build(GRID, {}))
    (tmp_path / "sokoban_first.txt").write_text("{nope}")
    with pytest.raises(ConfigError, match="placeholders are"):
        PromptBuilder(tok, "sokoban").build(GRID, {})
    with pytest.raises(ConfigError, match="compact"):
        PromptBuilder(tok, "sokoban", template="no-such-template")


def test_max_prompt_tokens_drops_history_then_middle(tok):
    pb = PromptBuilder(tok, "alfworld", max_prompt_tokens=400)
    hist = [("x" * 300, "look"), ("y" * 300, "look")]
    p = pb.build("z" * 100, {}, hist, 2, "t")
    assert len(p.ids) <= 400
    assert "xxxx" not in text(tok, p)
    tiny = PromptBuilder(tok, "alfworld", max_prompt_tokens=50).build("w " * 500, {}, [], 0, "t")
    assert len(tiny.ids) == 50


def test_compact_sokoban_is_one_token_per_cell_and_fast(tok):
    pb = PromptBuilder(tok, "abc/SokobanText-v0", template="compact")
    p = pb.build(GRID, {})
    cells = [tok.decode([i]) for i in p.ids]
    body = "".join(cells)
    assert GRID in body and len(p.ids) == len(GRID) + 8  # ChatML wrapping: 8 tokens
    assert pb.build(GRID, {}) == p
    pix = pb.build(np.zeros((8, 8, 3), np.uint8), {"text": GRID})  # pixel env: its info text
    assert pix.ids == p.ids
    t = time.perf_counter()
    for _ in range(1000):
        pb.build(GRID, {})
    assert time.perf_counter() - t < 1.0


def test_vision_prompt_expands_image_pads(tok):
    from agentbench_crbc.rollout.engines.models import tiny_qwen2_5_vl

    _, proc = tiny_qwen2_5_vl(tok)
    img = np.random.default_rng(0).integers(0, 255, (96, 96, 3), dtype=np.uint8)
    p = PromptBuilder(tok, "abc/Sokoban-v0", image_processor=proc).build(img, {"text": GRID})
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    grid = proc(images=[img], return_tensors="np")["image_grid_thw"][0]
    assert p.ids.count(pad) == int(np.prod(grid)) // 4 > 1
    assert len(p.images) == 1 and p.images[0] is img
    s = text(tok, p)
    assert "<|vision_start|>" + "<|image_pad|>" * p.ids.count(pad) + "<|vision_end|>" in s
    assert GRID not in s  # the image replaces the text grid
    # without an image processor the same pixel observation goes in as its text grid
    assert GRID in text(tok, PromptBuilder(tok, "abc/Sokoban-v0").build(img, {"text": GRID}))


def test_unknown_ids_get_the_generic_templates_and_style(tok):
    pb = PromptBuilder(tok, "CartPole-v1")
    p = text(tok, pb.build("pole up", {"admissible_actions": ["push left", "push right"]}))
    assert pb.family == "generic" and "interactive text environment" in p
    assert "['push left'\n 'push right']" in p  # the default style: quoted, one per line
    assert "Sokoban" not in p and "ALFRED" not in p


@pytest.mark.parametrize("field", ["{task_description.nope}", "{admissible_actions[0][1]}", "{step_count.real.x}",
                                   "{current_step:>{nope}}", "{0}"])
def test_a_template_field_that_cannot_render_is_one_config_error(tok, tmp_path, field):
    # #31 item 13: {task_description.nope} raised AttributeError through `abc rollout` and the trainer
    (tmp_path / "sokoban_first.txt").write_text(f"Board {field}\n{{current_observation}}")
    with pytest.raises(ConfigError, match=r"prompt template sokoban_first.txt: .*placeholders are"):
        PromptBuilder(tok, "sokoban", template=str(tmp_path)).build(GRID, {})
