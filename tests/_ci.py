"""What a test does when a system dependency is missing: skip locally (with the fix), fail under ``CI=true``."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "unavailable"]


def in_ci() -> bool:
    """``CI`` is set to a true value (GitHub Actions, GitLab and ``.ci/run`` set ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str, *, module: bool = True) -> NoReturn:
    """Skip with ``reason`` locally; in CI a skip would hide untested code, so fail instead."""
    if in_ci():
        pytest.fail(f"CI=true and these tests cannot run: {reason}", pytrace=False)
    pytest.skip(f"!!! SKIPPED: {reason} !!!", allow_module_level=module)
