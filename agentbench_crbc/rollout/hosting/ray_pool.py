"""The Ray env pool: env copies in Ray actors on a cluster, with the process pool's per-slot semantics (an actor that
dies or does not answer within ``step_timeout`` turns its slots into errors and is replaced at the next reset)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ...extras import require
from .workers import DEFAULT_STEP_TIMEOUT, EnvSlots, SlotResult

__all__ = ["RayEnvPool", "ray_init"]

log = logging.getLogger(__name__)

#: Ray's switch that makes a node bind to 127.0.0.1 instead of its network address ("0": loopback only).
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class _ActorSlots(EnvSlots):
    """The env slots of one actor (the same code a worker process runs)."""

    def __init__(self, make: Callable[[], Any], with_expert: bool) -> None:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        super().__init__(make, with_expert)

    def pid(self) -> int:
        return os.getpid()


def _unreachable(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers at a ``[ray://]host:port`` address (``None``: it answers, or it is no such address)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({exc.strerror or exc})"
    return None


def ray_init(address: str = "", *, num_cpus: int | None = None) -> None:
    """Connect to the Ray cluster at ``address`` (``auto``: the running one; ``ray://host:port``; empty: start a
    local one on 127.0.0.1 with ``num_cpus`` CPUs, default all) unless this process is connected already.

    :raises ConfigError: no cluster answers at ``address`` (one line: the address and Ray's reason).
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not address:  # a local cluster on loopback (read when ray is first imported, by every Ray process too)
        os.environ.setdefault(LOCAL_ONLY_ENV, "0")
    require("ray", extra="ray")
    if address and (why := _unreachable(address)):  # Ray itself retries a dead host:port for minutes
        raise ConfigError(f"cannot reach a Ray cluster at {address!r}: {why}; start one with `ray start --head` and "
                          "give `auto`, `ray://HEAD:10001` or HEAD:6379")
    import ray

    if ray.is_initialized():
        return
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=num_cpus, **kw)
    except Exception as exc:  # ConnectionError, ValueError (a malformed address), grpc errors of a ray:// client
        reason = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        where = f"at {address!r}" if address else "on this machine"
        raise ConfigError(f"cannot start or reach a Ray cluster {where}: {reason[:300]}; start one with `ray start "
                          "--head` and give `auto`, `ray://HEAD:10001` or HEAD:6379") from None


class RayEnvPool:
    """``n_envs`` env slots spread over ``num_actors`` Ray actors (slot ``i`` lives in actor ``i % num_actors``).

    :param make: an :class:`~agentbench_crbc.rollout.hosting.workers.EnvRecipe` or any picklable env factory.
    :param address: the cluster (:func:`ray_init`).
    :param actor_cpus: CPUs Ray reserves per actor (0: actors are placed regardless of free CPUs).
    """

    def __init__(self, make: Callable[[], Any], n_envs: int, *, num_actors: int | None = None,
                 with_expert: bool = False, step_timeout: float = DEFAULT_STEP_TIMEOUT, address: str = "",
                 actor_cpus: float = 0.0) -> None:
        ray_init(address)
        import ray

        self.make, self.n_envs, self.with_expert, self.step_timeout = make, n_envs, with_expert, step_timeout
        if num_actors is None:
            num_actors = min(n_envs, int(ray.cluster_resources().get("CPU", 1)) or 1)
        self.num_actors = max(1, min(num_actors, n_envs))
        self._cls = ray.remote(num_cpus=actor_cpus, max_restarts=0)(_ActorSlots)
        self._actors: list[Any] = [None] * self.num_actors

    def actor_of(self, slot: int) -> int:
        return slot % self.num_actors

    def actor_pids(self) -> list[int | None]:
        """Process ids of the live actors (tests kill one)."""
        import ray

        return [ray.get(a.pid.remote()) if a is not None else None for a in self._actors]

    def _drop(self, a: int, why: str) -> None:
        import ray

        actor, self._actors[a] = self._actors[a], None
        if actor is not None:
            log.warning("env actor %d lost: %s; its episodes end as failures", a, why)
            with contextlib.suppress(Exception):  # already dead
                ray.kill(actor, no_restart=True)

    def _call(self, cmd: str, items: Sequence[tuple[Any, ...]]) -> dict[int, SlotResult]:
        import ray
        from ray.exceptions import RayActorError, RayError

        by_actor: dict[int, list[tuple[Any, ...]]] = {}
        for it in items:
            by_actor.setdefault(self.actor_of(it[0]), []).append(it)
        out: dict[int, SlotResult] = {}
        refs: dict[Any, int] = {}
        for a, batch in by_actor.items():
            if self._actors[a] is None:
                if cmd != "reset":
                    out.update({it[0]: SlotResult(error=f"env actor {a} is not running") for it in batch})
                    continue
                self._actors[a] = self._cls.remote(self.make, self.with_expert)
            refs[self._actors[a].run.remote(cmd, batch)] = a
        ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=self.step_timeout) if refs else ([], [])
        for ref in ready:
            a = refs[ref]
            try:
                out.update(dict(ray.get(ref)))
            except (RayActorError, RayError) as exc:
                why = f"actor died ({type(exc).__name__})"
                self._drop(a, why)
                out.update({it[0]: SlotResult(error=f"env actor {a} lost: {why}") for it in by_actor[a]})
        for ref in late:
            a = refs[ref]
            why = f"no answer within {self.step_timeout:.0f} s"
            self._drop(a, why)
            out.update({it[0]: SlotResult(error=f"env actor {a} lost: {why}") for it in by_actor[a]})
        return out

    def reset(self, seeds: Mapping[int, int], options: dict[str, Any] | None = None) -> dict[int, SlotResult]:
        """Reset slots ``{slot: seed}``; lost actors are replaced first."""
        return self._call("reset", [(s, seed, options) for s, seed in seeds.items()])

    def step(self, actions: Mapping[int, str]) -> dict[int, SlotResult]:
        """Step slots ``{slot: action}`` in parallel."""
        return self._call("step", list(actions.items()))

    def close(self) -> None:
        """Kill every actor (their envs are closed first when they answer within 10 s)."""
        import ray

        live = [a for a in self._actors if a is not None]
        if live:
            with contextlib.suppress(Exception):
                ray.get([a.close.remote() for a in live], timeout=10)
        for a in range(self.num_actors):
            actor, self._actors[a] = self._actors[a], None
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)

    def __enter__(self) -> RayEnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
