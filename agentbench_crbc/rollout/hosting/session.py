"""One ``abc serve`` session's OpenEnv models: the action, the observation and the env copy behind them (this
module imports openenv: reach it through :func:`~agentbench_crbc.rollout.hosting.serve.openenv_models`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from ...family import ADMISSIBLE_ACTIONS
from ...io import json_text
from .serve import (
    MAX_EPISODE_ID_CHARS,
    MAX_WIRE_ACTION_CHARS,
    START_METHOD,
    ServeLimits,
    client_options,
    is_text,
)
from .wire import encode, error_line
from .workers import EnvRecipe, ProcessEnvPool, SlotResult

__all__ = ["AbcAction", "AbcEnvironment", "AbcObservation"]


class AbcAction(Action):  # type: ignore[misc,valid-type]
    """One step: the action text, exactly what the in-process env receives."""

    text: str = Field(max_length=MAX_WIRE_ACTION_CHARS, description="the action, e.g. 'up' or 'go to desk 1'")


class AbcObservation(Observation):  # type: ignore[misc,valid-type]
    """An env answer: the fields a client reads, and ``obs``/``info`` in the package's wire encoding
    (:mod:`agentbench_crbc.rollout.hosting.wire`) so a trainer gets exactly what the in-process env returned."""

    text: str = ""
    image: Any = Field(default=None, description="pixel envs: the RGB array, wire-encoded")
    anchor: Any = None
    admissible_actions: list[str] | None = None
    subtask: str | None = None
    success: bool = False
    action_valid: bool | None = None
    terminated: bool = False
    truncated: bool = False
    expert_action: str | None = None
    error: str | None = None
    obs: Any = Field(default=None, description="an observation neither text nor image, wire-encoded")
    info: dict[str, Any] = Field(default_factory=dict)


class AbcEnvironment(Environment):  # type: ignore[misc,valid-type]
    """One session's env copy (built lazily: OpenEnv's ``/metadata`` makes an instance per request)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, spec: EnvRecipe, limits: ServeLimits, family: str = "this env",
                 reset_options: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._spec, self._limits = spec, limits
        self._family, self._reset_options = family, tuple(reset_options)
        self._pool: ProcessEnvPool | None = None
        self._expert = False
        self._live = self._closed = False
        self._episode: str | None = None
        self._steps = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              options: dict[str, Any] | None = None, expert: bool = False, env_id: str | None = None,
              env_kwargs: dict[str, Any] | None = None, **unknown: Any) -> Any:
        self._check_open()
        if unknown:
            raise ValueError(f"unknown reset field(s) {', '.join(sorted(unknown))}; this server takes seed, "
                             "options, expert, env_id, env_kwargs, episode_id")
        if env_id is not None and env_id != self._spec.env_id:
            raise ValueError(f"this server serves {self._spec.env_id}, not {env_id}; start "
                             f"`abc serve --env {env_id}` for it")
        if env_kwargs is not None and encode(dict(env_kwargs)) != encode(dict(self._spec.kwargs)):
            raise ValueError(f"this server's env kwargs are {json_text(encode(dict(self._spec.kwargs)))}, "
                             "not the ones asked for; start `abc serve` with the same --set options")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if episode_id is not None and not (isinstance(episode_id, str) and len(episode_id) <= MAX_EPISODE_ID_CHARS
                                           and is_text(episode_id)):
            shown = type(episode_id).__name__ if not isinstance(episode_id, str) else "too long a string"
            raise ValueError(f"episode_id must be a string of at most {MAX_EPISODE_ID_CHARS} characters (or left "
                             f"out), got {shown}")
        if not isinstance(expert, bool):  # bool("false") is True: a string would turn the expert on
            raise ValueError(f"expert must be true or false, got {str(expert)[:40]!r}")
        options = client_options(options, self._reset_options, self._family)
        if self._pool is None or self._expert != expert:
            self._close_pool()
            self._expert = expert
            self._pool = ProcessEnvPool(self._spec, 1, num_workers=1, with_expert=self._expert,
                                 step_timeout=self._limits.step_timeout, start_method=START_METHOD)
        r = self._pool.reset({0: 0 if seed is None else seed}, options)[0]
        self._episode, self._steps = episode_id, 0
        return self._answer(r)

    def step(self, action: Any, timeout_s: float | None = None, **unknown: Any) -> Any:
        self._check_open()
        if not self._live:
            raise ValueError("no episode is running in this session: send a reset first")
        if not is_text(action.text):
            raise ValueError("the action holds a lone surrogate (a \\ud800-\\udfff escape alone), which is no "
                             "text; send UTF-8 text")
        r = self._pool.step({0: action.text})[0]  # type: ignore[union-attr]
        self._steps += 1
        return self._answer(r)

    @property
    def state(self) -> Any:
        return State(episode_id=self._episode, step_count=self._steps)

    def close(self) -> None:
        self._closed, self._live = True, False
        self._close_pool()

    def _close_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this session was closed (idle timeout); reconnect and reset")

    def _answer(self, r: SlotResult) -> Any:
        if r.error is not None:
            self._live = False
            return AbcObservation(done=True, reward=0.0, error=error_line(r.error))
        info = encode(r.info)
        text = r.obs if isinstance(r.obs, str) else str(r.info.get("text", ""))
        image = encode(r.obs) if isinstance(r.obs, np.ndarray) else None
        obs = None if isinstance(r.obs, str) or image is not None else encode(r.obs)
        size = len(text) + len(json_text(info)) + len(json_text(image)) + len(json_text(obs))
        if size > self._limits.max_observation_bytes:
            self._live = False
            self._close_pool()
            return AbcObservation(done=True, reward=0.0, error=(
                f"the observation has {size} bytes, over this server's limit of "
                f"{self._limits.max_observation_bytes} (abc serve --max-observation-bytes)"))
        done = r.terminated or r.truncated
        self._live = not done
        adm = r.info.get(ADMISSIBLE_ACTIONS)
        sub = r.info.get("subtask")
        valid = r.info.get("action_valid")
        exp = r.info.get("expert_action")
        return AbcObservation(
            done=done, reward=float(r.reward), text=text, image=image,
            anchor=info.get("anchor"), admissible_actions=list(adm) if isinstance(adm, (list, tuple)) else None,
            subtask=None if sub is None else str(sub), success=bool(r.info.get("success", False)),
            action_valid=None if valid is None else bool(valid), terminated=r.terminated,
            truncated=r.truncated, expert_action=exp if isinstance(exp, str) else None, obs=obs, info=info)
