"""Where ``abc bench`` runs its cells: a local pool of worker processes (one torch thread each) or Ray tasks."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Protocol

from ..errors import ConfigError

__all__ = ["LOCAL", "STOP_GRACE_S", "ProcessRunner", "RayRunner", "Runner", "default_workers", "interrupt_on_sigterm",
           "open_runner", "worker_env"]

#: ``--ray-address local``: start a Ray cluster on this machine (``--workers`` CPUs) for the benchmark's lifetime.
LOCAL = "local"


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity, as torch sees them): one worker per core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


#: Seconds an interrupted pool gives its workers to stop after SIGTERM (a training cell stops at once, saving what
#: is consistent) before it kills them.
STOP_GRACE_S = 10.0


def worker_env() -> None:
    """One thread per worker: set before torch is imported in the worker (``torch.set_num_threads(1)`` follows
    in the cell), and no window for a family that could open one. On Linux the worker also gets SIGTERM when the
    driver dies (``PR_SET_PDEATHSIG``), so a driver killed outright leaves no worker training on."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if sys.platform == "linux":
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Runner(Protocol):
    """Runs ``fn(*args)`` somewhere and hands back a :class:`concurrent.futures.Future` of its result."""

    workers: int
    """Cells that may run at once."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]: ...

    def close(self, abort: bool = False) -> None:
        """Release the workers; ``abort`` (the driver was interrupted): stop the cells running now, not wait."""
        ...

    def describe(self) -> str: ...


class ProcessRunner:
    """``workers`` local worker processes (spawned, so no parent's torch threads or locks are inherited); a worker
    that dies (killed, out of memory) breaks the pool: its cell and those running beside it fail, a rerun resumes."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=worker_env)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._pool.submit(fn, *args)

    def close(self, abort: bool = False) -> None:
        """Shut the pool down. A pool broken by a dead worker first has its other workers killed: CPython's own
        cleanup only sends them SIGTERM and then joins them, and a worker that does not end on SIGTERM (seen on
        3.11.7 under load) made ``shutdown`` wait forever. ``abort`` (Ctrl-C or SIGTERM to the driver): every
        worker gets SIGTERM (a training cell stops at once and keeps only a consistent checkpoint), and those
        still alive after :data:`STOP_GRACE_S` are killed, so the driver never waits for a cell to finish."""
        procs = list((getattr(self._pool, "_processes", None) or {}).values())  # private, read defensively
        if abort:
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
            deadline = time.monotonic() + STOP_GRACE_S
            for proc in procs:
                proc.join(max(0.0, deadline - time.monotonic()))
        if abort or getattr(self._pool, "_broken", False):
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def describe(self) -> str:
        return f"a pool of {self.workers} worker process(es), one torch thread each"


class RayRunner:
    """Each call a Ray task of one CPU (placement by Ray; a task whose worker or node dies is retried by Ray up to
    ``retries`` times; an exception the cell raises is not retried). ``address``: ``auto``, ``ray://HEAD:10001``,
    ``HEAD:6379``, or ``local`` to start a cluster of ``workers`` CPUs here (shut down by :meth:`close`)."""

    def __init__(self, address: str, workers: int, retries: int) -> None:
        from ..rollout.hosting.ray_pool import ray_init

        self.address, self.retries = address, retries
        self._started = address == LOCAL
        ray_init("" if self._started else address, num_cpus=workers if self._started else None)
        import ray

        self._ray = ray
        total = int(ray.cluster_resources().get("CPU", 0)) if not self._started else workers
        self.workers = max(1, total)
        self._remote: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(num_cpus=1, max_retries=self.retries)(fn)
        return remote.remote(*args).future()

    def close(self, abort: bool = False) -> None:
        if self._started:  # (ray.shutdown ends the local cluster's tasks; a remote cluster's go on)
            self._ray.shutdown()

    def describe(self) -> str:
        where = "a local Ray cluster" if self._started else f"the Ray cluster at {self.address}"
        return f"Ray tasks of one CPU on {where} ({self.workers} CPUs; {self.retries} retries a lost task)"


def open_runner(workers: int | None = None, ray_address: str | None = None, retries: int = 2) -> Runner:
    """The process pool (default) or, with ``ray_address``, Ray tasks.

    :raises ConfigError: ``workers`` below 1, or no Ray cluster at ``ray_address`` (one line).
    """
    n = default_workers() if workers is None else workers
    if n < 1:
        raise ConfigError(f"--workers {n}: give at least 1 (default: the {default_workers()} cores here)")
    if ray_address:
        if ray_address == LOCAL:
            worker_env()  # a local cluster's workers inherit this process's environment
        return RayRunner(ray_address, n, retries)
    return ProcessRunner(n)


@contextlib.contextmanager
def interrupt_on_sigterm() -> Any:
    """Inside: SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does, so a driver that is terminated
    runs its cleanup (its pool closed with ``abort``) instead of dying at once and leaving its workers training."""
    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
