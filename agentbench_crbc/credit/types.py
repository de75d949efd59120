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
    """One rollout.

    :param steps: its turns in order (at least one).
    :param success: whether it ended in success (the last step's successor is the success boundary); a time limit is
        a failure.
    :param reward: the scalar outcome of return-based methods; ``None`` means ``float(success)`` (read it through
        :attr:`outcome`).
    :param subtask: the task's category (ALFWorld's ``pick``, ``cool``...), when the env gives one.
    :param extra: anything else the caller keeps with it (not compared; the credit layer ignores it).
    :param error: set when an env crash ended it; the credit layer leaves it out of its group (a method never sees
        it) and gives it zero credit.
    """

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
    """Rollouts of one task from one initial state; assigners return one ``(len(steps),)`` array per trajectory.

    :param task_id: the records' ``group`` id.
    :param trajectories: the rollouts in input order (those an env failure ended are left out).
    """

    task_id: str
    trajectories: tuple[Trajectory, ...]
