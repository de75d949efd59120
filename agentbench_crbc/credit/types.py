"""Rollout records as frozen dataclasses: Step, Trajectory, Group (numpy-free but for observations)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Group", "Step", "Trajectory"]


@dataclass(frozen=True, slots=True)
class Step:
    """One agent turn.

    :param anchor: hashable canonical state key used for step-level grouping (the env's anchor extractor).
    :param action: the semantic action actually executed (after parsing the model's text).
    :param reward: intermediate environment reward of this step (the outcome lives on the trajectory).
    :param valid: whether the model's output parsed to an admissible action.
    """

    anchor: Hashable
    action: str
    reward: float = 0.0
    valid: bool = True


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One rollout: its steps, terminal outcome, scalar return ``reward`` (default ``float(success)``); ``error`` is
    set when an env crash ended it (the credit layer then leaves it out of its group)."""

    steps: tuple[Step, ...]
    success: bool
    reward: float | None = None
    subtask: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    error: str | None = None

    @property
    def outcome(self) -> float:
        """The scalar outcome R used by return-based methods."""
        return float(self.success) if self.reward is None else float(self.reward)


@dataclass(frozen=True, slots=True)
class Group:
    """Rollouts of one task from one initial state; assigners return one ``(len(steps),)`` array per trajectory."""

    task_id: str
    trajectories: tuple[Trajectory, ...]
