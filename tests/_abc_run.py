"""Run ``abc`` in process in a fresh folder for the CLI property suites: its exit code, its stderr, and whether any
file in the folder changed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentbench_crbc.cli import main

__all__ = ["run_fresh"]


def _snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run_fresh(argv_of: Callable[[Path], list[str]], setup: Callable[[Path], Any] | None = None
              ) -> tuple[Any, str, bool]:
    """``main(argv_of(folder))`` in a new temporary folder prepared by ``setup``: (exit code, stderr, changed)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if setup is not None:
            setup(root)
        before = _snapshot(root)
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                rc = main(argv_of(root))
            except SystemExit as exc:  # argparse: usage, then one error line
                rc = exc.code
        return rc, err.getvalue(), _snapshot(root) != before
