"""Old import path of :mod:`agentbench_crbc.credit.batch` (kept for one release; import from there)."""

from __future__ import annotations

from .credit.batch import MAX_REWARD, StepBatch, canonical_anchor, dense_unique, validate_record

__all__ = ["MAX_REWARD", "StepBatch", "canonical_anchor", "dense_unique", "validate_record"]
