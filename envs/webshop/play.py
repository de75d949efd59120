"""``abc play webshop``: serve the shop on loopback and open the goal's page in your browser (or print the URL)."""

from __future__ import annotations

import argparse
import time
import webbrowser
from collections.abc import Callable
from typing import Any

from agentbench_crbc.errors import ConfigError

__all__ = ["run", "start"]

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
    idx = goal_index(kw.get("split", "test"), int(getattr(args, "seed", 0) or 0), len(catalogue.goals))
    server = serve(shop, "127.0.0.1", kw.get("port", 0))
    return server, f"{server.url}/human_fixed_{idx}"


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; ``--ui terminal`` only prints the URL, otherwise a browser tab is opened too."""
    server, url = start(args)
    print(f"WebShop is serving on {server.url} (loopback only). Your task (goal of seed {args.seed}):\n  {url}")
    if getattr(args, "ui", "auto") != "terminal":
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            print("(no browser found here: open the URL above yourself)")
    print("Press Ctrl-C to stop.")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
