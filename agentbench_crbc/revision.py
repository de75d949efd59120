"""Which code measured a result: the package checkout's git commit, or the installed release's version."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["code_revision"]

_HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def code_revision() -> str:
    """The git commit of the checkout this package is imported from (``+dirty`` when tracked files differ from it),
    else ``v{version}`` (an installed release, or a checkout without git): what a leaderboard row or a benchmark
    record names as the code that measured it."""
    try:
        __version__ = version("agentbench-crbc")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        __version__ = "0.0.0+source"
    try:
        top = subprocess.run(["git", "-C", str(_HERE), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.split()
        # an installed package under some other repository (a venv inside a project) is not that project's code
        if len(top) != 2 or not _HERE.is_relative_to(Path(top[0]).resolve()) or \
                subprocess.run(["git", "-C", str(_HERE), "ls-files", "--error-unmatch", "__init__.py"],
                               capture_output=True, timeout=10).returncode != 0:
            return f"v{__version__}"
        dirty = subprocess.run(["git", "-C", str(_HERE), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"v{__version__}"
    return top[1][:12] + ("+dirty" if dirty else "")
