"""Optional dependencies: one check that names the pip extra to install instead of ending in a traceback."""

from __future__ import annotations

import importlib.util

from .errors import MissingDependencyError

__all__ = ["ENV_EXTRAS", "EXTRA_OF", "from_import_error", "install_hint", "require", "require_env"]

#: Top-level module -> the extra of ``agentbench-crbc`` that installs it.
EXTRA_OF: dict[str, str] = {
    "torch": "train",
    "transformers": "train",
    "peft": "train",
    "tokenizers": "train",
    "tensorboard": "train",
    "tqdm": "train",
    "gguf": "train",
    "alfworld": "alfworld",
    "textworld": "alfworld",
    "flask": "webshop",
    "bm25s": "webshop",
    "rapidfuzz": "webshop",
    "selenium": "browser",
    "pygame": "sokoban",
    "pettingzoo": "multiagent",
    "pandas": "leaderboard",
    "matplotlib": "leaderboard",
    "vllm": "vllm",
    "wandb": "wandb",
}

#: Environment family -> the modules its environment needs (Sokoban needs nothing beyond the core).
ENV_EXTRAS: dict[str, tuple[str, ...]] = {
    "sokoban": (),
    "alfworld": ("alfworld", "textworld"),
    "webshop": ("flask", "bm25s", "rapidfuzz"),
}

_TORCH_CPU = "https://download.pytorch.org/whl/cpu"
#: Extras that bring the training stack (torch): a CPU-only user gets the small CPU build from PyTorch's index.
_BRINGS_TORCH = ("train", "cpu", "vllm", "sokoban", "alfworld", "webshop", "browser", "all")


def install_hint(module: str, extra: str | None = None) -> str:
    """One line: which module is missing and the pip command that installs it."""
    extra = extra or EXTRA_OF.get(module)
    cmd = f"pip install 'agentbench-crbc[{extra}]'" if extra else f"pip install {module}"
    text = f"{module} is not installed; {cmd}"
    if extra in _BRINGS_TORCH and _missing("torch"):
        text += f" (CPU-only machine: `pip install torch --index-url {_TORCH_CPU}` first, a much smaller download)"
    return text


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent package missing, or a half-installed module
        return True


def require(*modules: str, extra: str | None = None) -> None:
    """Raise :class:`MissingDependencyError` naming the extra when one of ``modules`` cannot be imported.

    :param modules: top-level module names (``"torch"``, ``"matplotlib"``).
    :param extra: the extra to name (default: the module's entry in :data:`EXTRA_OF`).
    """
    for module in modules:
        if _missing(module):
            raise MissingDependencyError(install_hint(module, extra))


def require_env(family: str) -> None:
    """The checks of one environment family (``sokoban``, ``alfworld``, ``webshop``; others pass)."""
    require(*ENV_EXTRAS.get(family, ()))


def from_import_error(exc: ImportError) -> MissingDependencyError | None:
    """The one-line error for an ``ImportError`` of an optional module this package knows, else ``None``."""
    name = getattr(exc, "name", None) or ""
    root = name.split(".")[0]
    if root not in EXTRA_OF:
        return None
    return MissingDependencyError(install_hint(root))
