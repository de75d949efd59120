"""Ctrl-C, SIGTERM and a broken stdout as a flag the training loop polls, so it can checkpoint at the next safe
point."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["PipeGuard", "StopSignal", "Stopped"]


class Stopped(KeyboardInterrupt):
    """A stop signal arrived while the trainer was in a step that polls nothing (validation, expert labelling):
    that step is abandoned, and the loop checkpoints where the run is."""


def _broken(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno in (errno.EPIPE,
                                                                                           errno.ECONNRESET))


class PipeGuard:
    """A text stream (``sys.stdout``/``sys.stderr``) whose reader may go away (``abc train | tee`` with ``tee``
    killed): the first EPIPE points the stream's descriptor at ``os.devnull`` (later writes vanish, the interpreter's
    final flush cannot fail) and calls ``on_break`` once."""

    def __init__(self, stream: TextIO, on_break: Any) -> None:
        self._stream, self._on_break, self.broken = stream, on_break, False

    def _break(self) -> None:
        if self.broken:
            return
        self.broken = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        self._on_break()

    def _guarded(self, call: Any) -> bool:
        """Run ``call()``; an EPIPE breaks the stream instead of raising. Returns whether it ran through."""
        try:
            call()
            return True
        except OSError as exc:
            if not _broken(exc):
                raise
            self._break()
            return False

    def write(self, text: str) -> int:
        if not self.broken:
            self._guarded(lambda: self._stream.write(text))
        return len(text)

    def flush(self) -> None:
        if self.broken or not self._guarded(self._stream.flush):
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()  # the buffer drains into os.devnull now

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class StopSignal:
    """SIGINT/SIGTERM (and SIGPIPE, or EPIPE on stdout or stderr) set a flag; the loop checkpoints at the next safe
    point and exits (a second Ctrl-C kills). Inside :meth:`now`, a signal raises :class:`Stopped` at once.

    A context manager that installs the handlers (and the stdout/stderr guards); calling it returns the flag.
    """

    def __init__(self) -> None:
        self.flag = False
        self._now = 0
        self._old: dict[int, Any] = {}
        self._streams: dict[str, Any] = {}

    def __enter__(self) -> StopSignal:
        sigs = [signal.SIGINT, signal.SIGTERM]
        if hasattr(signal, "SIGPIPE"):
            sigs.append(signal.SIGPIPE)
        for sig in sigs:
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if not isinstance(stream, PipeGuard):
                self._streams[name] = stream
                setattr(sys, name, PipeGuard(stream, lambda name=name: self._pipe(name)))
        return self

    def _pipe(self, name: str) -> None:
        first = not self.flag
        self.flag = True
        if first:
            print(f"\nstopping: {name} is closed (the reader went away); saving a checkpoint at the next safe point",
                  file=sys.stdout if name == "stderr" else sys.stderr, flush=True)

    def _handle(self, signum: int, frame: Any) -> None:
        pipe = signum == getattr(signal, "SIGPIPE", None)
        if not pipe and self.flag and not self._now:
            raise KeyboardInterrupt
        if pipe:
            self._pipe("a pipe")
        self.flag = True
        if self._now:
            raise Stopped
        if pipe:
            return
        print("\nstopping: saving a checkpoint at the next safe point (Ctrl-C again to abort)", flush=True)

    @contextlib.contextmanager
    def now(self) -> Iterator[None]:
        """A step that polls nothing: a stop signal (or one already flagged) raises :class:`Stopped` here."""
        if self.flag:
            raise Stopped
        self._now += 1
        try:
            yield
        finally:
            self._now -= 1

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        for name, stream in self._streams.items():
            guard = getattr(sys, name)
            if isinstance(guard, PipeGuard) and not guard.broken:
                setattr(sys, name, stream)  # a broken one stays guarded: the exit path still prints

    def __call__(self) -> bool:
        return self.flag
