"""``abc play alfworld``: play an ALFWorld game in the terminal (type a command, ``?`` for the admissible ones)."""

from __future__ import annotations

import argparse
from typing import Any

from agentbench_crbc.errors import ConfigError

__all__ = ["run"]


def _kwargs(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for text in pairs:
        key, sep, value = text.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
        out[key] = value.split(",") if key in ("task_types", "game_files") else value
    return out


def run(args: argparse.Namespace, input_fn: Any = input, print_fn: Any = print) -> int:
    """Play game ``args.seed`` (``--set task_types=pick2 --set split=valid_unseen`` choose others); exit status 0
    when the game ends won, 1 when the player quits (or the input ends) before."""
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401

    if getattr(args, "ui", "auto") not in ("auto", "terminal"):
        raise ConfigError("ALFWorld is played in the terminal: use --ui terminal")
    env = gym.make("abc/ALFWorld-v0", **_kwargs(getattr(args, "set", [])))
    obs, info = env.reset(seed=args.seed)
    print_fn(obs)
    while True:
        try:
            command = input_fn("> ").strip()
        except EOFError:
            break
        if command in ("quit", "exit"):
            break
        if command == "?":
            print_fn("\n".join(info["admissible_actions"]))
            continue
        obs, _reward, terminated, truncated, info = env.step(command)
        print_fn(obs)
        if terminated or truncated:
            print_fn("You won!" if info["success"] else "Out of steps.")
            break
    env.close()
    return 0 if info.get("success") else 1
