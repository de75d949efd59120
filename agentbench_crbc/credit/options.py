"""Option declarations several credit methods share: bounds of the GiGPO family, verl-agent's ``mode`` switch."""

from __future__ import annotations

from ..errors import OptionError
from ..host import Bound

__all__ = ["GAMMA", "GIGPO_BOUNDS", "MODE", "NORM", "OPTIONAL_NORM", "WEIGHT", "mode_uses_std"]

#: Bounds shared by the GiGPO family (gigpo, graphgpo, g2po, hgpo, progpo).
GAMMA = Bound(0.0, 1.0)
WEIGHT = Bound()
MODE = Bound(choices=("mean_std_norm", "mean_norm"))
NORM = Bound(choices=("std", "none"))
OPTIONAL_NORM = Bound(choices=(None, "std", "none"))
#: GiGPO's own options (``gigpo``; ``g2po`` adds to them).
GIGPO_BOUNDS = {"gamma": GAMMA, "step_weight": WEIGHT, "mode": MODE, "norm": OPTIONAL_NORM}


def mode_uses_std(mode: str) -> bool:
    """verl-agent's ``mean_std_norm`` (divide by std) or ``mean_norm`` (do not)."""
    if mode not in ("mean_std_norm", "mean_norm"):
        raise OptionError(f"option mode={mode!r} must be 'mean_std_norm' or 'mean_norm'")
    return mode == "mean_std_norm"
