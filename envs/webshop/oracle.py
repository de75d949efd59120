"""The oracle (expert) policy: it reads the goal, finds the goal's product, picks the goal's options and buys.

It acts only through admissible actions, reading the page like an agent would; the goal (asin, options) is the one
thing it knows that an agent does not. Every synthetic goal is met by its own product, so it scores 1.0 within
WebShop's 15 steps: search (1) + up to 4 result pages + product (1) + options (<= 3) + Buy Now (1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

__all__ = ["expert_policy", "oracle_policy", "random_policy"]


def oracle_policy(env: gym.Env) -> Callable[[str, dict[str, Any]], str]:
    """A callable ``(obs, info) -> action`` that buys ``env``'s goal product with the goal's options.

    :param env: a WebShop env (wrapped or not); the policy reads the current goal and page from it at every call.
    """
    base: Any = env.unwrapped

    def act(obs: str, info: dict[str, Any]) -> str:
        goal, page = base.goal, base.page
        actions = info.get("admissible_actions") or base.admissible_actions
        asin = goal["asin"].lower()
        if page.has_search_bar:
            return f"search[{goal['name']}]"
        state = base.page_state
        endpoint, on_asin = state[0], state[1].lower()
        if endpoint == "search_results":
            if f"click[{asin}]" in actions:
                return f"click[{asin}]"
            if "click[next >]" in actions:
                return "click[next >]"
            return "click[back to search]"
        if endpoint in ("item_page", "item_sub_page") and on_asin != asin:
            return "click[< prev]"
        if endpoint == "item_sub_page":
            return "click[< prev]"
        if endpoint == "item_page":
            selected = dict(page.selected)
            for name, value in goal["goal_options"].items():
                if selected.get(name) != value and f"click[{value.lower()}]" in actions:
                    return f"click[{value.lower()}]"
            return "click[buy now]"
        return "click[back to search]"

    return act


expert_policy = oracle_policy


def random_policy(env: gym.Env, seed: int = 0) -> Callable[[str, dict[str, Any]], str]:
    """A baseline that picks a uniformly random admissible action (searches use a random instruction word)."""
    import random

    rng = random.Random(seed)
    base: Any = env.unwrapped

    def act(obs: str, info: dict[str, Any]) -> str:
        action = rng.choice(info["admissible_actions"])
        if action.startswith("search["):
            words = base.goal.get("instruction_text", "shop").split()
            return f"search[{' '.join(rng.sample(words, min(3, len(words))))}]"
        return action

    return act
