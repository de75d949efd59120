"""The run's first line says which environment family it trains and why that one."""

from __future__ import annotations

from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.eval import headline


def test_the_default_says_it_is_the_presets_family_and_how_to_train_another():
    assert headline(load_config()) == ("training abc/SokobanText-v0 (Sokoban: the cpu-demo preset's family; "
                                       "--env alfworld for ALFWorld, --env webshop for WebShop)")
    # a paper preset names its own family, and the others
    line = headline(load_config(preset="webshop-qwen2.5-1.5b"))
    assert line.startswith("training abc/WebShop-v0 (WebShop: the webshop-qwen2.5-1.5b preset's family; ")
    assert "--env sokoban for Sokoban" in line and "--env webshop" not in line


def test_a_chosen_family_says_what_it_replaced():
    assert headline(load_config(env="alfworld")) == ("training abc/ALFWorld-v0 (ALFWorld: chosen over the cpu-demo "
                                                     "preset's Sokoban)")
    assert headline(load_config(overrides=["env.id=abc/WebShop-v0"])).startswith("training abc/WebShop-v0 (WebShop: "
                                                                                  "chosen over")
