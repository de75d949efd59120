"""Install one of the repository's example packages (examples/*) into a temporary folder, as a user would pip it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def install_example(name: str, target: Path) -> Path:
    """``pip install --target TARGET examples/NAME`` (no deps, no index, no build isolation); returns ``target``."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(EXAMPLES / name)], check=True, capture_output=True)
    return target
