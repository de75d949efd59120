"""A faithful local WebShop (Yao et al., 2022): Flask app, BM25 search, WebShop's reward, text and browser modes.

``import agentbench_crbc.envs`` registers the id; Flask, bm25s and selenium are imported on first use::

    env = gymnasium.make("abc/WebShop-v0")                             # in process, ~1 ms a step
    env = gymnasium.make("abc/WebShop-v0", split="test")               # goals 0-499
    env = gymnasium.make("abc/WebShop-v0", mode="browser")             # headless Chromium clicking the app
    env = gymnasium.make("abc/WebShop-v0", items_path="items_shuffle_1000.json",
                         attributes_path="items_ins_v2_1000.json")     # WebShop's real products
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ENV_IDS",
    "Shop",
    "WebShopEnv",
    "expert_policy",
    "get_catalogue",
    "get_reward",
    "oracle_policy",
    "random_policy",
    "register_envs",
    "serve",
]

from .family import WEBSHOP

#: id -> step limit (the paper's 15 steps), derived from the family spec (:data:`family.WEBSHOP`).
ENV_IDS: dict[str, int] = {i.id: i.max_episode_steps for i in WEBSHOP.ids}

_LAZY = {
    "Shop": "app",
    "serve": "app",
    "WebShopEnv": "env",
    "get_catalogue": "catalogue",
    "get_reward": "reward",
    "oracle_policy": "oracle",
    "expert_policy": "oracle",
    "random_policy": "oracle",
}


def register_envs() -> None:
    """Register ``abc/WebShop-v0`` if not registered yet (a string entry point: imports nothing heavy)."""
    from agentbench_crbc.family import register_gym_ids

    register_gym_ids(WEBSHOP)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
