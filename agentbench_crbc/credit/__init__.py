"""The credit layer (numpy/scipy only): ``assign(method, records, **options)`` and what credit methods build on.

Modules: :mod:`.assign` (run a registered method), :mod:`.batch` (:class:`StepBatch`, the record contract),
:mod:`.types` (:class:`Step`, :class:`Trajectory`, :class:`Group`), :mod:`.records` (JSON Lines in, options from
text), :mod:`.explain` (per-group diagnostics through the host), :mod:`.testing` (``check_credit_assigner``).
Helpers methods share instead of importing each other: :mod:`.stats` (group statistics, episode advantages),
:mod:`.returns` (discounted step returns), :mod:`.keys` (dense pair ids), :mod:`.options` (shared option bounds),
:mod:`.closure` (CRBC's Bellman closure).
"""

from __future__ import annotations

from .assign import assign, assign_batch
from .batch import StepBatch, canonical_anchor, validate_record
from .explain import GroupExplanation, explain
from .records import parse_option, read_jsonl
from .types import Group, Step, Trajectory

__all__ = [
    "Group",
    "GroupExplanation",
    "Step",
    "StepBatch",
    "Trajectory",
    "assign",
    "assign_batch",
    "canonical_anchor",
    "explain",
    "parse_option",
    "read_jsonl",
    "validate_record",
]
