"""OpenEnv's own client (``EnvClient``) for ``abc serve``: what an outside script or TRL uses (needs ``[serve]``)."""

from __future__ import annotations

import os
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import State

from ...errors import EnvError
from .remote import TOKEN_ENV, check_token, from_observation, redact
from .serve import openenv_models
from .wire import decode

__all__ = ["AbcEnvClient"]


class AbcEnvClient(EnvClient):  # type: ignore[misc,type-arg]
    """A client of one ``abc serve`` session: ``reset(seed=...)`` then ``step("up")`` (text or an ``AbcAction``).

    ``result.observation`` has ``text``, ``admissible_actions``, ``anchor``, ``subtask``, ``success``,
    ``action_valid``, ``terminated``, ``truncated`` (``anchor`` and ``info`` decoded to Python values);
    ``client.sync()`` gives the blocking form. The token defaults to ``$ABC_SERVE_TOKEN``. ``step`` takes a string
    or anything with a string ``text``; anything else (``None`` included) raises :class:`EnvError` before a message
    is sent, the session untouched.

    A reply out of shape (not a JSON object, a field of the wrong type, a bad wire encoding, ``"false"`` for a
    flag) is never taken at its word: the result is ``done`` with ``observation.error`` saying what was wrong, as
    for an env that failed on the server.
    """

    def __init__(self, base_url: str, *, token: str | None = None, **kwargs: Any) -> None:
        token = check_token(token if token is not None else os.environ.get(TOKEN_ENV), token is not None)
        headers = dict(kwargs.pop("headers", None) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        base = base_url.rstrip("/")  # the URL `abc serve` prints ends in /ws; OpenEnv adds it itself
        super().__init__(base_url=base[:-3] if base.endswith("/ws") else base, headers=headers or None, **kwargs)

    def _step_payload(self, action: Any) -> dict[str, Any]:
        text = action if isinstance(action, str) else getattr(action, "text", None)
        if not isinstance(text, str):  # None included: an episode has no "no-op" step
            raise EnvError(f"step() takes the action's text (e.g. step('up')) or an AbcAction, got "
                           f"{type(action).__name__}; reset(seed=...) starts an episode, step(None) is no action")
        return {"text": text}

    async def _receive(self) -> dict[str, Any]:
        try:
            reply = await super()._receive()
        except (ValueError, RecursionError) as exc:  # not JSON, or nested past the parser's depth
            return _bad(f"the reply is not JSON ({type(exc).__name__})")
        if not isinstance(reply, dict):
            return _bad(f"the reply must be a JSON object, got {type(reply).__name__}")
        if reply.get("type") == "error" and not isinstance(reply.get("data"), dict):
            return _bad("the error reply's data must be an object")
        return reply

    def _parse_result(self, payload: Any) -> StepResult:
        _, AbcObservation, _ = openenv_models()
        try:
            obs = _observation(AbcObservation, payload)
        except (EnvError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            why = " ".join(str(exc).split())
            obs = AbcObservation(done=True, reward=0.0, error=redact(
                f"malformed reply from the server: {why if len(why) <= 300 else why[:297] + '...'}"))
        return StepResult(observation=obs, reward=obs.reward, done=obs.done)

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)


def _bad(why: str) -> dict[str, Any]:
    return {"type": "observation", "data": {"observation": {"error": f"malformed reply from the server: {why}"},
                                            "done": True, "reward": 0.0}}


def _observation(model: type, payload: Any) -> Any:
    """The client's observation of one reply's ``data``, checked as the remote pool checks it."""
    from_observation(payload)  # shapes, flags, reward and the wire encoding of obs and info (raises EnvError)
    o = dict(payload["observation"])
    if not isinstance(payload.get("done", False), bool):
        raise EnvError(f"'done' must be true or false, got {type(payload.get('done')).__name__}")
    o["anchor"], o["info"] = decode(o.get("anchor")), decode(o.get("info") or {})
    return model.model_validate({**o, "done": payload.get("done", False), "reward": payload.get("reward")},
                                strict=True)
