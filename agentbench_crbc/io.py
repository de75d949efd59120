"""Safe file writes: atomic for regular files (temp beside the target, fsync, rename), direct for everything else.

What a path means is decided once, by :func:`write_target`:

- ``-`` is standard output, written directly;
- a symlink is followed to its target, and the temp file is made beside the *target*, so the link stays a link and
  every path to one file writes the same file (a lock taken on :func:`resolved` is one lock);
- a device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a named pipe) is opened and written directly: renaming
  a regular file over ``/dev/null`` as root would destroy the device;
- a regular file (or a new path) is written atomically: a crash never leaves half a file. An existing file keeps its
  permission bits (and, where the process may, its owner and group); a new one gets ``0o666 & ~umask``, as ``open``
  would give it. A file the process may not write (read-only, another user's) is refused with the
  :class:`PermissionError` that ``open(path, "w")`` would raise, though renaming over it would succeed.

Reading is one function too: :func:`read_text` (UTF-8, a missing or unreadable file one :class:`RecordError`),
:func:`read_json` on it for JSON files, and :func:`text_lines`, which splits JSON Lines on ``"\n"`` only, so a
record holding U+2028, U+2029 or U+0085 (which ``json.dumps(..., ensure_ascii=False)`` writes raw) reads back as
written.

Writing JSON is one function too: :func:`json_text` (strict JSON: a NaN, an infinity or a value JSON has no form for
is one error naming its field, never ``NaN``/``Infinity`` that strict readers refuse).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .errors import RecordError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["atomic_open", "atomic_write_text", "check_writable", "json_text", "read_json", "read_text", "resolved",
           "text_lines", "umask_tree", "write_stdout", "write_target"]

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


def check_writable(path: str | Path) -> None:
    """Raise what ``open(path, "w")`` would (:class:`PermissionError`, :class:`NotADirectoryError`,
    :class:`IsADirectoryError`) without writing anything; a missing parent folder is fine (writes create it) when its
    nearest existing ancestor is a folder this process may write. Commands call it before any work."""
    kind, target = write_target(path)
    if kind == "stdout":
        return
    assert target is not None
    if target.exists():
        if not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fspath(parent))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))


def umask_tree(root: str | Path) -> None:
    """Give every file under ``root`` mode ``0o666 & ~umask`` and every folder (``root`` too) ``0o777 & ~umask``, as
    ``open`` and ``mkdir`` would have: libraries that write through ``mkstemp``/``mkdtemp`` leave 0600/0700."""
    mask = _umask()
    root = Path(root)
    for p in (root, *root.rglob("*")):
        if p.is_symlink():
            continue
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


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
        yield _Chunked(out)
        out.flush()
        return
    assert target is not None
    check_writable(target)
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


#: How much of a large output goes to standard output between flushes (see :func:`write_stdout`).
STDOUT_CHUNK = 1 << 16


def write_stdout(text: str, *, stream: IO | None = None) -> None:
    """Write ``text`` to standard output (or ``stream``) in chunks of :data:`STDOUT_CHUNK`, flushing each: one large
    write to a pipe whose reader stopped early (``| head -c 10``) can end without an error in CPython, so a
    truncated output would exit 0; chunk by chunk, the closed pipe raises :class:`BrokenPipeError`, which ``abc``
    turns into exit 141 and one line."""
    out = sys.stdout if stream is None else stream
    for start in range(0, len(text), STDOUT_CHUNK):
        out.write(text[start:start + STDOUT_CHUNK])
        out.flush()
    if not text:
        out.flush()


class _Chunked:
    """A standard-output stream whose writes go through :func:`write_stdout`."""

    def __init__(self, out: IO) -> None:
        self._out = out

    def write(self, data: Any) -> int:
        write_stdout(data, stream=self._out)
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` the safe way (:func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(text)


def read_text(path: str | Path | Traversable, *, error: type[Exception] = RecordError, where: str | None = None,
              max_bytes: int | None = None) -> str:
    """Read a UTF-8 text file as it is (no newline translation); a missing, unreadable, oversized (over
    ``max_bytes``) or non-UTF-8 file raises ``error`` naming it (``where``, default the path). The one reader every
    file input uses: credit records, leaderboard stores, MDP files, TOML configs, prompt templates (also a package
    resource, an :mod:`importlib.resources` ``Traversable``), the token file."""
    where = str(path) if where is None else where
    try:
        with (open(path, "rb") if isinstance(path, str | os.PathLike) else path.open("rb")) as fh:
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except IsADirectoryError:
        raise error(f"{where}: is a folder; give a file") from None
    except (OSError, ValueError) as exc:  # no permission, a NUL in the name, a device that fails
        raise error(f"{where}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise error(f"{where}: over {max_bytes / 2**20:g} MiB; give a smaller file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8") from None


def read_json(path: str | Path, *, error: type[Exception] = RecordError, where: str | None = None,
              max_bytes: int | None = None) -> Any:
    """A JSON file's value, read with :func:`read_text`; malformed JSON raises ``error`` naming the file and the
    place (``where``, default the path)."""
    import json

    text = read_text(path, error=error, where=where, max_bytes=max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{str(path) if where is None else where}: not valid JSON (line {exc.lineno} column "
                    f"{exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise error(f"{str(path) if where is None else where}: JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer literal beyond Python's digit limit
        raise error(f"{str(path) if where is None else where}: not valid JSON ({exc})") from None


def text_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text: split on ``"\n"`` only (``str.splitlines`` also splits on U+2028, U+2029,
    U+0085 and more, which JSON allows raw inside strings), a trailing ``"\r"`` dropped."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def json_text(value: Any, *, where: str = "value", error: type[Exception] = RecordError, **options: Any) -> str:
    """``value`` as strict JSON text (``json.dumps`` with ``allow_nan=False``; ``options`` are ``json.dumps``'s
    other keywords). A NaN or infinity (``1e400`` reads as one), a value JSON has no form for, or a cycle raises
    ``error`` in one line naming ``where`` and the field (``meta``, ``steps[0].reward``). Every JSON this package
    writes (records, results, boards, metrics, wire messages) goes through here."""
    import json

    try:
        return json.dumps(value, allow_nan=False, **options)
    except RecursionError:
        raise error(f"{where}: nested too deeply to write as JSON") from None
    except (ValueError, TypeError) as exc:
        field, bad = _unwritable(value, options.get("default"))
        if field is None:
            raise error(f"{where}: cannot be written as JSON ({exc})") from None
        what = (f"{bad!r} is not a finite number, which strict JSON cannot hold" if isinstance(bad, float)
                else f"a {type(bad).__name__} has no JSON form")
        raise error(f"{where}: field {field or '(top level)'}: {what}; give a finite number, a string, a list or "
                    "an object there") from None


def _unwritable(value: Any, default: Any, path: str = "", depth: int = 0) -> tuple[str | None, Any]:
    """The path of the first value strict JSON cannot hold (a non-finite float, a type without a JSON form), or
    ``(None, None)``."""
    import math

    if depth > 200:
        return None, None
    if isinstance(value, bool | int | str) or value is None:
        return None, None
    if isinstance(value, float):
        return (path, value) if not math.isfinite(value) else (None, None)
    if isinstance(value, dict):
        for k, v in value.items():
            found = _unwritable(v, default, f"{path}.{k}" if path else str(k), depth + 1)
            if found[0] is not None:
                return found
        return None, None
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _unwritable(v, default, f"{path}[{i}]", depth + 1)
            if found[0] is not None:
                return found
        return None, None
    if default is not None:
        try:
            return _unwritable(default(value), None, path, depth + 1)
        except (TypeError, ValueError):
            pass
    return path, value
