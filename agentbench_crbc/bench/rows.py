"""The record of one fidelity measurement (``abc bench fidelity``), shared by the driver and the report writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .metrics import Estimate

__all__ = ["FidelityRow"]


@dataclass(frozen=True, eq=False)
class FidelityRow:
    """One method on one setting at one G: its metrics, and its Pearson gain over the better baseline."""

    family: str
    setting: str
    group_size: int
    method: str
    metrics: dict[str, Estimate]
    gain: Estimate | None = None
    extra: dict[str, Any] = field(default_factory=dict)
