"""Ctrl-C and SIGTERM as a flag the training loop polls, so it can checkpoint at the next safe point."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

__all__ = ["StopSignal"]


class StopSignal:
    """SIGINT/SIGTERM set a flag; the loop checkpoints at the next safe point and exits (a second Ctrl-C kills).

    A context manager that installs the handlers; calling it returns the flag.
    """

    def __init__(self) -> None:
        self.flag = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.flag:
            raise KeyboardInterrupt
        self.flag = True
        print("\nstopping: saving a checkpoint at the next safe point (Ctrl-C again to abort)", flush=True)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def __call__(self) -> bool:
        return self.flag
