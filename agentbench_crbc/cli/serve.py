"""``abc serve``: any registered env family as an OpenEnv server (WebSocket sessions, one env copy each)."""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any

from ..argtypes import bounded_float, bounded_int
from ..errors import ConfigError
from ..rollout.hosting.workers import DEFAULT_STEP_TIMEOUT
from .commands import COMMANDS

__all__ = ["MAX_SECONDS", "register"]

#: Longest --idle-timeout / --step-timeout (the env pool's waits take at most about 2**31 milliseconds).
MAX_SECONDS = 1e6


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help=COMMANDS["serve"],
                       description="One WebSocket session (ws://HOST:PORT/ws) is one env copy: reset with a seed "
                       "gives the same task as in process. Example: abc serve --env sokoban --port 8000")
    p.add_argument("--env", required=True, help="an env family (its default id) or a Gymnasium id (`abc envs`)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default loopback; any other needs --allow-remote and a token)")
    p.add_argument("--port", type=bounded_int(0, 65535), default=8000,
                   help="TCP port (0: any free port; the startup line names it)")
    p.add_argument("--max-sessions", type=bounded_int(1, 4096), default=64, help="concurrent sessions (env copies)")
    p.add_argument("--idle-timeout", type=bounded_float(0, MAX_SECONDS, lo_open=True), default=300.0,
                   help="seconds without a message after which a session's WebSocket and env are closed")
    p.add_argument("--max-message-bytes", type=bounded_int(1, 1 << 30), default=1 << 20,
                   help="largest request (WebSocket message or HTTP body) accepted")
    p.add_argument("--max-observation-bytes", type=bounded_int(1, 1 << 30), default=4 << 20,
                   help="largest observation sent; a bigger one ends the episode with an error")
    p.add_argument("--step-timeout", type=bounded_float(0, MAX_SECONDS, lo_open=True), default=DEFAULT_STEP_TIMEOUT,
                   help="seconds an env may take to reset or step; its process is then killed and the episode "
                   "ends with an error")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a --host beyond loopback (a token is then required)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web origin (http://host:port) whose pages may call the server from a browser; pages "
                   "on this machine (localhost, 127.0.0.1, [::1]) always may, others are refused; repeatable")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a further name requests may address a loopback server by (the Host header; default only "
                   "localhost, 127.0.0.1, ::1 and --host with the server's port), e.g. behind a proxy; repeatable")
    p.add_argument("--token-file", default=None,
                   help="file holding the bearer token clients must send (default: $ABC_SERVE_TOKEN, if set)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="env keyword argument, VALUE parsed as JSON when it parses; repeatable (clients must "
                   "ask for the same ones)")
    p.set_defaults(func=run)


def _token(args: argparse.Namespace) -> str | None:
    """The token from ``--token-file`` (one line; its newline is not part of it) or ``$ABC_SERVE_TOKEN``.

    :raises ConfigError: an empty file, or a token a client could never send as given: more than one line,
        surrounding or inner whitespace, characters that are not printable ASCII.
    """
    from ..rollout.hosting.remote import TOKEN_ENV, sendable_token

    if args.token_file:
        from ..io import read_text

        where = f"--token-file {args.token_file}"
        text = read_text(args.token_file, error=ConfigError, where=where, max_bytes=2**16)
        token = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
        if not token.strip():
            raise ConfigError(f"{where} is empty; write the token into it")
    else:
        token, where = os.environ.get(TOKEN_ENV, ""), f"${TOKEN_ENV}"
        if not token:
            return None
    if "\n" in token or "\r" in token:
        raise ConfigError(f"{where} holds more than one line; a token is one line")
    if not sendable_token(token):
        raise ConfigError(f"{where}: a token is printable ASCII without spaces (clients send it in an HTTP header "
                          "as 'Bearer TOKEN', so surrounding spaces or other characters never match); remove them")
    return token


def run(args: argparse.Namespace) -> int:
    from ..extras import require_env
    from ..family import resolve_env
    from ..rollout.hosting.serve import ServeLimits, serve
    from ..trainer.config import check_env_kwargs
    from .rollout import parse_kv

    token = _token(args)
    resolved = resolve_env(args.env)
    require_env(resolved.family.name)
    env_kwargs = parse_kv(args.set, "--set")
    check_env_kwargs(resolved.env_id, env_kwargs, "--set")  # built once now, not failing at every reset
    limits = ServeLimits(max_sessions=args.max_sessions, idle_timeout=args.idle_timeout,
                         max_message_bytes=args.max_message_bytes, max_observation_bytes=args.max_observation_bytes,
                         step_timeout=args.step_timeout, env_kwargs=env_kwargs)
    with contextlib.suppress(KeyboardInterrupt):
        serve(args.env, host=args.host, port=args.port, limits=limits, token=token,
              allow_remote=args.allow_remote, allow_hosts=args.allow_host, allow_origins=args.allow_origin)
    return 0
