"""The CPU threading a run starts with: torch threads and OpenMP's waiting policy, chosen before torch is imported."""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass

__all__ = ["DEFAULT_THREADS", "WAIT_KEYS", "ThreadPlan", "cpu_plan", "prepare_openmp", "torch_threads"]

#: torch threads per process when ``threads = 0`` and ``OMP_NUM_THREADS`` is unset. One: on a 2-core Xeon shared
#: with other work (load 2-17), one thread's PPO update held steady while two threads that spin-wait slowed several
#: fold (docs/training.md, "Threads"); one thread also gives the same numbers whatever the machine's load.
DEFAULT_THREADS = 1

#: Variables that set how OpenMP threads wait (GNU libgomp, which torch's Linux wheels use, and Intel's runtime);
#: when the environment sets any of them, ``abc`` leaves the waiting policy to it.
WAIT_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")

#: What :func:`prepare_openmp` did in this process (``None``: not called yet).
_PREPARED: str | None = None


@dataclass(frozen=True)
class ThreadPlan:
    """The torch threads a run uses and how OpenMP's threads wait, each with the reason."""

    threads: int
    why: str
    wait: str
    """``passive`` (sleep at once), ``spin`` (the runtime's default: spin, then sleep) or the variable that set it."""
    wait_why: str

    def line(self) -> str:
        """The run's line about them (printed among its first lines)."""
        return (f"torch CPU threads: {self.threads} ({self.why}; --set threads=N to choose); OpenMP waiting: "
                f"{self.wait} ({self.wait_why})")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def torch_threads(requested: int, environ: MutableMapping[str, str] | None = None) -> tuple[int, str]:
    """The torch CPU threads this process uses and why: ``requested`` when set; else (``0``) ``OMP_NUM_THREADS``
    when the environment sets it, else :data:`DEFAULT_THREADS`, never more than the cores the process may use
    divided among the ranks torchrun started on this machine (``LOCAL_WORLD_SIZE``)."""
    env = os.environ if environ is None else environ
    if requested > 0:
        return requested, "threads"
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp), "OMP_NUM_THREADS"
    cores = _cores()
    local = max(int(env.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    share = max(cores // local, 1)
    if share < DEFAULT_THREADS:
        return share, f"the {cores} cores this process may use over {local} ranks"
    return DEFAULT_THREADS, (f"threads = 0: one, which stays steady when other work shares the {cores} cores and "
                             "gives the same numbers whatever the load")


def prepare_openmp(environ: MutableMapping[str, str] | None = None) -> str:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the environment chose a waiting policy (:data:`WAIT_KEYS`); call it
    before torch is imported: OpenMP reads it once, when torch loads it. Returns (and remembers) what it did."""
    global _PREPARED
    env = os.environ if environ is None else environ
    user = next((k for k in WAIT_KEYS if k in env), None)
    if user is not None:
        what = f"{user}={env[user]} from the environment"
    elif "torch" in sys.modules:
        what = "torch was imported before abc could set it; the OpenMP runtime's default"
    else:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        what = "set"
    if environ is None:
        _PREPARED = what
    return what


def cpu_plan(requested: int, environ: MutableMapping[str, str] | None = None) -> ThreadPlan:
    """The run's :class:`ThreadPlan`: :func:`torch_threads` and what :func:`prepare_openmp` did in this process."""
    env = os.environ if environ is None else environ
    threads, why = torch_threads(requested, env)
    done = _PREPARED if environ is None else None
    user = next((k for k in WAIT_KEYS if k in env), None)
    if done == "set":
        wait, wait_why = "passive", ("OMP_WAIT_POLICY=PASSIVE, set by abc before torch loaded: a waiting thread "
                                     "sleeps instead of spinning on cores other work needs")
    elif user is not None:
        wait, wait_why = f"{user}={env[user]}", "from the environment"
    else:
        wait, wait_why = "spin", ("the OpenMP runtime's default: torch loaded before abc could set "
                                  "OMP_WAIT_POLICY=PASSIVE; set it in the environment on a shared machine")
    if threads == 1:
        wait_why += "; it matters only with more than one thread"
    return ThreadPlan(threads=threads, why=why, wait=wait, wait_why=wait_why)
