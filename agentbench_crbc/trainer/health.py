"""Warnings when an RL update shows a collapsing policy: entropy near zero, or most answers invalid."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["HealthWatch"]


@dataclass
class HealthWatch:
    """Watches each update's metrics row and says once, with the update number, when the policy collapses.

    - entropy: the mean entropy of the answers fell below ``entropy_ratio`` of the first update's (and under
      ``entropy_floor`` nats): the policy became (nearly) deterministic, so its groups stop varying and
      group-relative credit goes to zero;
    - invalid answers: at least ``invalid_max`` of the steps did not parse to an admissible action (where the
      first update had fewer): with a saturated softmax on invalid text the gradient vanishes and the run does not
      recover. Constrained decoding (``rollout.constrain``) makes this impossible.

    A warning is a line of text (``say``), not an error; each kind is said once per run.
    """

    say: Callable[[str], None]
    entropy_ratio: float = 0.1
    entropy_floor: float = 0.05
    invalid_max: float = 0.5
    _first: dict[str, float] = field(default_factory=dict)
    _said: set[str] = field(default_factory=set)

    def check(self, update: int, row: Mapping[str, float]) -> list[str]:
        """Look at update ``update``'s row; returns (and says) the warnings it raised."""
        out = []
        ent, inv = row.get("entropy"), row.get("invalid")
        for key, value in (("entropy", ent), ("invalid", inv)):
            if value is not None and math.isfinite(value):
                self._first.setdefault(key, float(value))
        e0 = self._first.get("entropy")
        if ent is not None and e0 is not None and math.isfinite(ent) and "entropy" not in self._said \
                and ent < self.entropy_floor and ent < self.entropy_ratio * e0:
            out.append(f"warning: update {update}: answer entropy fell to {ent:.3f} nats (update 1: {e0:.3f}); the "
                       "policy is collapsing onto one answer: lower optim.lr, set optim.target_kl, or add "
                       "optim.entropy_coef")
            self._said.add("entropy")
        i0 = self._first.get("invalid", 0.0)
        if inv is not None and math.isfinite(inv) and "invalid" not in self._said and inv >= self.invalid_max \
                and inv > i0:
            out.append(f"warning: update {update}: {inv:.0%} of the answers were invalid (update 1: {i0:.0%}); the "
                       "policy is collapsing into unparsable text: lower optim.lr, set optim.target_kl, or use "
                       "rollout.constrain=true where the engine and env allow it")
            self._said.add("invalid")
        for line in out:
            self.say(line)
        return out
