"""Deterministic mode: CPU kernels pinned to one instruction set (ATen, MKL, oneDNN) before torch loads, and a
record of the kernels a run computed with (torch and MKL versions, the ATen kernel ISA, the threads)."""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from typing import Any

from ..errors import ConfigError
from ..io import read_text

__all__ = ["PINNED_ENV", "PINNED_ISA", "check_pinned", "cpu_model", "deterministic_threads", "kernel_info",
           "machine_label", "mkl_version", "pin_kernels", "use_deterministic"]

#: What deterministic mode sets before torch is imported: ATen's kernels (softmax, reductions, the model's
#: gradients) and MKL's matmul code path pinned to AVX2, oneDNN at most AVX2, and cuBLAS a fixed workspace (the
#: setting ``torch.use_deterministic_algorithms`` asks for on a GPU). Each is read once, at the library's first use.
PINNED_ENV: dict[str, str] = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                              "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
#: The ATen kernel ISA (``torch.backends.cpu.get_cpu_capability()``) deterministic mode runs on.
PINNED_ISA = "AVX2"


def pin_kernels(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set :data:`PINNED_ENV` in ``environ`` (``os.environ``; child processes inherit it); returns the variables it
    changed. Call before torch is imported: torch reads them once, at its first kernel."""
    env = os.environ if environ is None else environ
    changed = [k for k, v in PINNED_ENV.items() if env.get(k) != v]
    for key in changed:
        env[key] = PINNED_ENV[key]
    return changed


def _cpu_flags() -> set[str]:
    try:
        info = read_text("/proc/cpuinfo", error=OSError)
    except OSError:
        return set()
    line = next((ln for ln in info.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def check_pinned() -> str:
    """The ATen kernel ISA of this process, after :func:`pin_kernels`; raises :class:`ConfigError` when torch chose
    its kernels before the pins were set (it ran a kernel first) on a CPU that has AVX2. A CPU without AVX2 runs
    its own (older) kernels, which the records name."""
    pin_kernels()
    import torch

    isa = torch.backends.cpu.get_cpu_capability()
    if isa != PINNED_ISA and (not _cpu_flags() or "avx2" in _cpu_flags()):
        pins = " ".join(f"{k}={v}" for k, v in PINNED_ENV.items())
        raise ConfigError(f"deterministic = true: torch already chose {isa} kernels in this process; run it through "
                          f"`abc train`/`abc bench`, or set {pins} in the environment before torch is imported")
    return isa


def deterministic_threads(requested: int) -> tuple[int, str]:
    """The torch threads of deterministic mode: ``requested`` when set, else 1 (reductions split by thread count,
    so the count is part of the result; one thread is the same on every machine)."""
    if requested > 0:
        return requested, "threads"
    return 1, "deterministic = true: one thread unless threads = N says otherwise"


def use_deterministic() -> None:
    """Deterministic algorithms only (an op without one raises instead of running a racy kernel)."""
    import torch

    torch.use_deterministic_algorithms(True)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what ``platform`` says)."""
    try:
        info = read_text("/proc/cpuinfo", error=OSError)
        return next(ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        return platform.processor() or platform.machine()


def machine_label() -> str:
    """The CPU model and the ATen kernel ISA this process computes with (``Intel(R) Xeon(R) ..., AVX512 kernels``):
    what a leaderboard record names, so a board never mixes CPU types or ISAs. Needs torch imported."""
    import torch

    return f"{cpu_model()}, {torch.backends.cpu.get_cpu_capability()} kernels"


def mkl_version(config: str) -> str | None:
    """MKL's version in torch's build summary (``torch.__config__.show()``), ``None`` without MKL."""
    found = re.search(r"Math Kernel Library Version ([0-9.]+)", config)
    return found.group(1) if found else None


def kernel_info(deterministic: bool) -> dict[str, Any]:
    """What computed a run: torch and MKL versions, the ATen kernel ISA in use, MKL's and oneDNN's pins (``null``:
    not pinned), the torch threads, whether deterministic mode was on, and the CPU model. Needs torch imported."""
    import torch

    mkl = mkl_version(torch.__config__.show()) if torch.backends.mkl.is_available() else None
    return {"deterministic": deterministic, "torch": torch.__version__, "mkl": mkl,
            "isa": torch.backends.cpu.get_cpu_capability(), "mkl_cbwr": os.environ.get("MKL_CBWR") or None,
            "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA") or None, "threads": torch.get_num_threads(),
            "cpu": cpu_model()}
