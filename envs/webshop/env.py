"""``abc/WebShop-v0``: WebShop as a Gymnasium env, in process (``mode="text"``) or in headless Chromium."""

from __future__ import annotations

import dataclasses
import re
import secrets
import string
import threading
import weakref
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.family import MAX_ACTION_CHARS

from .anchors import get_anchor_extractor
from .app import Shop, parse_options, split_query
from .catalogue import Catalogue, get_catalogue
from .goals import goal_index, split_indices
from .text import Page, parse_page

__all__ = ["MAX_OBS_CHARS", "MODES", "WebShopEnv", "WebShopOptions", "get_shop"]

MODES = ("text", "browser")
MAX_OBS_CHARS = 16_384
_ACTION = re.compile(r"\s*([A-Za-z_]+)\s*\[(.+)\]\s*", re.S)

_SHOPS: weakref.WeakKeyDictionary[Catalogue, dict[bool, Shop]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def get_shop(catalogue: Catalogue, show_attrs: bool = False) -> Shop:
    """The process-wide :class:`Shop` of ``catalogue`` (one search index, shared by every env)."""
    with _LOCK:
        shops = _SHOPS.setdefault(catalogue, {})
        if show_attrs not in shops:
            shops[show_attrs] = Shop(catalogue, show_attrs=show_attrs)
        return shops[show_attrs]


@dataclass(frozen=True)
class WebShopOptions:
    """The options of :class:`WebShopEnv` (``env.kwargs``; ``render_mode`` is Gymnasium's own).

    :param mode: ``text`` (in process, no sockets) or ``browser`` (headless Chromium clicking the served app).
    :param split: goals to draw from: ``train`` (goal 500 on), ``test`` (goals 0-499) or ``all``.
    :param anchor: anchor extractor: ``page`` (the formatted page, the paper's) or ``state`` (canonical page state).
    :param n_products: generated catalogue size; ``catalogue_seed`` its seed.
    :param items_path: WebShop's ``items_shuffle_1000.json``; with ``attributes_path`` (``items_ins_v2_1000.json``)
        the real products replace the generated ones.
    :param show_attrs: show the Attributes tab on item pages.
    :param max_obs_chars: the longest observation (a longer page is cut).
    """

    mode: str = "text"
    split: str = "train"
    anchor: str = "page"
    n_products: int = 1000
    catalogue_seed: int = 0
    items_path: str | Path | None = None
    attributes_path: str | Path | None = None
    reviews_path: str | Path | None = None
    show_attrs: bool = False
    max_obs_chars: int = MAX_OBS_CHARS


class WebShopEnv(gym.Env):
    """Buy the product an instruction describes: ``search[...]`` and ``click[...]`` through WebShop's pages.

    The reward is 0 until Buy Now, then WebShop's score in [0, 1] and the episode terminates; ``success`` is a
    score of exactly 1.0. An action that the page does not offer (unknown command, a click on nothing, a search
    without a search box) leaves the page as it is, as WebShop's text env does, with ``action_valid`` False.

    :param options: the mode, goals, anchor, catalogue and page limits (:class:`WebShopOptions`); its fields may be
        given as keywords instead (as ``gym.make`` passes them), each replacing the record's.
    :param render_mode: ``ansi`` (the page text) or None.
    :param chromium: not an option: browser mode runs ``$ABC_CHROMIUM`` (default ``/usr/bin/chromium``) and
        ``$ABC_CHROMEDRIVER`` (default ``/usr/bin/chromedriver``); a path given here (a config file's or a run
        folder's ``[env] kwargs``, ``--set``) is refused, since an executable must come from what the user typed.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (an instance attribute in Gymnasium)

    #: the record of this env's options (``env.kwargs`` names its fields)
    options_type: ClassVar[type] = WebShopOptions

    def __init__(self, options: WebShopOptions | None = None, *, render_mode: str | None = None, chromium: Any = None,
                 chromedriver: Any = None, **fields: Any) -> None:
        for key, value, var in (("chromium", chromium, "ABC_CHROMIUM"), ("chromedriver", chromedriver,
                                                                         "ABC_CHROMEDRIVER")):
            if value is not None:
                raise ConfigError(f"{key}={str(value)[:80]!r}: WebShop takes no executable from its env options (a "
                                  f"config file or run folder could name any program); set the environment variable "
                                  f"{var} instead")
        o = dataclasses.replace(options or WebShopOptions(), **fields)
        mode, split, anchor, max_obs_chars = o.mode, o.split, o.anchor, o.max_obs_chars
        if mode not in MODES:
            raise ConfigError(f"mode={mode!r}; choose one of {', '.join(MODES)}")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode={render_mode!r}; WebShop renders 'ansi' (the page text) or None")
        self.mode, self.split, self.anchor_name = mode, split, anchor
        self.render_mode = render_mode
        self._anchor = get_anchor_extractor(anchor)
        self.catalogue = get_catalogue(o.n_products, o.catalogue_seed, o.items_path, o.attributes_path,
                                       o.reviews_path)
        self.goal_indices = split_indices(split, len(self.catalogue.goals))
        self.shop = get_shop(self.catalogue, o.show_attrs)
        self.max_obs_chars = max_obs_chars
        self.observation_space = gym.spaces.Text(max_length=max_obs_chars, min_length=0, charset=string.printable)
        self.action_space = gym.spaces.Text(max_length=MAX_ACTION_CHARS, charset=string.printable)
        self._browser: Any = None
        self._sid: str | None = None
        self._path = "/"
        self.page: Page = parse_page("")
        self.goal: dict[str, Any] = {}
        self.goal_index = -1
        self._done = False
        self._score = 0.0

    # -- helpers ---------------------------------------------------------------------------------------------
    def _ensure_browser(self) -> Any:
        if self._browser is None:
            from .browser import Browser, get_server

            server = get_server(self.shop)
            self._browser = Browser(server.url)
        return self._browser

    def _show(self, html: str, path: str) -> None:
        self.page = parse_page(html)
        self._path = path

    @property
    def session_id(self) -> str | None:
        """This episode's WebShop session (unique per env and episode)."""
        return self._sid

    @property
    def page_state(self) -> Hashable:
        """``(page, asin, keywords, page number, sub page, options)`` of the current page, without the session."""
        endpoint, args = self.shop.route(self._path)
        options = tuple(sorted(parse_options(args["options"]).items())) if "options" in args else ()
        return (endpoint, args.get("asin", ""), tuple(split_query(args.get("keywords", ""))), args.get("page", 0),
                args.get("sub_page", ""), options)

    @property
    def admissible_actions(self) -> list[str]:
        """``search[<query>]`` when the page has a search box, then ``click[x]`` for each clickable."""
        actions = ["search[<query>]"] if self.page.has_search_bar else []
        for c in self.page.clickables:
            if c.key == "search" and self.page.has_search_bar:
                continue
            action = f"click[{c.key}]"
            if action not in actions:
                actions.append(action)
        return actions

    def _obs(self) -> str:
        return self.page.text[: self.max_obs_chars]

    def _info(self, valid: bool) -> dict[str, Any]:
        return {
            "anchor": self._anchor(self),
            "admissible_actions": self.admissible_actions,
            "subtask": self.goal.get("category", ""),
            "success": bool(self._done and self._score == 1.0),
            "action_valid": valid,
            "score": self._score,
            "goal_index": self.goal_index,
            "instruction": self.goal.get("instruction_text", ""),
        }

    # -- gymnasium API ---------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new session on goal ``seed`` of the split (``options={"goal_index": i}`` picks goal ``i``)."""
        super().reset(seed=seed)
        if options and "goal_index" in options:
            idx = int(options["goal_index"])
            if not 0 <= idx < len(self.catalogue.goals):
                raise ConfigError(f"goal_index={idx} outside 0..{len(self.catalogue.goals) - 1}")
        elif seed is not None:
            idx = goal_index(self.split, seed, len(self.catalogue.goals))
        else:
            idx = self.goal_indices[int(self.np_random.integers(len(self.goal_indices)))]
        if self._sid is not None:
            self.shop.drop_session(self._sid)
        self._sid = f"ws{secrets.token_hex(6)}_fixed_{idx}"
        self.goal_index, self.goal = idx, self.catalogue.goals[idx]
        self._done, self._score = False, 0.0
        path = self.shop.index_url(self._sid)
        if self.mode == "text":
            self._show(*self.shop.open(path))
        else:
            browser = self._ensure_browser()
            self._show(browser.get(path), browser.path)
        return self._obs(), self._info(True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``search[keywords]`` or ``click[element]`` (case-insensitive); anything else is invalid."""
        if self._sid is None:
            raise ConfigError("call reset() before step()")
        valid = False
        if not self._done:
            match = _ACTION.fullmatch(str(action))
            name, arg = (match.group(1).lower(), match.group(2).strip()) if match else ("", "")
            if name == "search" and self.page.has_search_bar and split_query(arg):
                valid = True
                if self.mode == "text":
                    self._show(*self.shop.open(str(self.page.search_target), {"search_query": arg}))
                else:
                    self._show(self._browser.search(arg), self._browser.path)
            elif name == "click":
                target = self.page.clickable(arg.lower())
                if target is not None and not (target.key == "search" and self.page.has_search_bar):
                    valid = True
                    if self.mode == "text":
                        self._show(*self.shop.open(target.target))
                    else:
                        self._show(self._browser.click(target), self._browser.path)
        reward = 0.0
        info = self.shop.reward_of(self._sid) if valid else None
        if info is not None and not self._done:
            self._done, self._score, reward = True, info.reward, info.reward
        return self._obs(), reward, self._done, False, self._info(valid)

    def render(self) -> str | None:
        """The current page text (``render_mode="ansi"``)."""
        return self.page.text if self.render_mode == "ansi" else None

    def close(self) -> None:
        """End the session and quit the browser (browser mode)."""
        if self._sid is not None:
            self.shop.drop_session(self._sid)
            self._sid = None
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        super().close()
