"""``abc serve``: any registered env family as an OpenEnv server (WebSocket sessions, one env copy each)."""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any

from ..errors import ConfigError
from .commands import COMMANDS

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help=COMMANDS["serve"],
                       description="One WebSocket session (ws://HOST:PORT/ws) is one env copy: reset with a seed "
                       "gives the same task as in process. Example: abc serve --env sokoban --port 8000")
    p.add_argument("--env", required=True, help="an env family (its default id) or a Gymnasium id (`abc envs`)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default loopback; any other needs --allow-remote and a token)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port; the startup line names it)")
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent sessions (env copies)")
    p.add_argument("--idle-timeout", type=float, default=300.0,
                   help="seconds without a message after which a session's env is closed")
    p.add_argument("--max-message-bytes", type=int, default=1 << 20,
                   help="largest request (WebSocket message or HTTP body) accepted")
    p.add_argument("--max-observation-bytes", type=int, default=4 << 20,
                   help="largest observation sent; a bigger one ends the episode with an error")
    p.add_argument("--step-timeout", type=float, default=300.0,
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
    from ..rollout.remote import TOKEN_ENV

    if args.token_file:
        from ..io import read_text

        token = read_text(args.token_file, error=ConfigError, where=f"--token-file {args.token_file}",
                          max_bytes=2**16).strip()
        if not token:
            raise ConfigError(f"--token-file {args.token_file} is empty; write the token into it")
        return token
    return os.environ.get(TOKEN_ENV) or None


def run(args: argparse.Namespace) -> int:
    from ..extras import require_env
    from ..family import resolve_env
    from ..rollout.serve import ServeLimits, serve
    from .rollout import _kv

    for name in ("max_sessions", "max_message_bytes", "max_observation_bytes"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    for name in ("idle_timeout", "step_timeout"):
        if not getattr(args, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be a positive number of seconds, got "
                              f"{getattr(args, name)}")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be 0-65535, got {args.port}")
    family = resolve_env(args.env).family
    require_env(family.name)
    limits = ServeLimits(max_sessions=args.max_sessions, idle_timeout=args.idle_timeout,
                         max_message_bytes=args.max_message_bytes, max_observation_bytes=args.max_observation_bytes,
                         step_timeout=args.step_timeout, env_kwargs=_kv(args.set, "--set"))
    with contextlib.suppress(KeyboardInterrupt):
        serve(args.env, host=args.host, port=args.port, limits=limits, token=_token(args),
              allow_remote=args.allow_remote, allow_hosts=args.allow_host, allow_origins=args.allow_origin)
    return 0
