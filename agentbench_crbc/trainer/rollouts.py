"""The rollout runners of one trainer: group rollouts of the config's env, reused across updates, closed with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..io import json_text
from ..rollout.episodes.base import SamplingParams
from .config import TrainConfig

__all__ = ["Rollouts", "env_backend"]


def env_backend(cfg: TrainConfig) -> Any:
    """The :class:`~agentbench_crbc.rollout.hosting.workers.EnvBackend` of ``rollout.env_backend`` and its keys."""
    from ..rollout import EnvBackend

    r = cfg.rollout
    workers = r.env_workers if r.env_workers or r.env_backend == "process" else None
    return EnvBackend(r.env_backend, urls=tuple(r.remote_urls), ray_address=r.ray_address, workers=workers)


class Rollouts:
    """Owns the :class:`~agentbench_crbc.rollout.RolloutRunner` instances (and their in-process env copies) of one
    run, one per (engine, prompt builder, G, gate), so every update reuses its envs; :meth:`close` closes them.

    A context manager: ``with Rollouts(cfg) as rollouts: ...``.
    """

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self._runners: dict[tuple[int, int, int, str, str], Any] = {}

    def collect(self, engine: Any, builder: Any, seeds: list[int], *, group_size: int, sampling: SamplingParams,
                prefix: str = "g", gate: str = "", should_stop: Callable[[], bool] | None = None,
                on_step: Any = None, env_kwargs: dict[str, Any] | None = None) -> list[Any]:
        """G copies of each seed's task through ``engine``; returns the groups.

        :param gate: a registered group gate (training rollouts pass ``rollout.gate``; validation none).
        :param should_stop: and ``on_step`` go to :meth:`RolloutRunner.collect` (a stop returns partial groups).
        :param env_kwargs: ``gymnasium.make`` kwargs of the env copies (default ``env.kwargs``; validation passes
            the family's held-out pool).
        """
        from ..rollout import RolloutRunner, RunnerConfig

        cfg = self.cfg
        kwargs = dict(cfg.env.kwargs if env_kwargs is None else env_kwargs)
        key = (id(engine), id(builder), group_size, gate, json_text(kwargs, sort_keys=True, default=str))
        runner = self._runners.get(key)
        if runner is None:
            runner = RolloutRunner(cfg.env.id, engine, builder, RunnerConfig(
                group_size=group_size, sampling=sampling, max_steps=cfg.env.max_steps,
                invalid_penalty=cfg.env.invalid_penalty, num_workers=0, env_kwargs=kwargs, gate=gate or None,
                gate_options=cfg.rollout.gate_options, constrain=cfg.rollout.constrain, env_backend=env_backend(cfg)))
            self._runners[key] = runner
        runner.sampling = sampling
        return runner.collect(seeds, group_prefix=prefix, should_stop=should_stop, on_step=on_step)

    def close(self) -> None:
        """Close every runner (their env copies); the next :meth:`collect` builds new ones."""
        runners, self._runners = list(self._runners.values()), {}
        for r in runners:
            r.close()

    def __enter__(self) -> Rollouts:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

