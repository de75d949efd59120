"""``abc serve``: any registered env family as an OpenEnv server (OpenEnv's own FastAPI/WebSocket server package).

One WebSocket session (``/ws``) is one env copy in its own process (a crash or hang ends only that session's episode;
no two sessions share an interpreter), started on its first reset and closed when the client sends
``close``, disconnects, or stays idle past ``idle_timeout``. Requests, actions and observations are bounded; a
token guards every route when one is set (binding beyond loopback requires one); web pages of other origins,
Host names that are not this server's (DNS rebinding) and non-JSON POST bodies are refused, token or not; a
client's reset options reach the env only for keys its family opens. Of OpenEnv's routes only ``/ws``,
``/health``, ``/schema`` and ``/metadata`` exist, plus ``/status``: the stateless HTTP ``/reset``/``/step`` of
its simulation mode would build an env per request, its HTTP ``/mcp`` holds sessions no connection ends, and its
Task API has no tasks to serve. A session lives exactly as long as its WebSocket (no attaching by id).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from ...errors import ConfigError
from ...extras import require
from ...io import json_text
from .workers import DEFAULT_STEP_TIMEOUT, EnvRecipe

__all__ = ["LOOPBACK_NAMES", "MAX_EPISODE_ID_CHARS", "MAX_MESSAGE_DEPTH", "MAX_OPTION_CHARS", "MAX_WIRE_ACTION_CHARS",
           "ROUTES", "ServeLimits", "allowed_host", "allowed_origin", "build_app", "child_pids", "client_options",
           "is_loopback", "is_text", "openenv_models", "parse_host", "serve"]

#: How session env processes start: from a fork server (a clean process, the env module preloaded), never a
#: fork of the threaded server itself (a lock held by another thread would be copied held).
START_METHOD = "forkserver"

#: Longest ``text`` field a ``/step`` message may carry (the wire limit, refused with 422 above it): wider than a
#: parsed action (:data:`agentbench_crbc.family.MAX_ACTION_CHARS`, 512), so a client's raw text reaches the env.
MAX_WIRE_ACTION_CHARS = 4096

#: Longest string value a client's reset option may have (integers must fit in 32 bits).
MAX_OPTION_CHARS = 64

#: Longest ``episode_id`` a reset may carry (a string: ``state`` answers it back).
MAX_EPISODE_ID_CHARS = 256


def is_text(value: str) -> bool:
    """``value`` can be sent as UTF-8 (JSON's ``"\\ud800"`` escapes decode to lone surrogates, which cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def client_options(options: Any, allowed: tuple[str, ...], family: str) -> dict[str, Any] | None:
    """The reset options a client sent, when every key is one the family declares safe
    (:attr:`~agentbench_crbc.family.EnvFamily.client_reset_options`) and every value an integer or a short string.

    Checked before any env process starts, so a refused option never reaches the env (nor the filesystem).

    :raises ValueError: anything else (one line, for the client).
    """
    if options is None:
        return None
    if not isinstance(options, dict):
        raise ValueError("options must be an object")
    refused = sorted(str(k)[:40] for k in options if k not in allowed)
    if refused:
        open_ = f"only {', '.join(allowed)}" if allowed else "none (choose the task by seed)"
        raise ValueError(f"reset option(s) {', '.join(map(repr, refused[:5]))} are not open to clients: {family} "
                         f"takes {open_}")
    for key, value in options.items():
        ok = (isinstance(value, int) and not isinstance(value, bool) and -(1 << 31) <= value < 1 << 31) or (
            isinstance(value, str) and len(value) <= MAX_OPTION_CHARS and is_text(value))
        if not ok:
            raise ValueError(f"reset option {key!r} must be an integer or a string of at most {MAX_OPTION_CHARS} "
                             "characters (UTF-8 text)")
    return dict(options) or None


@dataclass(frozen=True)
class ServeLimits:
    """What one server allows.

    :param max_sessions: concurrent sessions (env copies); one more is refused with ``CAPACITY_REACHED``.
    :param idle_timeout: seconds without a message after which a session's env is closed.
    :param max_message_bytes: largest WebSocket message or HTTP body accepted (bigger ones close the connection).
    :param max_observation_bytes: largest observation sent back; a bigger one ends the episode with an error.
    :param step_timeout: seconds a reset or step may take; the session's env process is then killed and the
        episode ends with an error.
    :param env_kwargs: passed to ``gymnasium.make`` (clients asking for other kwargs are refused).
    """

    max_sessions: int = 64
    idle_timeout: float = 300.0
    max_message_bytes: int = 1 << 20
    max_observation_bytes: int = 4 << 20
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)


def openenv_models() -> tuple[type, type, type]:
    """OpenEnv's Action/Observation subclasses of this package (built on first use: openenv is optional)."""
    require("openenv", extra="serve")
    from .session import AbcAction, AbcEnvironment, AbcObservation

    return AbcAction, AbcObservation, AbcEnvironment


def _children(pid: int) -> list[int]:
    out: list[int] = []
    base = f"/proc/{pid}/task"
    try:
        tasks = os.listdir(base)
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"{base}/{t}/children") as fh:
                out += [int(p) for p in fh.read().split()]
        except OSError:
            continue
    return out


def _is_mp_helper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read()
    except OSError:
        return False
    return b"multiprocessing.forkserver" in cmd or b"multiprocessing.resource_tracker" in cmd


def child_pids() -> list[int]:
    """Process ids of this process's descendants that hold envs: every child, grandchild... except
    multiprocessing's forkserver and resource tracker, this process's own children (Linux ``/proc``; empty
    elsewhere). The env processes the forkserver forks share its command line, so they are told apart by where
    they sit in the tree, not by the command line."""
    helpers = {p for p in _children(os.getpid()) if _is_mp_helper(p)}
    seen: set[int] = set()
    todo = _children(os.getpid())
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += _children(pid)
    return sorted(seen - helpers)


#: The names of this machine a Host header may give (with the server's port), besides the ``--host`` itself.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

#: Origins always allowed: pages served from this machine (any port).
_LOCAL_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?")
_ORIGIN = re.compile(r"https?://([a-z0-9.-]+|\[[0-9a-f:.]+\])(:[0-9]{1,5})?")
_HOST_NAME = re.compile(r"[a-z0-9.-]+|[0-9a-f:.]+")


def parse_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a Host header (``localhost:8000``, ``[::1]:8000``, ``example.org``), the name
    lowercased and without brackets; ``None`` when it is malformed."""
    v = value.strip().lower()
    if v.startswith("["):
        name, sep, rest = v[1:].partition("]")
        if not sep:
            return None
    else:
        name, sep, port = v.partition(":")
        rest = sep + port
    if not name or not _HOST_NAME.fullmatch(name):
        return None
    if not rest:
        return name, None
    digits = rest[1:]
    if not rest.startswith(":") or not (digits.isascii() and digits.isdigit()) or len(digits) > 5:
        return None
    return name, int(digits)


def allowed_origin(text: str) -> str:
    """``--allow-origin`` text as browsers send it (``http://host:port``: lowercase, no path or trailing slash).

    :raises ConfigError: not an ``http(s)://host[:port]`` origin.
    """
    o = text.strip().lower().rstrip("/")
    if not _ORIGIN.fullmatch(o):
        raise ConfigError(f"--allow-origin {text!r} must be an origin like http://example.org:3000 (scheme, host, "
                          "optional port; no path)")
    return o


def allowed_host(text: str) -> str:
    """``--allow-host`` text as :func:`parse_host` gives the name (lowercase, no brackets).

    :raises ConfigError: not a host name or address.
    """
    h = text.strip().lower()
    h = h[1:-1] if h.startswith("[") and h.endswith("]") else h
    if not h or not _HOST_NAME.fullmatch(h):
        raise ConfigError(f"--allow-host {text!r} must be a host name or address (no port), like gpu-box.lan")
    return h


class _Guard:
    """ASGI middleware on every HTTP request and WebSocket handshake: the Host header (DNS rebinding) and the
    Origin header (web pages in a browser), the bearer token, JSON bodies only, and a bound on HTTP bodies
    (WebSocket messages are bounded by uvicorn's ``ws_max_size``).

    :param hosts: the names a Host header may give with ``port`` (``None``: the Host is not checked: a server
        bound beyond loopback, which a token guards).
    :param port: the port the server listens on (``None``: any).
    :param extra_hosts: further names a Host header may give, with any port (``--allow-host``).
    :param origins: further origins allowed besides pages on this machine (``--allow-origin``).
    :param idle_timeout: seconds a WebSocket may stay silent while the server waits for it; the guard then closes
        it (code 4408), which ends its session and env process (``None``: never).

    On a WebSocket it also refuses attaching to a session by id (``/ws?session_id=``: each connection is its own
    session, ended with it) and ``mcp`` messages (this server has no MCP tools; OpenEnv's would reach other
    sessions by id), and keeps every text it sends UTF-8 (lone surrogates escaped).
    """

    def __init__(self, app: Any, token: str | None, max_body: int, *, hosts: frozenset[str] | None = None,
                 port: int | None = None, extra_hosts: frozenset[str] = frozenset(),
                 origins: frozenset[str] = frozenset(), idle_timeout: float | None = None) -> None:
        self.app, self.token, self.max_body = app, token, max_body
        self.hosts, self.port, self.extra_hosts, self.origins = hosts, port, extra_hosts, origins
        self.idle_timeout = idle_timeout

    def _authorized(self, scope: Mapping[str, Any]) -> bool:
        if not self.token:
            return True
        headers = dict(scope.get("headers") or [])
        got = headers.get(b"authorization", b"").decode("latin-1")
        return hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode())

    def _refusal(self, scope: Mapping[str, Any]) -> tuple[int, str] | None:
        """``(status, message)`` for a request from the wrong place: a Host not naming this server, an Origin of
        a web page elsewhere."""
        raw = scope.get("headers") or []
        if self.hosts is not None:
            given = [v.decode("latin-1") for k, v in raw if k == b"host"]
            parsed = parse_host(given[0]) if len(given) == 1 else None
            ok = parsed is not None and (parsed[0] in self.extra_hosts or (
                parsed[0] in self.hosts and (self.port is None or parsed[1] == self.port
                                             or (parsed[1] is None and self.port == 80))))
            if not ok:
                shown = repr(given[0][:60]) if len(given) == 1 else f"{len(given)} Host headers"
                where = f":{self.port}" if self.port is not None else ""
                return 421, (f"Host {shown} is not this server: it answers requests addressed to "
                             f"{', '.join(f'[{h}]' if ':' in h else h for h in sorted(self.hosts))} (port "
                             f"{where[1:] or 'any'}); abc serve --allow-host NAME adds a name")
        for k, v in raw:
            if k == b"origin":
                origin = v.decode("latin-1").strip().lower()
                if not _LOCAL_ORIGIN.fullmatch(origin) and origin not in self.origins:
                    return 403, (f"requests from web pages of origin {origin[:60]!r} are refused; abc serve "
                                 "--allow-origin ORIGIN allows one")
        return None

    async def __call__(self, scope: Any, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = self._refusal(scope)
        if refused is not None:
            if kind == "websocket":  # closed before the handshake is accepted: the client gets HTTP 403
                await send({"type": "websocket.close", "code": 4403, "reason": refused[1][:120]})
            else:
                await _reply(send, *refused)
            return
        if not self._authorized(scope):
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 4401, "reason": "missing or wrong token"})
            else:
                await _reply(send, 401, "missing or wrong token: send 'Authorization: Bearer <token>'")
            return
        if kind == "http":
            if scope.get("method") in ("POST", "PUT", "PATCH"):
                ctype = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1")
                if ctype.split(";", 1)[0].strip().lower() != "application/json":
                    await _reply(send, 415, f"request bodies must be 'Content-Type: application/json', got "
                                            f"{ctype[:60]!r}")
                    return
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                await _reply(send, 413, f"request body over this server's limit of {self.max_body} bytes")
                return
            seen = 0

            async def bounded() -> Any:
                nonlocal seen
                msg = await receive()
                seen += len(msg.get("body", b""))
                if seen > self.max_body:
                    raise ValueError("request body over the limit")
                return msg

            await self.app(scope, bounded, send)
            return
        if "session_id" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
            await _refuse_socket(receive, send, "attaching to a session by id is not served: each WebSocket is one "
                                 "session, ended when it closes; connect to /ws without session_id")
            return
        await self._websocket(scope, receive, send)

    async def _websocket(self, scope: Any, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

        closed = False
        pending: asyncio.Future[Any] | None = None

        async def guarded_send(msg: dict[str, Any]) -> None:
            if closed:  # the guard closed the socket for idleness: OpenEnv's own close comes after
                return
            text = msg.get("text")
            if msg.get("type") == "websocket.send" and isinstance(text, str) and not is_text(text):
                msg = {**msg, "text": text.encode("utf-8", "backslashreplace").decode("ascii", "replace")}
            await send(msg)

        async def guarded_receive() -> Any:
            nonlocal closed, pending
            while not closed:
                if pending is None:
                    pending = asyncio.ensure_future(receive())
                done, _ = await asyncio.wait({pending}, timeout=self.idle_timeout)
                if not done:  # silent while the server waited for it: the session ends with its socket
                    closed = True
                    with contextlib.suppress(OSError, RuntimeError):
                        await send({"type": "websocket.close", "code": 4408, "reason": (
                            f"idle for {self.idle_timeout:g} s: the session is closed; reconnect and reset")})
                    break
                msg, pending = pending.result(), None
                refusal = _refused_message(msg.get("text")) if msg.get("type") == "websocket.receive" else None
                if refusal is not None:  # answered here, the session goes on (OpenEnv would end it)
                    await send({"type": "websocket.send", "text": json_text({"type": "error", "data": {
                        "message": refusal[1], "code": refusal[0]}})})
                    continue
                return msg
            return {"type": "websocket.disconnect", "code": 1000}

        try:
            # the client left while OpenEnv answered it: the session is closed all the same, nothing to log
            with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected):
                await self.app(scope, guarded_receive, guarded_send)
        finally:
            if pending is not None:
                pending.cancel()


#: Deepest nesting a WebSocket message may have (OpenEnv's handling recursed past Python's limit near 500).
MAX_MESSAGE_DEPTH = 32


def _refused_message(text: Any) -> tuple[str, str] | None:
    """``(code, message)`` of an error answering a WebSocket text message the guard does not pass on, in this
    server's words (OpenEnv would answer these with Python's own exception text and end the session): a message
    that is no JSON object (``[]``, ``null``, ``1``, ``"x"``, ``true``), one nested over
    :data:`MAX_MESSAGE_DEPTH` levels or holding an integer over Python's digit limit, text holding a lone surrogate
    (a JSON ``"\\ud800"`` escape alone), and ``mcp`` messages (this server has no MCP tools; OpenEnv's would reach
    other sessions by id). Malformed JSON is OpenEnv's to answer (``INVALID_JSON``; the session goes on)."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None  # OpenEnv answers what is no JSON itself, and the session goes on
    except RecursionError:
        return ("INVALID_JSON", f"the message is nested over {MAX_MESSAGE_DEPTH} levels deep; send "
                '{"type": ..., "data": {...}} with plain values')
    except ValueError:  # an integer literal beyond Python's digit limit (4,300)
        return ("INVALID_JSON", "the message holds an integer of over 4,300 digits; send numbers of sensible size")
    if not isinstance(value, dict):
        return ("INVALID_JSON", f"a message must be a JSON object like {{\"type\": \"step\", \"data\": "
                f"{{\"text\": \"up\"}}}}, not {_json_kind(value)}")
    problem = _walk(value)
    if problem == "deep":
        return ("INVALID_JSON", f"the message is nested over {MAX_MESSAGE_DEPTH} levels deep; send "
                '{"type": ..., "data": {...}} with plain values')
    if problem == "surrogate":
        return ("INVALID_TEXT", "the message holds a lone surrogate (a \\ud800-\\udfff escape alone), which is no "
                "text; send UTF-8 text")
    if value.get("type") == "mcp":
        return ("UNKNOWN_TYPE", "mcp messages are not served (this server has no MCP tools); send reset, step, state "
                "or close")
    return None


def _json_kind(value: Any) -> str:
    """How a JSON value is named in an error: ``an array``, ``null``, ``a number``, ``a string``, ``a boolean``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


def _walk(value: Any) -> str | None:
    """``"deep"`` when ``value`` nests over :data:`MAX_MESSAGE_DEPTH` levels, ``"surrogate"`` when a string (key or
    value) holds a lone surrogate, else ``None``; iterative, so no depth can exhaust the stack."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, str):
            if not is_text(v):
                return "surrogate"
        elif isinstance(v, dict | list):
            if depth > MAX_MESSAGE_DEPTH:
                return "deep"
            items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
            for k, x in items:
                if isinstance(k, str) and not is_text(k):
                    return "surrogate"
                todo.append((x, depth + 1))
    return None


async def _refuse_socket(receive: Callable[..., Any], send: Callable[..., Any], message: str) -> None:
    """Accept a WebSocket only to say why it is refused (one OpenEnv error message), then close it (1008)."""
    if (await receive()).get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": json_text({"type": "error", "data": {
        "message": message, "code": "SESSION_ERROR"}})})
    await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})


async def _reply(send: Callable[..., Any], code: int, message: str) -> None:
    body = json_text({"error": message}).encode()
    await send({"type": "http.response.start", "status": code,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def build_app(env: str, limits: ServeLimits | None = None, *, token: str | None = None, host: str = "127.0.0.1",
              port: int | None = None, allow_hosts: Sequence[str] = (),
              allow_origins: Sequence[str] = ()) -> tuple[Any, Any]:
    """The ASGI app serving ``env`` (a family name or Gymnasium id) and OpenEnv's ``HTTPEnvServer`` behind it.

    :param host: the address the server listens on: a loopback one makes every request's Host header name
        :data:`LOOPBACK_NAMES`, ``host`` or one of ``allow_hosts`` (DNS rebinding), with ``port`` (``None``: any).
    :param allow_origins: origins (``http://host:port``) allowed besides pages on this machine.
    :raises UnknownNameError: ``env`` is no registered family or id.
    :raises ConfigError: a malformed ``allow_hosts`` or ``allow_origins`` entry.
    """
    extra_hosts = frozenset(allowed_host(h) for h in allow_hosts)
    origins = frozenset(allowed_origin(o) for o in allow_origins)
    bound = host.strip("[]").lower()
    hosts = frozenset({*LOOPBACK_NAMES, bound}) if is_loopback(bound) else None
    from ...family import resolve_env

    limits = limits or ServeLimits()
    resolved = resolve_env(env)
    AbcAction, AbcObservation, AbcEnvironment = openenv_models()
    from fastapi import FastAPI
    from openenv.core.env_server.http_server import HTTPEnvServer
    from openenv.core.env_server.types import ConcurrencyConfig

    spec = EnvRecipe(resolved.env_id, dict(limits.env_kwargs))
    make = functools.partial(AbcEnvironment, spec, limits, resolved.family.name,
                             resolved.family.client_reset_options)
    server = HTTPEnvServer(make, AbcAction, AbcObservation,
                           concurrency_config=ConcurrencyConfig(max_concurrent_envs=limits.max_sessions,
                                                                session_timeout=None),
                           env_name=resolved.family.name)
    app = FastAPI(title=f"agentbench-crbc {resolved.family.name}", docs_url=None, redoc_url=None, openapi_url=None)
    server.register_routes(app, mode="production")
    # OpenEnv's production mode also mounts its Task API (answering 501 for envs without tasks), a WebSocket
    # and an HTTP /mcp (whose openenv/session/create holds a session with no connection): only these stay
    app.router.routes[:] = [r for r in app.router.routes if _documented(r)]

    @app.get("/status")
    def status() -> dict[str, Any]:
        return {"family": resolved.family.name, "env_id": resolved.env_id, "active_sessions": server.active_sessions,
                "max_sessions": limits.max_sessions, "child_processes": len(child_pids())}

    return _Guard(app, token, limits.max_message_bytes, hosts=hosts, port=port, extra_hosts=extra_hosts,
                  origins=origins, idle_timeout=limits.idle_timeout), server


#: The routes ``abc serve`` mounts of OpenEnv's (``/status`` is its own): HTTP GETs, and the session WebSocket.
ROUTES = ("/health", "/schema", "/metadata", "/ws")


def _documented(route: Any) -> bool:
    from starlette.routing import WebSocketRoute

    path = getattr(route, "path", None)
    if path == "/ws":
        return isinstance(route, WebSocketRoute)
    return path in ROUTES and not isinstance(route, WebSocketRoute) and set(getattr(route, "methods", ())) <= {
        "GET", "HEAD"}


def _preload(env: str) -> None:
    """The fork server imports the env's module once; each session's env process forks from it in milliseconds."""
    import multiprocessing as mp

    from ...family import resolve_env

    r = resolve_env(env)
    module = r.family.env_id(r.env_id).entry_point.partition(":")[0]
    mp.get_context(START_METHOD).set_forkserver_preload(["agentbench_crbc.rollout.hosting.workers", module])


def is_loopback(host: str) -> bool:
    """``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(env: str, *, host: str = "127.0.0.1", port: int = 8000, limits: ServeLimits | None = None,
          token: str | None = None, allow_remote: bool = False, allow_hosts: Sequence[str] = (),
          allow_origins: Sequence[str] = (), out: Any = None) -> None:
    """Serve ``env`` until interrupted; prints one line naming the URL first (port 0: a free port).

    ``allow_hosts`` and ``allow_origins``: see :func:`build_app`.

    :raises ConfigError: a non-loopback ``host`` without ``allow_remote`` and a token.
    """
    if not is_loopback(host):
        if not allow_remote:
            raise ConfigError(f"--host {host} reaches beyond this machine; pass --allow-remote and set a token "
                              "(ABC_SERVE_TOKEN or --token-file) to serve other machines")
        if not token:
            raise ConfigError(f"--host {host} with --allow-remote needs a token: set ABC_SERVE_TOKEN or pass "
                              "--token-file")
    limits = limits or ServeLimits()
    for h in allow_hosts:  # refused before the port is taken
        allowed_host(h)
    for o in allow_origins:
        allowed_origin(o)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port (0: any free "
                          "port)") from None
    bound = sock.getsockname()[1]
    try:  # the app checks Host headers against the port bound (port 0: the free one chosen)
        app, _ = build_app(env, limits, token=token, host=host, port=bound, allow_hosts=allow_hosts,
                           allow_origins=allow_origins)
        _preload(env)
        require("uvicorn", extra="serve")
    except BaseException:
        sock.close()
        raise
    import uvicorn

    from ...family import resolve_env

    sock.listen(2048)  # connections made after the startup line wait in the backlog until uvicorn accepts them
    config = uvicorn.Config(app, log_level="warning", ws_max_size=limits.max_message_bytes,
                            ws_per_message_deflate=False, timeout_keep_alive=5, lifespan="on")
    shown = f"[{host}]" if ":" in host else host
    r = resolve_env(env)
    print(f"abc serve: {r.family.name} ({r.env_id}) at ws://{shown}:{bound}/ws  (max {limits.max_sessions} "
          f"sessions, idle timeout {limits.idle_timeout:g} s{', token required' if token else ''}; Ctrl-C stops)",
          file=out or sys.stdout, flush=True)
    uvicorn.Server(config).run(sockets=[sock])
