"""The ``abc`` command line: one module per subcommand, each adding itself with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from ..errors import AbcError, CreditError, EnvError, MissingDependencyError
from ..extras import from_import_error
from .commands import COMMANDS

__all__ = ["COMMANDS", "build_parser", "main", "stdout_closed"]

_EPILOG = ("Environment families can add commands of their own (`abc FAMILY ...`); `abc plugins` lists the installed "
           "families. `abc COMMAND --help` describes one command.")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``abc`` parser. With ``argv``, only the command it names is imported and built in full (the others get
    their help line only), and with no command at all (``abc --help``, ``--version``) neither the plugin host nor
    any family is loaded; ``argv=None`` builds every command and every family's."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="abc", description="agentbench-crbc: agent benchmarks with pluggable "
                                     "step-level credit assignment (run as `abc` or `python -m agentbench_crbc`).",
                                     epilog=_EPILOG)
    parser.add_argument("--version", action="version", version=f"agentbench-crbc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name, help_line in COMMANDS.items():
        if command is not None and name != command:
            sub.add_parser(name, help=help_line)  # listed in `abc --help`; never parsed, so never imported
            continue
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue
            raise
        module.register(sub)
    if command != "":
        _family_commands(sub)
    return parser


def _family_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The subcommands environment families provide (``abc alfworld``); a plugin set the host cannot be built
    from adds none here and is reported by the command that builds the host. A family whose ``commands`` cannot
    be loaded or raises (or takes a subcommand's name) is listed as broken, with one line, and adds none: every
    other command keeps working."""
    from ..host import BrokenPlugin, describe_error, get_host

    try:
        host = get_host()
        entries = host.families.entries()
    except AbcError:
        return
    for entry in entries:
        fam = entry.family
        if fam.commands is None:
            continue
        before = dict(sub.choices)
        try:
            fam.load("commands")(sub)
        except (Exception, SystemExit) as exc:
            for name in set(sub.choices) - set(before):  # nothing half-added
                del sub.choices[name]
            sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest in before]
            broken = BrokenPlugin(entry.distribution, entry.plugin, f"its commands: {describe_error(exc)}")
            host.broken.append(broken)
            print(f"abc: {broken}", file=sys.stderr)


class _ClosedStream:
    """What ``sys.stdout`` is when ``abc`` starts with it closed: every write raises as a closed pipe does, so the
    command ends in :func:`main`'s one line about it instead of ``AttributeError: 'NoneType' ... 'write'``."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "standard output is closed")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def stdout_closed() -> bool:
    """Whether ``abc`` was started with standard output closed (a command that would print its result refuses)."""
    return sys.stdout is None or isinstance(sys.stdout, _ClosedStream)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``abc``; bad input exits 2 with one line on stderr, a failed computation or a missing optional
    dependency (the line names the extra to install) exits 1."""
    from_shell = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if sys.stdout is None:  # started with stdout closed (`>&-`): a write fails as a closed pipe does, in one line
        sys.stdout = _ClosedStream()
    try:
        return int(args.func(args) or 0)
    except MemoryError:
        print(f"abc {args.command}: error: out of memory; lower the sizes of the command (groups, group size, "
              "episodes, batch sizes, model) or free memory", file=sys.stderr)
        return 1
    except (CreditError, EnvError, MissingDependencyError) as exc:
        print(f"abc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except AbcError as exc:
        print(f"abc {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # a lazy import deep inside a command: still one line naming the extra
        missing = from_import_error(exc)
        if missing is None:
            raise
        print(f"abc {args.command}: error: {missing}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"abc {args.command}: interrupted", file=sys.stderr)
        if from_shell:  # the process ends now: the interpreter's last full collection of a trainer's heap took
            gc.freeze()  # 15-25 s on a busy 2-core CPU after a SIGTERM (past a supervisor's grace before SIGKILL)
        return 130
    except BrokenPipeError:  # a reader such as `head` stopped early: the output is incomplete, so no success
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        with contextlib.suppress(OSError):
            print(f"abc {args.command}: standard output was closed before everything was written; the output is "
                  "incomplete (write to a file with -o)", file=sys.stderr)
        return 141  # as a process killed by SIGPIPE
    except RuntimeError as exc:
        if "OutOfMemory" not in type(exc).__name__:  # torch.cuda.OutOfMemoryError: the device's limit
            raise
        first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        print(f"abc {args.command}: error: the device ran out of memory ({first}); lower the batch sizes or the "
              "model, or free the device", file=sys.stderr)
        return 1
    except OSError as exc:  # a full disk or quota anywhere a command writes, a path it may not write: one line
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" writing {exc.filename}" if exc.filename else ""
            print(f"abc {args.command}: error: no space left on the device{where}; free some space and run the "
                  "command again", file=sys.stderr)
            return 2
        if not exc.filename and not isinstance(exc, (PermissionError, NotADirectoryError, IsADirectoryError)):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"abc {args.command}: error: {where}{exc.strerror or exc}; check the path (and that you may write "
              "there)", file=sys.stderr)
        return 2
