"""The run folder: its name ``{env}__{method}__{model}__{seed}__{ts}``, its one-writer lock, the saved config and the
metrics logger; Ctrl-C, SIGTERM and a broken stdout as a flag the loop polls."""

from __future__ import annotations

import _thread
import contextlib
import datetime as _dt
import errno
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError
from ..io import atomic_write_text, json_text
from .config import TrainConfig, to_dict, to_toml
from .metrics import MetricsLogger

__all__ = [
    "LOCK_NAME", "PipeGuard", "StopSignal", "Stopped", "lock_run_folder", "make_run_dir", "open_metrics",
    "write_config"
]


#: The lock file a run folder's one writer holds (``abc train``, ``--resume``, ``abc eval --run``).
LOCK_NAME = ".abc.lock"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.rstrip("/").split("/")[-1]).strip("-") or "model"


def make_run_dir(cfg: TrainConfig) -> Path:
    """``{out_dir}/{env}__{method}__{model}__{seed}__{timestamp}`` (created)."""
    ts = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{cfg.env.name}__{cfg.credit.name}__{_slug(cfg.model.name)}__{cfg.seed}__{ts}"
    if Path(name).name != name or os.sep in name or (os.altsep and os.altsep in name):  # never outside out_dir
        raise ConfigError(f"run folder name {name[:80]!r} is not one folder name; env.name and credit.name must be "
                          "identifiers (letters, digits and '_')")
    base = Path(cfg.out_dir) / name
    base.parent.mkdir(parents=True, exist_ok=True)
    path, k = base, 1
    while True:  # mkdir claims the name: runs started in the same second in parallel (abc bench) get -2, -3...
        try:
            path.mkdir()
            return path
        except FileExistsError:
            k += 1
            path = base.with_name(f"{base.name}-{k}")


def lock_run_folder(run_dir: str | Path, command: str = "abc train") -> Any:
    """Take the run folder's one-writer lock (a :class:`filelock.FileLock`, held until released or the process
    ends); a folder another process holds is refused with one line and nothing written."""
    from filelock import FileLock, Timeout

    lock = FileLock(Path(run_dir) / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(f"{run_dir}: another `abc` process is writing this run folder; wait for it to finish (or "
                          f"stop it) before `{command}` uses the folder") from None
    except OSError as exc:
        raise ConfigError(f"{run_dir}: cannot lock the run folder ({exc.strerror or exc}); give a folder you may "
                          "write") from None
    return lock


def write_config(run_dir: Path, cfg: TrainConfig) -> None:
    """``config.toml`` (what ``--resume`` and ``abc eval --run`` read) and ``config.json``."""
    atomic_write_text(run_dir / "config.toml", to_toml(cfg))
    atomic_write_text(run_dir / "config.json", json_text(to_dict(cfg), indent=1))


def open_metrics(cfg: TrainConfig, run_dir: Path, *, enabled: bool) -> MetricsLogger:
    """The run's metrics logger: ``metrics.jsonl``, and TensorBoard / W&B as the config asks."""
    return MetricsLogger(run_dir, config=to_dict(cfg), tensorboard=cfg.tensorboard, wandb=cfg.wandb,
                         wandb_mode=cfg.wandb_mode, wandb_project=cfg.wandb_project,
                         run_name=cfg.exp_name or run_dir.name, enabled=enabled)


#: seconds between re-raises of :class:`Stopped` after a stop signal inside :meth:`StopSignal.now`
RERAISE_S = 1.0


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
        self._again: threading.Event | None = None
        self._redelivered = False
        self._hook = sys.unraisablehook
        self._streams: dict[str, Any] = {}

    def __enter__(self) -> StopSignal:
        sigs = [signal.SIGINT, signal.SIGTERM]
        if hasattr(signal, "SIGPIPE"):
            sigs.append(signal.SIGPIPE)
        for sig in sigs:
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        self._hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
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
        if self._redelivered:  # our own re-delivery (see _rearm); late, after the step was left, it is dropped
            self._redelivered = False
            if self._now:
                raise Stopped
            return
        pipe = signum == getattr(signal, "SIGPIPE", None)
        if not pipe and self.flag and not self._now:
            raise KeyboardInterrupt
        if pipe:
            self._pipe("a pipe")
        self.flag = True
        if self._now:
            self._rearm()
            raise Stopped
        if pipe:
            return
        print("\nstopping: saving a checkpoint at the next safe point (Ctrl-C again to abort)", flush=True)

    def _rearm(self) -> None:
        """Raise :class:`Stopped` again every :data:`RERAISE_S` seconds while inside :meth:`now`: an exception
        raised by a signal handler while a ``__del__`` or weakref callback runs is printed as "Exception ignored"
        and lost (seen in CI: a regex ``Group.__del__`` swallowed it and the validation ran on for minutes). A
        daemon thread re-delivers the signal to the main thread (``_thread.interrupt_main``: no timer or SIGALRM
        handler of anyone else's is touched) until the step is left."""
        if self._again is not None or threading.current_thread() is not threading.main_thread():
            return
        self._again = threading.Event()

        def redeliver(left: threading.Event) -> None:
            while not left.wait(RERAISE_S):
                self._redelivered = True
                _thread.interrupt_main(signal.SIGTERM)

        threading.Thread(target=redeliver, args=(self._again,), name="abc-stop", daemon=True).start()

    def _disarm(self) -> None:
        if self._again is not None:
            self._again.set()
            self._again = None

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
            if not self._now:
                self._disarm()

    def _unraisable(self, unraisable: Any) -> None:
        """A :class:`Stopped` lost in a ``__del__`` is not printed as "Exception ignored ... Traceback": it is
        delivered again (:meth:`_rearm`). Anything else goes to the hook that was there before."""
        if not isinstance(unraisable.exc_value, Stopped):
            self._hook(unraisable)

    def __exit__(self, *exc: Any) -> None:
        self._disarm()
        if sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._hook
        for sig, old in self._old.items():
            signal.signal(sig, old)
        for name, stream in self._streams.items():
            guard = getattr(sys, name)
            if isinstance(guard, PipeGuard) and not guard.broken:
                setattr(sys, name, stream)  # a broken one stays guarded: the exit path still prints

    def __call__(self) -> bool:
        return self.flag
