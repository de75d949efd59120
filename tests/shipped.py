"""The shipped Python source every contract scan reads: each folder pyproject's ``package-dir`` maps into the
package (``agentbench_crbc/``, ``plugins/``, ``envs/``), not only ``agentbench_crbc/``."""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["REPO", "SOURCE_ROOTS", "shipped_files"]

REPO = Path(__file__).resolve().parents[1]


def _source_roots() -> tuple[str, ...]:
    """The ``package-dir`` folders that hold Python modules (``examples/configs`` ships TOML only)."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    folders = cfg["tool"]["setuptools"]["package-dir"].values()
    return tuple(f for f in folders if any((REPO / f).rglob("*.py")))


#: repository folders whose modules ship inside ``agentbench_crbc``
SOURCE_ROOTS: tuple[str, ...] = _source_roots()


def shipped_files() -> list[tuple[str, Path]]:
    """``(repository-relative posix path, path)`` of every shipped ``.py`` file, sorted."""
    return sorted((p.relative_to(REPO).as_posix(), p) for root in SOURCE_ROOTS for p in (REPO / root).rglob("*.py")
                  if "__pycache__" not in p.parts)
