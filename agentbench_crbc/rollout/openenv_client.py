"""OpenEnv's own client (``EnvClient``) for ``abc serve``: what an outside script or TRL uses (needs ``[serve]``)."""

from __future__ import annotations

import os
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import State

from .remote import TOKEN_ENV
from .serve import _models
from .wire import decode

__all__ = ["AbcEnvClient"]


class AbcEnvClient(EnvClient):  # type: ignore[misc,type-arg]
    """A client of one ``abc serve`` session: ``reset(seed=...)`` then ``step("up")`` (text or an ``AbcAction``).

    ``result.observation`` has ``text``, ``admissible_actions``, ``anchor``, ``subtask``, ``success``,
    ``action_valid``, ``terminated``, ``truncated`` (``anchor`` and ``info`` decoded to Python values);
    ``client.sync()`` gives the blocking form. The token defaults to ``$ABC_SERVE_TOKEN``.
    """

    def __init__(self, base_url: str, *, token: str | None = None, **kwargs: Any) -> None:
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = dict(kwargs.pop("headers", None) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        base = base_url.rstrip("/")  # the URL `abc serve` prints ends in /ws; OpenEnv adds it itself
        super().__init__(base_url=base[:-3] if base.endswith("/ws") else base, headers=headers or None, **kwargs)

    def _step_payload(self, action: Any) -> dict[str, Any]:
        return {"text": action if isinstance(action, str) else action.text}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult:
        _, AbcObservation, _ = _models()
        o = dict(payload.get("observation") or {})
        o["anchor"], o["info"] = decode(o.get("anchor")), decode(o.get("info") or {})
        obs = AbcObservation.model_validate({**o, "done": payload.get("done", False),
                                             "reward": payload.get("reward")})
        return StepResult(observation=obs, reward=payload.get("reward"), done=bool(payload.get("done", False)))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
