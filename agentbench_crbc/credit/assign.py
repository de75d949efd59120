"""``assign(method, records, **options)``: per-step credit of a registered method, used by the trainer and the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from ..errors import AbcError, CreditError
from ..host import CreditMethod, Host, get_host
from .batch import StepBatch, validate_record
from .types import Group

__all__ = ["assign", "assign_batch", "run_method", "without_env_failures"]


def _call(method: CreditMethod, *args: Any, **options: Any) -> Any:
    """Call a method's function; what it raises (but for this package's errors) becomes one :class:`CreditError`
    line naming the method and its plugin, ``sys.exit`` included."""
    try:
        return method.fn(*args, **options)
    except AbcError:
        raise
    except (Exception, SystemExit) as exc:
        raise CreditError(f"{_who(method)} failed: {type(exc).__name__}: {_first_line(exc)}") from None


def _who(method: CreditMethod) -> str:
    return f"credit method {method.name!r} (plugin {method.plugin}, {method.distribution})"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"


def _floats(method: CreditMethod, value: Any, where: str) -> np.ndarray:
    """``value`` as a float64 array; None, strings, complex numbers, ragged lists and the like are errors."""
    try:
        a = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise CreditError(f"{_who(method)} returned {where} that is not an array of numbers ({exc})") from None
    if a.dtype.kind not in "biuf":
        raise CreditError(f"{_who(method)} returned {where} of {type(value).__name__} (dtype {a.dtype}); "
                          "expected real numbers")
    return a.astype(np.float64, copy=False)


def run_method(method: CreditMethod, batch: StepBatch, options: Mapping[str, Any]) -> np.ndarray:
    """Flat per-step credit of ``method`` on ``batch`` with checked ``options``; whatever it returns is checked (one
    value per step, real and finite) and what it raises becomes one :class:`CreditError` line."""
    if method.batched:
        flat = _floats(method, _call(method, batch, **options), "a value")
        if flat.shape != (batch.n_steps,):
            raise CreditError(f"{_who(method)} returned shape {flat.shape}, "
                              f"expected ({batch.n_steps},): one value per step")
    else:
        flat = np.empty(batch.n_steps)
        for group, idx in zip(batch.groups(), batch.group_trajectories(), strict=True):
            got = _call(method, group, **options)
            if got is None or isinstance(got, (str, bytes)) or not isinstance(got, Iterable):
                raise CreditError(f"{_who(method)} returned {type(got).__name__} for group {group.task_id!r}; "
                                  "expected one array per trajectory")
            arrays = list(got)
            if len(arrays) != len(idx):
                raise CreditError(f"{_who(method)} returned {len(arrays)} arrays for group "
                                  f"{group.task_id!r} of {len(idx)} trajectories")
            for i, arr in zip(idx.tolist(), arrays, strict=True):
                a = _floats(method, arr, f"an item for group {group.task_id!r}")
                if a.shape != (int(batch.traj_len[i]),):
                    raise CreditError(f"{_who(method)} returned shape {a.shape} for a "
                                      f"trajectory of {int(batch.traj_len[i])} steps in group {group.task_id!r}")
                s = int(batch.traj_start[i])
                flat[s:s + len(a)] = a
    if not np.isfinite(flat).all():
        raise CreditError(f"{_who(method)} produced non-finite credit; please report this input")
    return flat


def assign_batch(method: str, batch: StepBatch, *, host: Host | None = None, **options: Any) -> np.ndarray:
    """Per-step credit (flat, ``batch.n_steps`` floats) of ``method`` on an already-built :class:`StepBatch`."""
    m = (host or get_host()).credit_method(method)
    return run_method(m, batch, m.check_options(options))


def assign(method: str, records: Sequence[Mapping[str, Any]] | Sequence[Group], *, host: Host | None = None,
           **options: Any) -> list[np.ndarray]:
    """Credit of every step: one float64 array per trajectory, in input order.

    :param method: a registered credit method name (``abc plugins`` lists them).
    :param records: credit-contract dicts (``group``, ``steps``, ``success``...) or :class:`Group` objects.
    :param options: the method's options, e.g. ``beta=0.98, depth=None`` for ``crbc``.

    A trajectory that an env failure ended (record ``error`` set, or :attr:`Trajectory.error`) is left out of its
    group's statistics and gets zero credit on every step.
    """
    m = (host or get_host()).credit_method(method)
    opts = m.check_options(options)
    healthy, errored, n_traj = without_env_failures(records)
    if not healthy:
        return [np.zeros(n) for n in errored.values()]
    batch = StepBatch.from_records(healthy)
    credit = iter(batch.split(run_method(m, batch, opts)))
    return [np.zeros(errored[i]) if i in errored else next(credit) for i in range(n_traj)]


def without_env_failures(records: Sequence[Mapping[str, Any]] | Sequence[Group]
                         ) -> tuple[list[Any], dict[int, int], int]:
    """Records (or groups) without the trajectories an env failure ended (``error`` set); for each of those, by
    trajectory position, its number of steps (they get zero credit); and the number of trajectories given."""
    given = list(records)
    errored: dict[int, int] = {}
    if given and all(isinstance(r, Group) for r in given):
        groups: list[Group] = []
        k = 0
        for g in cast("list[Group]", given):
            keep = []
            for t in g.trajectories:
                if t.error is not None:
                    errored[k] = len(t.steps)
                else:
                    keep.append(t)
                k += 1
            if keep:
                groups.append(Group(g.task_id, tuple(keep)) if len(keep) < len(g.trajectories) else g)
        return groups, errored, k
    healthy = []
    for i, rec in enumerate(given):
        if isinstance(rec, Mapping) and rec.get("error") is not None:
            validate_record(rec, f"records: record {i + 1}")
            errored[i] = len(rec["steps"])
        else:
            healthy.append(rec)
    return healthy, errored, len(given)
