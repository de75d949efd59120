"""``abc play webshop``: the shop in your browser (served on loopback), or as text in the terminal (``--ui terminal``).

Seed N is goal N of ``--set split=...`` (default ``test``), the task ``gym.make("abc/WebShop-v0",
split=...).reset(seed=N)`` plays; the environment's own default split is ``train``."""

from __future__ import annotations

import argparse
import time
import webbrowser
from collections.abc import Callable
from typing import Any

from agentbench_crbc.errors import ConfigError

__all__ = ["DEFAULT_SPLIT", "HELP", "play_terminal", "run", "start"]

#: The split ``abc play webshop`` draws goals from (the held-out goals, as a human evaluation uses).
DEFAULT_SPLIT = "test"
HELP = ("type an action as the agent does: search[red lotion], click[b030rl0np9], click[buy now]; "
        "? lists the actions of this page, q quits")

_KWARGS: dict[str, Callable[[str], Any]] = {
    "split": str, "n_products": int, "catalogue_seed": int, "items_path": str, "attributes_path": str,
    "reviews_path": str, "show_attrs": lambda v: v.lower() in ("1", "true", "yes"), "port": lambda v: _port(int(v)),
}


def _port(port: int) -> int:
    if not 0 <= port <= 65535:
        raise ValueError(f"a port is 0 (any free one) to 65535, got {port}")
    return port


def _settings(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in _KWARGS:
            raise ConfigError(f"--set {pair!r}: use KEY=VALUE with KEY one of {', '.join(_KWARGS)}")
        try:
            out[key] = _KWARGS[key](value)
        except ValueError as exc:
            raise ConfigError(f"--set {pair!r}: {exc}") from None
    return out


def start(args: argparse.Namespace) -> tuple[Any, str]:
    """Start the server for ``args`` (seed, set); returns ``(server handle, URL of the goal's session)``."""
    from .app import serve
    from .catalogue import get_catalogue
    from .env import get_shop
    from .goals import goal_index

    kw = _settings(list(getattr(args, "set", []) or []))
    catalogue = get_catalogue(kw.get("n_products", 1000), kw.get("catalogue_seed", 0), kw.get("items_path"),
                              kw.get("attributes_path"), kw.get("reviews_path"))
    shop = get_shop(catalogue, kw.get("show_attrs", False))
    idx = goal_index(kw.get("split", DEFAULT_SPLIT), int(getattr(args, "seed", 0) or 0), len(catalogue.goals))
    server = serve(shop, "127.0.0.1", kw.get("port", 0))
    return server, f"{server.url}/human_fixed_{idx}"


def _describe(args: argparse.Namespace, kw: dict[str, Any]) -> str:
    split = kw.get("split", DEFAULT_SPLIT)
    return (f"goal of seed {args.seed} in split {split!r} (the task of gym.make('abc/WebShop-v0', split={split!r})"
            f".reset(seed={args.seed}))")


def play_terminal(args: argparse.Namespace, input_fn: Callable[[str], str] = input,
                  print_fn: Callable[[str], Any] = print) -> dict[str, Any]:
    """The text environment in the terminal: the page as the agent reads it, your action typed at ``>``."""
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401  (registers the ids)

    kw = _settings(list(getattr(args, "set", []) or []))
    kw.pop("port", None)
    kw.setdefault("split", DEFAULT_SPLIT)
    env = gym.make("abc/WebShop-v0", **kw)
    try:
        obs, info = env.reset(seed=args.seed)
        print_fn(f"WebShop, {_describe(args, kw)}\n{HELP}\n\n{obs}")
        while True:
            try:
                action = input_fn("> ").strip()
            except EOFError:
                break
            if action.lower() in ("q", "quit", "exit"):
                break
            if action == "?":
                print_fn("\n".join(info["admissible_actions"]))
                continue
            obs, reward, terminated, truncated, info = env.step(action)
            if not info["action_valid"]:
                print_fn(f"{action!r} is not an action on this page; ? lists them")
                continue
            print_fn(obs)
            if terminated or truncated:
                print_fn(f"bought: score {reward:.2f} ({'success' if info['success'] else 'not a full match'})")
                break
    finally:
        env.close()
    return dict(info)


def run(args: argparse.Namespace) -> int:
    """``--ui terminal``: play as text here; otherwise serve until Ctrl-C and open a browser tab (or print the URL)."""
    if getattr(args, "ui", "auto") == "terminal":
        return 0 if play_terminal(args).get("success") else 1
    if getattr(args, "ui", "auto") not in ("auto", "browser"):
        raise ConfigError("WebShop plays in 'browser' (default) or 'terminal'")
    server, url = start(args)
    kw = _settings(list(getattr(args, "set", []) or []))
    print(f"WebShop is serving on {server.url} (loopback only). Your task, the {_describe(args, kw)}:\n  {url}")
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened:
        print("(no browser found here: open the URL above yourself, or play as text with --ui terminal)")
    print("Press Ctrl-C to stop.")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
