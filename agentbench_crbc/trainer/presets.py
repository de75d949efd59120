"""The named starting points of ``abc train`` (``--preset``): the CPU demo and the CRBC paper's settings."""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS", "preset_method_options"]

# Per-method options the presets use (picked by the chosen method's name; others get the method's defaults).
_PAPER_METHOD_OPTIONS: dict[str, dict[str, Any]] = {
    "crbc": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 0.1},
    "gigpo": {"gamma": 0.95, "step_weight": 1.0},
}


def _paper(env: str, model: str, groups: int, prompt: int, graphgpo_omega: float, mini_batch: int) -> dict[str, Any]:
    opts = dict(_PAPER_METHOD_OPTIONS)
    opts["graphgpo"] = {"omega": graphgpo_omega}
    return {
        "model": {"name": model, "dtype": "auto", "gradient_checkpointing": True},
        "env": {"name": env, "template": "paper", "invalid_penalty": 0.1},  # max_steps: the id's step limit
        "rollout": {"group_size": 8, "groups": groups, "temperature": 1.0, "max_prompt_tokens": prompt,
                    "max_response_tokens": 512},
        # Eq. 15: per-step sequence ratios, each group's steps averaged, then groups uniformly; verl-agent's
        # ppo_mini_batch_size (256 / 8 / 64 tasks) times G = 8 step samples per optimizer step, one epoch
        "optim": {"lr": 1e-6, "kl_coef": 0.01, "clip_ratio": 0.2, "loss_agg": "group-mean", "ratio": "sequence",
                  "ppo_epochs": 1, "mini_batch_size": mini_batch, "micro_batch": 8},
        "eval": {"episodes": 128, "temperature": 0.4, "every": 5},
        "sft": {"steps": 0},
        "updates": 150,
        "_method_options": opts,
    }


#: Named starting points; ``--set`` and ``--config`` apply on top. Paper presets: the CRBC paper's settings, which
#: follow verl-agent's example scripts (examples/gigpo_trainer/run_*.sh).
PRESETS: dict[str, dict[str, Any]] = {
    # Budgets in steps (a loaded machine gives the same model, later); the minute caps are safety nets that only
    # fire on a machine several times slower than an idle 2-core one, and the run says when they do.
    "cpu-demo": {
        "model": {"name": "tiny", "dtype": "auto", "tiny_hidden": 128, "tiny_layers": 4},
        "env": {"name": "sokoban", "template": "compact"},  # the family's default (text) id and step limit
        "rollout": {"group_size": 8, "groups": 8, "temperature": 1.0, "max_prompt_tokens": 128,
                    "max_response_tokens": 8},
        # PPO: one pass of ~3 mini-batches per update (about 700 steps), each step's trajectory weighed alike
        "optim": {"lr": 2e-4, "kl_coef": 0.01, "clip_ratio": 0.2, "adv_norm": "std", "loss_agg": "traj-mean",
                  "ratio": "token", "ppo_epochs": 1, "mini_batch_size": 256, "micro_batch": 256},
        "sft": {"steps": 1000, "batch_size": 64, "lr": 2e-3, "max_minutes": 30.0},
        "eval": {"episodes": 128, "samples": 4, "temperature": 0.4, "every": 0},
        "updates": 120,
        "max_minutes": 30.0,
        "checkpoint_every": 20,
        "_method_options": {"crbc": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0}},
        # another family chosen on top of this preset brings its EnvFamily.training table (under the user's values)
        "_family_training": True,
    },
    "alfworld-qwen2.5-1.5b": _paper("alfworld", "Qwen/Qwen2.5-1.5B-Instruct", 16, 2048, 0.1, 2048),
    "alfworld-qwen2.5-7b": _paper("alfworld", "Qwen/Qwen2.5-7B-Instruct", 16, 2048, 0.1, 2048),
    "webshop-qwen2.5-1.5b": _paper("webshop", "Qwen/Qwen2.5-1.5B-Instruct", 16, 5120, 0.2, 64),
    "webshop-qwen2.5-7b": _paper("webshop", "Qwen/Qwen2.5-7B-Instruct", 16, 5120, 0.2, 64),
    "sokoban-qwen2.5-vl-3b": _paper("sokoban", "Qwen/Qwen2.5-VL-3B-Instruct", 32, 1024, 0.8, 512),
}
PRESETS["sokoban-qwen2.5-vl-3b"]["env"].update({"id": "abc/Sokoban-v0"})  # RGB observations for the VL model


def preset_method_options(table: dict[str, Any], method: str) -> dict[str, Any]:
    """The options ``table`` (a preset) gives credit method ``method`` (empty: the method's defaults)."""
    return dict(table.get("_method_options", {}).get(method, {}))
