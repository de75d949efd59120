"""The ``abc`` subcommands and their one-line help: the one list ``abc --help`` shows without importing them."""

from __future__ import annotations

__all__ = ["COMMANDS"]

#: Subcommand modules under ``agentbench_crbc.cli`` (each defines ``register(subparsers)`` and adds its parser with
#: this help line), in the order ``abc --help`` lists them. Environment families add their own commands
#: (:attr:`~agentbench_crbc.family.EnvFamily.commands`) after these.
COMMANDS: dict[str, str] = {
    "plugins": "list installed credit methods, group gates, env families and rollout engines",
    "credit": "compute per-step credit for rollout records (JSON Lines)",
    "envs": "list the environment families' Gymnasium ids and the extra each needs (marked when missing)",
    "play": "play an environment family yourself (the playable families and their --ui modes: `abc play --list`)",
    "rollout": "collect group rollouts (JSON Lines records for `abc credit`)",
    "serve": "serve an env family over OpenEnv (for remote env pools, TRL, other clients)",
    "sft": "imitation warm start from the env's expert (writes RUN_DIR/model)",
    "train": "train an agent with group RL and a credit method",
    "eval": "validate a trained run or a model on held-out tasks (leaderboard records)",
    "leaderboard": "show, render and extend the leaderboard",
    "bench": "CPU learning benchmark: every credit method from one warm start per seed",
}
