"""The remote env pool: env slots as sessions on ``abc serve`` (OpenEnv) servers, load-balanced and reconnecting,
with the process pool's per-slot semantics (an error, a lost connection or a timeout ends only that slot's episode).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigError, EnvError
from ...extras import require
from ...io import json_text
from .wire import decode, encode
from .workers import DEFAULT_STEP_TIMEOUT, SlotResult

__all__ = ["TOKEN_ENV", "RemoteEnvPool", "check_token", "from_observation", "redact", "sendable_token",
           "ws_url"]

log = logging.getLogger(__name__)

#: The environment variable holding the bearer token of ``abc serve`` (server and clients read it).
TOKEN_ENV = "ABC_SERVE_TOKEN"


_USERINFO = re.compile(r"(://[^/@:]*):([^/@]*)@")
#: Longest server error text a slot's error keeps.
MAX_ERROR_CHARS = 300


def redact(url: str) -> str:
    """``url`` with the password of a ``scheme://user:password@host`` form replaced by ``***`` (errors and logs
    show this form only)."""
    return _USERINFO.sub(r"\1:***@", url)


def sendable_token(token: str) -> bool:
    """Whether a client can send ``token`` as ``Authorization: Bearer TOKEN`` and a server match it: printable ASCII
    without spaces (the one rule ``abc serve`` and its clients share)."""
    return all("!" <= c <= "~" for c in token)


def check_token(token: str | None, explicit: bool) -> str | None:
    """``token`` (``None`` or empty: none), when a client can send it as ``Authorization: Bearer TOKEN``: printable
    ASCII without spaces, as ``abc serve`` requires of its own.

    :raises ConfigError: any other token, in one line that never shows it (websockets' error quoted the header).
    """
    if token and not sendable_token(token):
        where = "the token given" if explicit else f"${TOKEN_ENV}"
        raise ConfigError(f"{where} is not printable ASCII without spaces or line breaks, so no `abc serve` accepts "
                          "it (clients send it in an HTTP header); fix it")
    return token or None


#: A host a server URL may name: a DNS name or IPv4 address, or an IPv6 address (in brackets in the URL).
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]+")


def ws_url(url: str) -> str:
    """The WebSocket session URL of a server given as ``host:port``, ``http(s)://...`` or ``ws(s)://...``.

    :raises ConfigError: any other scheme, no host (``ws://``), a host that is no name or address, a port that is no
        number in [1, 65535], or a query or fragment (one line, the password hidden).
    """
    from urllib.parse import urlsplit

    u = url.strip() if isinstance(url, str) else ""
    if "://" not in u:
        u = "ws://" + u
    scheme, rest = u.split("://", 1)
    scheme = {"http": "ws", "https": "wss"}.get(scheme.lower(), scheme.lower())
    try:
        parts = urlsplit(f"{scheme}://{rest}")
        port, host = parts.port, parts.hostname
    except ValueError:
        port = host = None
        parts = None
    if (parts is None or scheme not in ("ws", "wss") or not host or not _HOST.fullmatch(host) or port == 0
            or parts.query or parts.fragment or (port is None and parts.netloc.rstrip("]").endswith(":"))):
        raise ConfigError(f"remote env server {redact(str(url))!r} must be host:port or an http(s):// or ws(s):// URL "
                          "with a host (e.g. gpu-box:8000 or ws://10.0.0.5:8000)")
    path = parts.path.rstrip("/")
    if not path.endswith("/ws"):
        path += "/ws"
    return f"{scheme}://{parts.netloc}{path}"


def _clip(text: str, n: int = MAX_ERROR_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."


def _flag(o: Mapping[str, Any], name: str, default: bool | None = False) -> bool | None:
    value = o.get(name, default)
    if value is None and default is None:
        return None
    if not isinstance(value, bool):
        raise EnvError(f"{name!r} must be true or false, got {_clip(repr(value), 40)}")
    return value


def _reward(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EnvError(f"the reward must be a number, got {_clip(repr(value), 40)}")
    if isinstance(value, int) and abs(value) > 1 << 53:
        raise EnvError(f"the reward {_clip(str(value), 40)} is beyond the exactly representable integers")
    if not math.isfinite(value):
        raise EnvError(f"the reward must be finite, got {value!r}")
    return float(value)


def from_observation(data: Any) -> SlotResult:
    """A :class:`SlotResult` from an OpenEnv observation message's ``data`` that ``abc serve`` sent; a reply out
    of that shape (a field of the wrong type, a bad wire encoding) raises :class:`~agentbench_crbc.errors.EnvError`
    saying which."""
    if not isinstance(data, Mapping):
        raise EnvError(f"the observation message's data must be an object, got {type(data).__name__}")
    o = data.get("observation")
    if not isinstance(o, Mapping):
        raise EnvError(f"the observation must be an object, got {type(o).__name__}")
    if o.get("error") is not None:
        return SlotResult(error=f"remote env: {_clip(o['error'])}")
    raw = o.get("obs") if o.get("obs") is not None else o.get("image")
    if raw is not None:
        obs = decode(raw)
    else:
        obs = o.get("text", "")
        if not isinstance(obs, str):
            raise EnvError(f"the observation text must be a string, got {type(obs).__name__}")
    info = decode(o.get("info") if o.get("info") is not None else {})
    if not isinstance(info, dict):
        raise EnvError(f"the observation info must be an object, got {type(info).__name__}")
    if "success" in info:
        _flag(info, "success")
    _flag(o, "success")
    return SlotResult(obs, _reward(data.get("reward")), bool(_flag(o, "terminated")), bool(_flag(o, "truncated")),
                      info)


def _fence(text: str | bytes) -> int:
    """The step count of the ``state`` reply that must follow each answer (see ``RemoteEnvPool._ask``); any other
    frame there means the server sent a reply too many or too few, so the answer may belong to another request."""
    try:
        reply = json.loads(text)
    except (ValueError, RecursionError):
        reply = None
    if not isinstance(reply, dict) or reply.get("type") != "state":
        got = reply.get("type") if isinstance(reply, dict) else type(reply).__name__
        raise EnvError(f"a reply of type {_clip(repr(got), 40)} came where the state was due: the server sent "
                       "more or fewer replies than requests, so replies no longer match their requests")
    data = reply.get("data")
    steps = data.get("step_count") if isinstance(data, Mapping) else None
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise EnvError(f"the state reply's step_count must be an integer, got {_clip(repr(steps), 40)}")
    return steps


def _answer(text: str | bytes, url: str) -> SlotResult:
    """The slot result of one reply frame: an observation, or a server error as the slot's error."""
    try:
        reply = json.loads(text)
    except RecursionError:
        raise EnvError("the reply is nested too deeply") from None
    except ValueError as exc:
        raise EnvError(f"the reply is not JSON ({_clip(str(exc), 80)})") from None
    if not isinstance(reply, dict):
        raise EnvError(f"the reply must be a JSON object, got {type(reply).__name__}")
    if reply.get("type") == "observation":
        return from_observation(reply.get("data"))
    if reply.get("type") != "error":
        raise EnvError(f"unknown reply type {_clip(repr(reply.get('type')), 40)}")
    data = reply.get("data")
    if not isinstance(data, Mapping):
        return SlotResult(error=f"remote env {url}: error: {_clip(repr(data))}")
    return SlotResult(error=f"remote env {url}: {_clip(str(data.get('code', 'error')), 60)}: "
                            f"{_clip(str(data.get('message', reply)))}")


class RemoteEnvPool:
    """``n_envs`` env slots, each one WebSocket session on one of ``urls`` (``abc serve`` servers).

    A slot connects on its first reset to the server holding the fewest of this pool's sessions (ties: slot order),
    and to the next one when that fails. A slot whose connection breaks or whose server does not answer within
    ``step_timeout`` gets an error result; its connection is closed (the server closes its env) and the slot
    reconnects at the next reset. Server-side env errors end the slot's episode the same way. Each reset and step is
    sent with a ``state`` request behind it: a reply that is not the state where the state is due, or a step count
    other than the slot's, means a reply answered another request (a server that sent two frames for one), and the
    slot's episode ends with an error rather than take a stale reply for its answer.

    :param env_id: and ``env_kwargs``: sent with every reset; a server serving another env refuses the reset.
    :param token: the servers' bearer token (default: ``$ABC_SERVE_TOKEN``).
    """

    def __init__(self, urls: Sequence[str], n_envs: int, *, env_id: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, with_expert: bool = False,
                 step_timeout: float = DEFAULT_STEP_TIMEOUT, connect_timeout: float = 30.0, token: str | None = None,
                 max_message_bytes: int = 64 << 20) -> None:
        if not urls:
            raise ConfigError("rollout.remote_urls is empty: list the `abc serve` servers (host:port or ws://...)")
        require("websockets", extra="remote")
        self.urls = [ws_url(u) for u in urls]
        self._secrets = sorted({m.group(2) for u in self.urls for m in _USERINFO.finditer(u)} - {""},
                               key=len, reverse=True)  # longest first: one password inside another stays hidden
        self.n_envs = n_envs
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs) if env_kwargs is not None else None
        self.with_expert = with_expert
        self.step_timeout = step_timeout
        self.connect_timeout = connect_timeout
        self.token = check_token(token if token is not None else os.environ.get(TOKEN_ENV), token is not None)
        self.max_message_bytes = max_message_bytes
        self._conns: dict[int, Any] = {}
        self._server_of: dict[int, int] = {}
        self._steps: dict[int, int] = {}  # per slot: the steps of its episode, as the server must count them
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="abc-remote-env-pool", daemon=True)
        self._thread.start()

    # -- connections ----------------------------------------------------------------------------------------
    def _order(self, slot: int) -> list[int]:
        load = [0] * len(self.urls)
        for s, i in self._server_of.items():
            if s != slot:
                load[i] += 1
        return sorted(range(len(self.urls)), key=lambda i: (load[i], (i - slot) % len(self.urls)))

    async def _connect(self, slot: int) -> str | None:
        import websockets

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        errors = []
        for i in self._order(slot):
            self._server_of[slot] = i  # counted before the await, so concurrent connects spread out
            try:
                conn = await asyncio.wait_for(websockets.connect(
                    self.urls[i], additional_headers=headers, max_size=self.max_message_bytes,
                    open_timeout=self.connect_timeout, ping_interval=20, ping_timeout=60), self.connect_timeout)
            except (TimeoutError, OSError, websockets.exceptions.WebSocketException) as exc:
                errors.append(self._scrub(f"{self.urls[i]}: {type(exc).__name__}: {exc}"))
                continue
            self._conns[slot] = conn
            return None
        self._server_of.pop(slot, None)
        return "no remote env server answered (" + "; ".join(errors) + ")"

    async def _drop(self, slot: int) -> None:
        conn = self._conns.pop(slot, None)
        self._server_of.pop(slot, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2.0)

    async def _ask(self, slot: int, message: dict[str, Any], *, connect: bool) -> SlotResult:
        if slot not in self._conns:
            if not connect:
                return SlotResult(error=f"remote env slot {slot} has no session (its connection was lost)")
            why = await self._connect(slot)
            if why is not None:
                return SlotResult(error=why)
        conn, url = self._conns[slot], redact(self.urls[self._server_of[slot]])
        kind = message["type"]
        try:
            # the request and a `state` fence, sent together: the server answers them in order, so the second
            # reply must be the state; a leftover or missing frame shows there instead of becoming a stale answer
            await conn.send(json_text(message))
            await conn.send(json_text({"type": "state"}))
            text = await asyncio.wait_for(conn.recv(), self.step_timeout)
            fence = await self._fence_or_error(conn, text, url)
            if isinstance(fence, SlotResult):  # the server refused and closed the session (capacity reached)
                await self._drop(slot)
                return fence
        except TimeoutError:
            await self._drop(slot)
            return SlotResult(error=f"remote env {url} gave no answer within {self.step_timeout:.0f} s")
        except Exception as exc:  # a closed or broken connection
            await self._drop(slot)
            why = self._scrub(f"{type(exc).__name__}: {exc}")
            log.warning("remote env slot %d lost its session on %s: %s; its episode ends as a failure",
                        slot, url, why)
            return SlotResult(error=f"remote env {url} lost: {why}")
        try:
            result = _answer(text, url)
            steps = _fence(fence)
            want = 0 if kind == "reset" else self._steps.get(slot, 0) + 1
            if result.error is None and steps != want:
                raise EnvError(f"the server counts {steps} step(s) where this {kind} makes {want}: a reply "
                               "answered another request")
        except Exception as exc:  # any reply out of shape or out of order ends this slot's episode, never the rollout
            await self._drop(slot)  # what the server holds for this session is unknown now: start afresh
            why = self._scrub(_clip(str(exc) if isinstance(exc, EnvError) else f"{type(exc).__name__}: {exc}"))
            log.warning("remote env slot %d got a malformed reply from %s: %s; its episode ends as a failure",
                        slot, url, why)
            return SlotResult(error=f"remote env {url} sent a malformed reply: {why}")
        if result.error is None:
            self._steps[slot] = want
        return result

    async def _fence_or_error(self, conn: Any, text: str | bytes, url: str) -> str | bytes | SlotResult:
        """The frame after the answer ``text``; when the connection ends there and ``text`` is the server's error
        (OpenEnv closes a session it refuses), that error as the slot's result."""
        try:
            return await asyncio.wait_for(conn.recv(), self.step_timeout)
        except Exception:
            with contextlib.suppress(Exception):
                first = _answer(text, url)
                if first.error is not None:
                    return first
            raise

    def _scrub(self, text: str) -> str:
        """``text`` with every server URL's password replaced by ``***`` (errors may quote the URL)."""
        text = redact(text)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _run(self, messages: Mapping[int, dict[str, Any]], *, connect: bool) -> dict[int, SlotResult]:
        async def gather() -> dict[int, SlotResult]:
            slots = list(messages)
            res = await asyncio.gather(*(self._ask(s, messages[s], connect=connect) for s in slots))
            return dict(zip(slots, res, strict=False))

        return asyncio.run_coroutine_threadsafe(gather(), self._loop).result()

    # -- the pool protocol ------------------------------------------------------------------------------------
    def reset(self, seeds: Mapping[int, int], options: dict[str, Any] | None = None) -> dict[int, SlotResult]:
        """Reset slots ``{slot: seed}`` (connecting the slots that have no session)."""
        base: dict[str, Any] = {"options": encode(options) if options is not None else None,
                                "expert": self.with_expert}
        if self.env_id is not None:
            base["env_id"] = self.env_id
        if self.env_kwargs is not None:
            base["env_kwargs"] = encode(self.env_kwargs)
        return self._run({s: {"type": "reset", "data": {**base, "seed": int(seed)}} for s, seed in seeds.items()},
                         connect=True)

    def step(self, actions: Mapping[int, str]) -> dict[int, SlotResult]:
        """Step slots ``{slot: action}`` concurrently."""
        return self._run({s: {"type": "step", "data": {"text": a}} for s, a in actions.items()}, connect=False)

    def sessions(self) -> dict[int, str]:
        """``{slot: server URL}`` of the open sessions."""
        return {s: self.urls[i] for s, i in self._server_of.items()}

    def close(self) -> None:
        """Close every session (the servers close their envs) and stop the event loop."""
        if self._loop.is_closed():
            return

        async def close_all() -> None:
            await asyncio.gather(*(self._drop(s) for s in list(self._conns)))

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> RemoteEnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
