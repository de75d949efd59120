"""The named starting points of ``abc train`` (``--preset``): trainer bases, and the presets families build on them.

A preset is a base (the CRBC paper's settings, or the CPU demo's) plus what a family's ``EnvFamily.presets`` entry
changes (the model, the number of groups, the prompt budget...). The families own their presets, so the paper's
ALFWorld settings live with ALFWorld and a third-party family can add its own; the trainer owns only the bases.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ConfigError

__all__ = ["BASES", "PRESETS", "merge_tables", "preset_method_options"]

# Per-method options the paper presets use (picked by the chosen method's name; others get the method's defaults).
_PAPER_METHOD_OPTIONS: dict[str, dict[str, Any]] = {
    "crbc": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 0.1},
    "gigpo": {"gamma": 0.95, "step_weight": 1.0},
}

#: What a family's preset starts from. ``paper``: the CRBC paper's settings, which follow verl-agent's example
#: scripts (examples/gigpo_trainer/run_*.sh); ``cpu-demo``: the offline CPU demo (budgets in steps: a loaded machine
#: gives the same model, later; the minute caps are safety nets that only fire on a machine several times slower
#: than an idle 2-core one, and the run says when they do).
BASES: dict[str, dict[str, Any]] = {
    "paper": {
        "model": {"name": "", "dtype": "auto", "gradient_checkpointing": True},
        "env": {"template": "paper", "invalid_penalty": 0.1},  # max_steps: the id's step limit
        "rollout": {"group_size": 8, "groups": 16, "temperature": 1.0, "max_prompt_tokens": 2048,
                    "max_response_tokens": 512},
        # Eq. 15: per-step sequence ratios, each group's steps averaged, then groups uniformly; verl-agent's
        # ppo_mini_batch_size (256 / 8 / 64 tasks) times G = 8 step samples per optimizer step, one epoch
        "optim": {"lr": 1e-6, "kl_coef": 0.01, "clip_ratio": 0.2, "loss_agg": "group-mean", "ratio": "sequence",
                  "ppo_epochs": 1, "mini_batch_size": 2048, "micro_batch": 8},
        "eval": {"episodes": 128, "temperature": 0.4, "every": 5},
        "sft": {"steps": 0},
        "updates": 150,
        "_method_options": _PAPER_METHOD_OPTIONS,
    },
    "cpu-demo": {
        # Reward only, from a random start, as the papers train (no demonstrations): a from-scratch 1M-parameter
        # model learns from its own rollouts, with the family's preset choosing a task distribution RL can climb
        # (Sokoban: 1-4-move levels in an egocentric view, answers restricted to the legal moves).
        # fp32 on every CPU: bf16 autocast (chosen by probing the CPU) gave other numbers on CPUs with AVX512-BF16;
        # `--set model.dtype=auto` opts back in (1.5-1.9x faster there)
        "model": {"name": "tiny", "dtype": "fp32", "tiny_hidden": 128, "tiny_layers": 4},
        "env": {"template": "compact"},  # the family's default id and step limit
        "rollout": {"group_size": 8, "groups": 8, "temperature": 1.0, "max_prompt_tokens": 128,
                    "max_response_tokens": 8},
        # PPO: 4 epochs of mini-batches of 64 steps (about 20 optimizer steps an update), each trajectory weighed
        # alike, lr 3e-4 for every method and no KL guard: the guard (`optim.target_kl`) halved the learning rate
        # of the method whose credit agrees across a group (CRBC: 9-14 of 60 updates) and made learning fragile for
        # both (docs/benchmarks.md, the update ablation); approx_kl_end says how far each update moved. Families
        # with free-text answers (ALFWorld, WebShop) bring the guard back at lr 1e-3 in their training tables
        "optim": {"lr": 3e-4, "kl_coef": 0.01, "clip_ratio": 0.2, "adv_norm": "std", "loss_agg": "traj-mean",
                  "ratio": "token", "ppo_epochs": 4, "mini_batch_size": 64, "micro_batch": 256, "target_kl": 0.0},
        # imitation stays available (`--set sft.steps=1000`): these are its settings when asked for
        "sft": {"steps": 0, "batch_size": 64, "lr": 2e-3, "max_minutes": 30.0},
        "eval": {"episodes": 128, "samples": 4, "temperature": 0.4, "every": 0},
        "updates": 60,
        "max_minutes": 30.0,
        "checkpoint_every": 20,
        # CRBC's step credit in value units: Eq. 13's floor sigma_min set to the return's range (success in {0, 1}),
        # so no state's Q - V is scaled up beyond the value scale; the per-anchor normalisation with the paper's
        # floor 0.1 makes a gap of a few hundredths (noise at G = 8) as loud as one of a half, and on seed 4 left
        # CRBC +5.1 points where GRPO gained +25.6 (docs/benchmarks.md)
        "_method_options": {"crbc": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 1.0}},
        # another family chosen on top of this preset brings its EnvFamily.training table (under the user's values)
        "_family_training": True,
    },
}


def merge_tables(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` laid over it, nested tables merged key by key (copies; neither input changes)."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_tables(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _build() -> dict[str, dict[str, Any]]:
    from ..host import get_host

    out: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    for fam in get_host().families:
        for name, table in fam.presets.items():
            if name in out:
                raise ConfigError(f"preset {name!r} is declared by env families {owner[name]!r} and {fam.name!r}; "
                                  "uninstall one of them")
            base = table.get("base")
            if base not in BASES:
                raise ConfigError(f"preset {name!r} of env family {fam.name!r}: base {base!r} is not one of "
                                  f"{', '.join(BASES)}")
            top = {k: v for k, v in table.items() if k != "base"}
            out[name] = merge_tables(merge_tables(BASES[base], {"env": {"name": fam.name}}), top)
            owner[name] = fam.name
    return out


class _Presets(Mapping[str, dict[str, Any]]):
    """The presets of the installed families, built on first use (a mapping: name -> nested config table)."""

    def _tables(self) -> dict[str, dict[str, Any]]:
        return _build()

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self._tables()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables())

    def __len__(self) -> int:
        return len(self._tables())


#: Named starting points; ``--set`` and ``--config`` apply on top.
PRESETS: Mapping[str, dict[str, Any]] = _Presets()


def preset_method_options(table: dict[str, Any], method: str) -> dict[str, Any]:
    """The options ``table`` (a preset) gives credit method ``method`` (empty: the method's defaults)."""
    return dict(table.get("_method_options", {}).get(method, {}))
