"""Optional dependencies: one check that names the pip extra to install instead of ending in a traceback."""

from __future__ import annotations

import importlib.util

from .errors import MissingDependencyError

__all__ = ["EXTRA_OF", "env_hint", "from_import_error", "install_hint", "require", "require_env"]

#: Top-level module -> the extra of ``agentbench-crbc`` that installs it (environment families add the modules of
#: their own extras: :attr:`~agentbench_crbc.family.EnvFamily.requires`, ``extra_modules``).
EXTRA_OF: dict[str, str] = {
    "torch": "train",
    "transformers": "train",
    "peft": "train",
    "tokenizers": "train",
    "tensorboard": "train",
    "tqdm": "train",
    "gguf": "train",
    "selenium": "browser",
    "pettingzoo": "multiagent",
    "pandas": "leaderboard",
    "matplotlib": "leaderboard",
    "vllm": "vllm",
    "wandb": "wandb",
    "openenv": "serve",
    "uvicorn": "serve",
    "websockets": "remote",
    "ray": "ray",
    "trl": "trl",
}

_TORCH_CPU = "https://download.pytorch.org/whl/cpu"
#: Extras that bring the training stack (torch): a CPU-only user gets the small CPU build from PyTorch's index
#: (every environment family's extra brings it too).
_BRINGS_TORCH = ("train", "cpu", "vllm", "browser", "all")


def _family_extras() -> dict[str, tuple[str, str]]:
    """Module -> (distribution, extra) of every registered family's extra."""
    from .host import BUILTIN_DISTRIBUTION, get_host

    out: dict[str, tuple[str, str]] = {}
    for entry in get_host().families.entries():
        fam = entry.family
        if fam.extra:
            dist = BUILTIN_DISTRIBUTION if entry.distribution == BUILTIN_DISTRIBUTION else entry.distribution
            for module in (*fam.requires, *fam.extra_modules):
                out.setdefault(module, (dist, fam.extra))
    return out


def _extra_of(module: str) -> tuple[str, str] | None:
    if module in EXTRA_OF:
        return "agentbench-crbc", EXTRA_OF[module]
    return _family_extras().get(module)


def install_hint(module: str, extra: str | None = None) -> str:
    """One line: which module is missing and the pip command that installs it (a family's module: the extra of
    the distribution that provides the family)."""
    dist, brings_torch = "agentbench-crbc", extra in _BRINGS_TORCH
    if extra is None and (found := _extra_of(module)) is not None:
        dist, extra = found
        # the built-in environment extras bring the training stack (pyproject.toml)
        brings_torch = extra in _BRINGS_TORCH or (module not in EXTRA_OF and dist == "agentbench-crbc")
    cmd = f"pip install '{dist}[{extra}]'" if extra else f"pip install {module}"
    text = f"{module} is not installed; {cmd}"
    if brings_torch and _missing("torch"):
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


def env_hint(family: str) -> str | None:
    """The install line for the first module of one environment family's extra that is not installed, or
    ``None`` when all are (and for names no registered family declares). Found with ``importlib.util.find_spec``:
    nothing is imported."""
    from .host import get_host

    host = get_host()
    if family not in host.families:
        return None
    for module in host.family(family).requires:
        if _missing(module):
            return install_hint(module)
    return None


def require_env(family: str) -> None:
    """The checks of one environment family (its :attr:`~agentbench_crbc.family.EnvFamily.requires`, named with
    its extra); names and ids no registered family declares pass."""
    if (hint := env_hint(family)) is not None:
        raise MissingDependencyError(hint)


def from_import_error(exc: ImportError) -> MissingDependencyError | None:
    """The one-line error for an ``ImportError`` of an optional module this package knows, else ``None``."""
    name = getattr(exc, "name", None) or ""
    root = name.split(".")[0]
    if _extra_of(root) is None:
        return None
    return MissingDependencyError(install_hint(root))
