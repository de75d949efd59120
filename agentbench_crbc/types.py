"""Old import path of :mod:`agentbench_crbc.credit.types` (kept for one release; import from there)."""

from __future__ import annotations

from .credit.types import Group, Step, Trajectory

__all__ = ["Group", "Step", "Trajectory"]
