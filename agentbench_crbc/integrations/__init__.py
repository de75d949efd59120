"""Adapters bringing the installed credit methods into other trainers (:mod:`.verl`); each imports lazily."""

from __future__ import annotations

__all__: list[str] = []
