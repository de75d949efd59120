"""Environment worker processes: env copies live in child processes (one pipe each); a dead, hung or raising
environment is reported per slot instead of stopping the rollout. :class:`EnvBackend` picks this pool, the remote
one (``abc serve`` servers) or the Ray one, all three with the same per-slot semantics."""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol, runtime_checkable

from ...family import find_family

__all__ = [
    "DEFAULT_STEP_TIMEOUT",
    "ENV_BACKENDS",
    "EnvBackend",
    "EnvPool",
    "EnvRecipe",
    "EnvSlots",
    "ProcessEnvPool",
    "SlotResult",
    "find_expert",
]

log = logging.getLogger(__name__)

#: Seconds one env step (or reset) may take before its slot is ended as hung: the one default of every env pool,
#: the rollout runner, ``abc rollout`` and ``abc serve``.
DEFAULT_STEP_TIMEOUT = 300.0


@dataclass(frozen=True)
class EnvRecipe:
    """A picklable recipe for one environment: a Gymnasium id and kwargs (every registered family's ids are
    registered before it is made, so a third-party family's ids work without importing its package)."""

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self) -> Any:
        import gymnasium as gym

        from ...family import ensure_gym_ids

        ensure_gym_ids()
        kw = dict(self.kwargs)
        kw.setdefault("disable_env_checker", True)
        return gym.make(self.env_id, **kw)

    __call__ = make


@dataclass(frozen=True, slots=True)
class SlotResult:
    """The answer of one env slot to reset (``reward``/``terminated``/``truncated`` unused) or step; ``error`` is
    set when the env raised or its worker died, and the slot's episode is then over."""

    obs: Any = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def find_expert(env: Any) -> Callable[[Any], Callable[[Any, Any], str]] | None:
    """The ``expert_policy(env)`` factory of the env's family (:attr:`~agentbench_crbc.family.EnvFamily.expert`,
    found by the env's Gymnasium id); an env no family declares: an ``expert_policy`` (or ``oracle_policy``) in
    the env class's module or its parent packages."""
    spec = getattr(env, "spec", None) or getattr(env.unwrapped, "spec", None)
    found = find_family(spec.id) if spec is not None and getattr(spec, "id", None) else None
    if found is not None:
        return found.family.load("expert")  # type: ignore[no-any-return]
    mod = type(env.unwrapped).__module__
    while mod:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            m = None
        for name in ("expert_policy", "oracle_policy"):
            fn = getattr(m, name, None)
            if callable(fn):
                return fn  # type: ignore[no-any-return]
        mod = mod.rpartition(".")[0]
    return None


class EnvSlots:
    """Env copies of one process; each command answers per slot, catching what an env raises."""

    def __init__(self, make: Callable[[], Any], with_expert: bool) -> None:
        self.make = make
        self.with_expert = with_expert
        self.envs: dict[int, Any] = {}
        self.experts: dict[int, Any] = {}

    def _expert(self, slot: int, obs: Any, info: dict[str, Any]) -> dict[str, Any]:
        if not self.with_expert:
            return info
        info = dict(info)
        try:
            info["expert_action"] = self.experts[slot](obs, info)
        except Exception as exc:  # an expert that fails leaves the action unknown
            info["expert_action"] = None
            info["expert_error"] = repr(exc)
        return info

    def reset(self, slot: int, seed: int, options: dict[str, Any] | None) -> SlotResult:
        try:
            env = self.envs.get(slot)
            if env is None:
                env = self.envs[slot] = self.make()
            obs, info = env.reset(seed=int(seed), options=options)
            info = dict(info)
            if self.with_expert:
                fn = find_expert(env)
                if fn is None:
                    raise RuntimeError(f"{type(env.unwrapped).__name__} has no expert_policy")
                self.experts[slot] = fn(env)
            return SlotResult(obs, info=self._expert(slot, obs, info))
        except Exception:
            self.envs.pop(slot, None)
            return SlotResult(error=traceback.format_exc(limit=4))

    def step(self, slot: int, action: str) -> SlotResult:
        try:
            obs, r, term, trunc, info = self.envs[slot].step(action)
            info = dict(info)
            if not (term or trunc):
                info = self._expert(slot, obs, info)
            return SlotResult(obs, float(r), bool(term), bool(trunc), info)
        except Exception:
            self.envs.pop(slot, None)
            return SlotResult(error=traceback.format_exc(limit=4))

    def close(self) -> None:
        for env in self.envs.values():
            with contextlib.suppress(Exception):
                env.close()
        self.envs.clear()

    def run(self, cmd: str, payload: Any) -> Any:
        if cmd == "reset":
            return [(s, self.reset(s, seed, opt)) for s, seed, opt in payload]
        if cmd == "step":
            return [(s, self.step(s, a)) for s, a in payload]
        if cmd == "pid":
            return os.getpid()
        raise ValueError(cmd)


def _worker_main(conn: Connection, make: Callable[[], Any], with_expert: bool) -> None:
    # the parent shuts workers down (closing their pipes): a signal to the whole process group (Ctrl-C, `timeout`)
    # must not raise the parent's handlers, inherited through fork, as tracebacks here; SIGTERM alone still ends one
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    slots = EnvSlots(make, with_expert)
    try:
        while True:
            try:
                cmd, payload = conn.recv()
            except (EOFError, KeyboardInterrupt):
                break
            if cmd == "close":
                break
            conn.send(slots.run(cmd, payload))
    finally:
        slots.close()
        conn.close()



@runtime_checkable
class EnvPool(Protocol):
    """What every env pool offers the rollout runner and the env server: :class:`ProcessEnvPool` (worker processes
    here), ``RemoteEnvPool`` (``abc serve`` over OpenEnv) and ``RayEnvPool`` (Ray actors). Slots are numbered
    ``0..n_envs-1``; a slot whose env failed or hung answers a :class:`SlotResult` with ``error`` set, never raises."""

    def reset(self, seeds: Mapping[int, int], options: dict[str, Any] | None = None) -> dict[int, SlotResult]:
        """Reset the given slots with their task seeds."""

    def step(self, actions: Mapping[int, str]) -> dict[int, SlotResult]:
        """Step the given slots with one action each."""

    def close(self) -> None:
        """End every env copy (idempotent)."""


class ProcessEnvPool:
    """``n_envs`` env slots spread over ``num_workers`` processes (slot ``i`` lives in worker ``i % num_workers``).

    Commands go to every involved worker before any answer is awaited, so workers step in parallel. A worker that
    dies (killed, segfault, ``os._exit``) or does not answer within ``step_timeout`` seconds turns every slot it held
    into an error result; it is restarted on the next reset. ``num_workers=0`` runs the envs in this process.

    :param make: an :class:`EnvRecipe` or any picklable zero-argument callable returning an env.
    :param with_expert: add ``info["expert_action"]`` (the env's expert on that observation) to every answer.
    :param start_method: multiprocessing start method; default ``fork`` on Linux (milliseconds; workers never
        touch torch), else ``spawn``. ``forkserver`` and ``spawn`` re-import the ``__main__`` script in every worker
        (seconds when it imports torch).
    """

    def __init__(self, make: Callable[[], Any], n_envs: int, *, num_workers: int | None = None,
                 with_expert: bool = False, step_timeout: float = DEFAULT_STEP_TIMEOUT,
                 start_method: str | None = None) -> None:
        self.make = make
        self.n_envs = n_envs
        if num_workers is None:
            num_workers = min(n_envs, os.cpu_count() or 1)
        self.num_workers = max(0, min(num_workers, n_envs))
        self.with_expert = with_expert
        self.step_timeout = step_timeout
        if start_method is None:
            start_method = "fork" if sys.platform.startswith("linux") else "spawn"
        self._ctx: Any = mp.get_context(start_method)
        self._procs: list[Any] = [None] * self.num_workers
        self._conns: list[Connection | None] = [None] * self.num_workers
        self._local = EnvSlots(make, with_expert) if self.num_workers == 0 else None

    # -- process management ---------------------------------------------------------------------------------
    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self.make, self.with_expert), daemon=True,
                                 name=f"abc-env-worker-{w}")
        with warnings.catch_warnings():  # 3.12+: fork beside torch's threads; workers never touch torch
            warnings.simplefilter("ignore", DeprecationWarning)
            proc.start()
        child.close()
        self._procs[w], self._conns[w] = proc, parent

    def _drop(self, w: int, why: str) -> None:
        proc, conn = self._procs[w], self._conns[w]
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
            log.warning("env worker %d (pid %s) lost: %s (exit code %s); its episodes end as failures",
                        w, proc.pid, why, proc.exitcode)
        if conn is not None:
            conn.close()
        self._procs[w], self._conns[w] = None, None

    def worker_pids(self) -> list[int | None]:
        """Process ids of the workers (None where not running); tests kill one to check crash handling."""
        return [p.pid if p is not None and p.is_alive() else None for p in self._procs]

    def worker_of(self, slot: int) -> int:
        return slot % self.num_workers if self.num_workers else 0

    # -- commands -------------------------------------------------------------------------------------------
    def _call(self, cmd: str, items: Sequence[tuple[Any, ...]]) -> dict[int, SlotResult]:
        if self._local is not None:
            return dict(self._local.run(cmd, items))
        by_worker: dict[int, list[tuple[Any, ...]]] = {}
        for it in items:
            by_worker.setdefault(self.worker_of(it[0]), []).append(it)
        out: dict[int, SlotResult] = {}
        waiting: dict[Any, int] = {}
        for w, batch in by_worker.items():
            if self._conns[w] is None:
                if cmd != "reset":
                    for it in batch:
                        out[it[0]] = SlotResult(error=f"env worker {w} is not running")
                    continue
                self._start(w)
            try:
                self._conns[w].send((cmd, batch))  # type: ignore[union-attr]
                waiting[self._conns[w]] = w
            except (BrokenPipeError, OSError) as exc:
                self._fail(w, batch, out, f"send failed: {exc!r}")
        deadline = time.monotonic() + self.step_timeout
        while waiting:
            sentinels = {self._procs[w].sentinel: w for w in waiting.values()}  # type: ignore[union-attr]
            ready = wait(list(waiting) + list(sentinels), timeout=max(deadline - time.monotonic(), 0))
            if not ready:
                for w in list(waiting.values()):
                    self._fail(w, by_worker[w], out, f"no answer within {self.step_timeout:.0f} s")
                break
            for r in ready:
                w = waiting.get(r) if r in waiting else sentinels.get(r)  # type: ignore[arg-type,assignment]
                if w is None or self._conns[w] is None or self._conns[w] not in waiting:
                    continue
                conn = self._conns[w]
                try:
                    if r is conn or conn.poll():  # type: ignore[union-attr]
                        reply = conn.recv()  # type: ignore[union-attr]
                        out.update(dict(reply))
                        del waiting[conn]
                        continue
                except (EOFError, OSError):
                    pass
                del waiting[conn]
                self._fail(w, by_worker[w], out, "worker process died")
        return out

    def _fail(self, w: int, batch: Sequence[tuple[Any, ...]], out: dict[int, SlotResult], why: str) -> None:
        proc = self._procs[w]
        code = proc.exitcode if proc is not None else None
        self._drop(w, why)
        for it in batch:
            out[it[0]] = SlotResult(error=f"env worker {w} lost: {why} (exit code {code})")

    def reset(self, seeds: dict[int, int], options: dict[str, Any] | None = None) -> dict[int, SlotResult]:
        """Reset slots ``{slot: seed}``; dead workers are restarted first."""
        return self._call("reset", [(s, seed, options) for s, seed in seeds.items()])

    def step(self, actions: dict[int, str]) -> dict[int, SlotResult]:
        """Step slots ``{slot: action}`` in parallel."""
        return self._call("step", list(actions.items()))

    def close(self) -> None:
        """Stop every worker (or close the in-process envs)."""
        if self._local is not None:
            self._local.close()
            return
        for conn in self._conns:
            if conn is not None:
                with contextlib.suppress(BrokenPipeError, OSError):
                    conn.send(("close", None))
        for w, proc in enumerate(self._procs):
            if proc is not None:
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=5)
            if self._conns[w] is not None:
                self._conns[w].close()  # type: ignore[union-attr]
            self._procs[w], self._conns[w] = None, None

    def __enter__(self) -> ProcessEnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The env pools a rollout can use (``rollout.env_backend``).
ENV_BACKENDS = ("process", "remote", "ray")


@dataclass(frozen=True)
class EnvBackend:
    """Where a rollout's env copies live: ``process`` (:class:`ProcessEnvPool`, worker processes of this machine),
    ``remote`` (:class:`~agentbench_crbc.rollout.hosting.remote.RemoteEnvPool`: sessions on ``abc serve`` servers at
    ``urls``) or ``ray`` (:class:`~agentbench_crbc.rollout.hosting.ray_pool.RayEnvPool`: Ray actors on the cluster at
    ``ray_address``). All three answer per slot, report a dead or hung env as an error and never hang a rollout.

    :param workers: process backend: worker processes (None: the caller's choice); ray: actors (None or 0: one
        per cluster CPU, at most one per env).
    :param token: remote servers' bearer token (None: ``$ABC_SERVE_TOKEN``).
    """

    kind: str = "process"
    urls: tuple[str, ...] = ()
    ray_address: str = ""
    workers: int | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        from ...errors import ConfigError

        if self.kind not in ENV_BACKENDS:
            raise ConfigError(f"env backend {self.kind!r} is not one of {', '.join(ENV_BACKENDS)}")
        if self.kind == "remote" and not self.urls:
            raise ConfigError("the remote env backend needs server URLs (rollout.remote_urls: the `abc serve` "
                              "servers, host:port or ws://host:port)")
        if self.urls:
            from .remote import ws_url

            for url in self.urls:
                ws_url(url)  # a URL no server can have is refused here, before any env is built

    def pool(self, make: Callable[[], Any], n_envs: int, *, num_workers: int | None = None,
             with_expert: bool = False, step_timeout: float = DEFAULT_STEP_TIMEOUT) -> EnvPool:
        """A pool of ``n_envs`` slots of ``make``'s env (an :class:`EnvRecipe` for ``remote``: its id and kwargs
        are checked against the servers')."""
        workers = self.workers if self.workers is not None else num_workers
        if self.kind == "remote":
            from .remote import RemoteEnvPool

            spec = make if isinstance(make, EnvRecipe) else None
            return RemoteEnvPool(self.urls, n_envs, env_id=spec.env_id if spec else None,
                                 env_kwargs=spec.kwargs if spec else None, with_expert=with_expert,
                                 step_timeout=step_timeout, token=self.token)
        if self.kind == "ray":
            from .ray_pool import RayEnvPool

            return RayEnvPool(make, n_envs, num_actors=workers or None, with_expert=with_expert,
                              step_timeout=step_timeout, address=self.ray_address)
        return ProcessEnvPool(make, n_envs, num_workers=workers, with_expert=with_expert, step_timeout=step_timeout)
