"""Test helper: `abc serve` in a child process on 127.0.0.1 (a free port), stopped with its process group."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import pytest

from tests._ci import unavailable

__all__ = ["Server", "die_with_parent", "need_serve"]


def need_serve() -> None:
    """The `serve` extra's modules, or a skip (a failure under CI=true)."""
    for mod in ("openenv", "uvicorn", "websockets"):
        try:
            __import__(mod)
        except ImportError:
            unavailable(f"{mod} is not installed: pip install 'agentbench-crbc[serve]'")


def die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the test process dies, so no server outlives a killed run."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Server:
    """``abc serve ARGS --port 0`` started at construction; :attr:`url` is the URL its startup line names."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        # a file, not a pipe: a pipe nobody reads fills and blocks the server's logging
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen([sys.executable, "-m", "agentbench_crbc", "serve", *args, "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env={**os.environ, **(env or {})}, start_new_session=True,
                                     preexec_fn=die_with_parent)
        self._url: str | None = None
        self.line = ""

    @property
    def url(self) -> str:
        if self._url is None:
            self.line = self.proc.stdout.readline()  # type: ignore[union-attr]
            m = re.search(r"ws://(\S+)/ws", self.line)
            if m is None:
                self.stop()
                pytest.fail(f"abc serve did not start: {self.line!r} {self.stderr()[-2000:]!r}")
            self._url = f"ws://{m.group(1)}/ws"
        return self._url

    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        self.log.seek(0)
        return self.log.read()

    @property
    def http(self) -> str:
        return self.url.replace("ws://", "http://")[: -len("/ws")]

    def status(self, token: str | None = None) -> dict[str, Any]:
        req = urllib.request.Request(self.http + "/status",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def wait_idle(self, timeout: float = 20.0, token: str | None = None) -> dict[str, Any]:
        """The status once no session is open (or the last one seen after ``timeout`` seconds)."""
        end = time.monotonic() + timeout
        while True:
            st = self.status(token)
            if (st["active_sessions"] == 0 and st["child_processes"] == 0) or time.monotonic() > end:
                return st
            time.sleep(0.1)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()
