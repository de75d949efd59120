"""Safe file writes: atomic for regular files (temp beside the target, fsync, rename), direct for everything else.

What a path means is decided once, by :func:`write_target`:

- ``-`` is standard output, written directly;
- a symlink is followed to its target, and the temp file is made beside the *target*, so the link stays a link and
  every path to one file writes the same file (a lock taken on :func:`resolved` is one lock);
- a device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a named pipe) is opened and written directly: renaming
  a regular file over ``/dev/null`` as root would destroy the device;
- a regular file (or a new path) is written atomically: a crash never leaves half a file. An existing file keeps its
  permission bits (and, where the process may, its owner and group); a new one gets ``0o666 & ~umask``, as ``open``
  would give it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import RecordError

__all__ = ["atomic_open", "atomic_write_text", "read_records_text", "resolved", "write_target"]

STDOUT = "-"


def resolved(path: str | Path) -> Path:
    """``path`` with every symlink followed (also a dangling one's final target), made absolute."""
    return Path(os.path.realpath(os.fspath(path)))


def write_target(path: str | Path) -> tuple[str, Path | None]:
    """How a write to ``path`` is done: ``("stdout", None)``, ``("direct", target)`` for an existing file that is
    not a regular file (device, FIFO, socket), or ``("atomic", target)`` for a regular or new file; ``target`` has
    symlinks resolved."""
    if os.fspath(path) == STDOUT:
        return "stdout", None
    target = resolved(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return "atomic", target
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{path}: is a folder; name a file to write")
    return ("atomic" if stat.S_ISREG(st.st_mode) else "direct"), target


def _umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status) where possible."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # elsewhere: the classic read (set and restore)
    os.umask(old)
    return old


def _take_over_metadata(tmp: str, target: Path) -> None:
    """Give the temp file the mode (and owner) the target has, or a new file's default mode."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        os.chmod(tmp, 0o666 & ~_umask())
        return
    os.chmod(tmp, stat.S_IMODE(st.st_mode))
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):  # only root may give a file away; others keep theirs
            os.chown(tmp, st.st_uid, st.st_gid)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open ``path`` for writing the safe way (see the module docstring); on a clean exit a regular file is flushed,
    fsynced and renamed into place, on an error the target is left as it was."""
    binary = "b" in mode
    kind, target = write_target(path)
    if kind == "stdout":
        out = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    assert target is not None
    if kind == "direct":
        with open(target, mode, encoding=None if binary else encoding) as fh:
            yield fh
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _take_over_metadata(tmp, target)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` the safe way (:func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(text)


def read_records_text(path: str | Path) -> str:
    """Read a UTF-8 records file; a missing or unreadable file raises :class:`RecordError` naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: cannot read ({exc})") from None
