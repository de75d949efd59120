"""Check the import-linter layer contracts of pyproject.toml on the installed layout (``python tests/layers.py``).

The source tree keeps ``plugins/`` and ``envs/`` beside ``agentbench_crbc/``; the wheel maps them to
``agentbench_crbc.plugins`` and ``agentbench_crbc.envs``. import-linter reads packages from disk, so this stages a
copy of the Python files in the installed layout and runs ``lint-imports`` on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> where the wheel puts it (pyproject's package-dir)
LAYOUT = {"agentbench_crbc": "agentbench_crbc", "plugins": "agentbench_crbc/plugins", "envs": "agentbench_crbc/envs"}


def stage(dest: Path) -> Path:
    """Copy the package's ``.py`` files into ``dest`` in the installed layout; returns ``dest``."""
    for src, to in LAYOUT.items():
        shutil.copytree(ROOT / src, dest / to, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        dirs_exist_ok=True)
    return dest


def run(*, capture: bool = False, inject: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with the repository's pyproject.toml on a staged copy.

    :param inject: staged path (``agentbench_crbc/credit/types.py``) -> a line appended to it (a new file when
        the path does not exist): breaks to show the contracts catch them. The repository is never touched.
    """
    lint = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")
    if lint is None:
        raise SystemExit("lint-imports is not installed; pip install -e '.[dev]'")
    with tempfile.TemporaryDirectory(prefix="abc-layers-") as tmp:
        staged = stage(Path(tmp))
        for rel, line in (inject or {}).items():
            target = staged / rel
            with target.open("a", encoding="utf-8") as fh:
                fh.write(f"\n{line}\n")
        env = {**os.environ, "PYTHONPATH": str(staged)}
        return subprocess.run([lint, "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")], cwd=staged, env=env,
                              text=True, capture_output=capture, timeout=600, check=False)


if __name__ == "__main__":
    sys.exit(run().returncode)
