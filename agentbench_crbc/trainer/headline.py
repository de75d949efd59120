"""The run's first line: which environment it trains, and why that one (its preset's family, or a chosen one)."""

from __future__ import annotations

from ..family import find_family
from ..host import get_host
from .config import TrainConfig
from .presets import PRESETS

__all__ = ["answers_line", "headline"]

#: At most this many other families are named in the hint; `abc plugins` lists the rest.
_OTHERS = 3


def headline(cfg: TrainConfig) -> str:
    """``training abc/SokobanText-v0 (Sokoban: the cpu-demo preset's family; --env alfworld for ALFWorld, ...)``:
    the env id, the family, whether it is the preset's own or was chosen (``--env``, ``env.id``, a config file), and
    how to train another family."""
    found = find_family(cfg.env.name)
    label = found.family.label if found is not None else cfg.env.name
    own = PRESETS[cfg.preset]["env"].get("name") if cfg.preset in PRESETS else None
    if own == cfg.env.name:
        others = [f for f in get_host().families if f.name != cfg.env.name]
        hint = ", ".join(f"--env {f.name} for {f.label}" for f in others[:_OTHERS])
        if len(others) > _OTHERS:
            hint += f" (`abc plugins` lists {len(others) - _OTHERS} more)"
        why = f"the {cfg.preset} preset's family" + (f"; {hint}" if hint else "")
    else:
        own_found = find_family(own) if own else None
        why = f"chosen over the {cfg.preset} preset's {own_found.family.label if own_found else own}"
    return f"training {cfg.env.id} ({label}: {why})"


def answers_line(cfg: TrainConfig) -> str:
    """The run's answer mode, so that neither is chosen silently: constrained to the env's admissible actions
    (``rollout.constrain``) or free text, and how to switch."""
    if cfg.rollout.constrain:
        return ("answers: constrained to the admissible actions (rollout.constrain=true; "
                "--set rollout.constrain=false for free text)")
    return ("answers: free text, an invalid one penalised (rollout.constrain=false; --set rollout.constrain=true "
            "restricts them to the admissible actions where the env lists them)")
