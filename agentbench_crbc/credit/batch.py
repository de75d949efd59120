"""StepBatch: a batch of rollout groups flattened into numpy arrays (the form credit assigners compute on)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, count, pairwise, repeat
from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np

from ..errors import RecordError
from .keys import canonical_anchor
from .types import Group, Step, Trajectory

__all__ = ["MAX_REWARD", "StepBatch", "StepColumns", "canonical_anchor", "dense_unique", "validate_record"]

#: Rewards at or beyond this size overflow the group statistics (a standard deviation squares them).
MAX_REWARD = 1e150


def _is_number(x: Any) -> bool:
    """A finite real number smaller than :data:`MAX_REWARD` in size (Python or numpy; not a bool)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(x) and abs(float(x)) < MAX_REWARD
    except OverflowError:  # a 400-digit integer
        return False


def validate_record(rec: Any, where: str) -> None:
    """Raise :class:`RecordError` (message starting with ``where``) if ``rec`` breaks the record contract."""
    if not isinstance(rec, Mapping):
        raise RecordError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
    for key in ("group", "steps", "success"):
        if key not in rec:
            raise RecordError(f"{where}: missing required field {key!r}")
    if not isinstance(rec["group"], str):
        raise RecordError(f"{where}: 'group' must be a string, got {rec['group']!r}")
    if not isinstance(rec["success"], bool):
        raise RecordError(f"{where}: 'success' must be true or false, got {rec['success']!r}")
    reward = rec.get("reward")
    if reward is not None and not _is_number(reward):
        raise RecordError(f"{where}: 'reward' must be a finite number below {MAX_REWARD:g} in size, got "
                          f"{_clip(reward)} (rescale the rewards)")
    if rec.get("error") is not None and not isinstance(rec["error"], str):
        raise RecordError(f"{where}: 'error' must be a string or null, got {rec['error']!r}")
    if "truncated" in rec and not isinstance(rec["truncated"], bool):
        raise RecordError(f"{where}: 'truncated' must be true or false, got {rec['truncated']!r}")
    steps = rec["steps"]
    if not isinstance(steps, list):
        raise RecordError(f"{where}: 'steps' must be a list, got {type(steps).__name__}")
    if not steps:
        raise RecordError(f"{where}: 'steps' is empty; every trajectory needs at least one step")
    for k, step in enumerate(steps):
        here = f"{where}: steps[{k}]"
        if not isinstance(step, Mapping):
            raise RecordError(f"{here} must be an object, got {type(step).__name__}")
        for key in ("anchor", "action"):
            if key not in step:
                raise RecordError(f"{here}: missing required field {key!r}")
        if not isinstance(step["action"], str):
            raise RecordError(f"{here}: 'action' must be a string, got {step['action']!r}")
        try:
            canonical_anchor(step["anchor"])
        except ValueError as exc:
            raise RecordError(f"{here}: {exc}") from None
        r = step.get("reward", 0.0)
        if not _is_number(r):
            raise RecordError(f"{here}: 'reward' must be a finite number below {MAX_REWARD:g} in size, got "
                              f"{_clip(r)} (rescale the rewards)")
        if "valid" in step and not isinstance(step["valid"], bool):
            raise RecordError(f"{here}: 'valid' must be true or false, got {step['valid']!r}")


def _clip(x: Any, n: int = 40) -> str:
    text = repr(x) if not isinstance(x, int) or abs(x) < 10 ** 30 else f"an integer of {len(str(abs(x)))} digits"
    return text if len(text) <= n else text[:n - 3] + "..."


_ANCHOR, _ACTION = itemgetter("anchor"), itemgetter("action")


def _state_keys(steps: Sequence[Any], anchor: Callable[[Any], Any], n_groups: int, traj_group: Sequence[int],
                traj_len: Sequence[int]) -> tuple[np.ndarray, list[dict[Any, int]]]:
    """Step state keys (:func:`_first_indices` per group) and the per-group anchor tables, anchors identified by
    :func:`~agentbench_crbc.credit.keys.canonical_anchor`: the one identity the trainer (:meth:`StepBatch.from_groups`)
    and ``abc credit`` (:meth:`StepBatch.from_records`) share. Strings hash as they are (one C-level pass); any
    other anchor sends the batch through the canonical form, since ``1``, ``1.0`` and ``True`` are equal as dict
    keys but not as JSON."""
    tables: list[dict[Any, int]] = [{} for _ in range(n_groups)]
    try:
        keys = _first_indices(steps, anchor, traj_tables=map(tables.__getitem__, traj_group), traj_len=traj_len)
        canonical = any(not set(map(type, t)) <= {str} for t in tables)  # types checked on distinct keys only
    except TypeError:  # unhashable (list/dict) anchors
        canonical = True
    if canonical:
        tables = [{} for _ in range(n_groups)]
        keys = _first_indices(steps, lambda s: canonical_anchor(anchor(s)),
                              traj_tables=map(tables.__getitem__, traj_group), traj_len=traj_len)
    return keys, tables


def _first_indices(steps: Sequence[Any], key: Callable[[Any], Hashable], table: dict[Any, int] | None = None, *,
                   traj_tables: Iterable[dict[Any, int]] = (), traj_len: Iterable[int] = ()) -> np.ndarray:
    """For each step, the batch index of the first step with an equal ``key(step)`` in the same table (``table``
    for all steps, or ``traj_tables[i]`` for trajectory i), filling the tables: one C-level pass, one hash per step."""
    if table is not None:
        pairs = map(table.setdefault, map(key, steps), count())
    else:
        step_tables = chain.from_iterable(map(repeat, traj_tables, traj_len))
        pairs = map(dict.setdefault, step_tables, map(key, steps), count())
    return np.fromiter(pairs, dtype=np.int64, count=len(steps))


def _dense(first_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From "index of the first equal item" keys: ids ``0..k-1`` in first-seen order, and those first indices."""
    is_first = first_index == np.arange(len(first_index))
    return (np.cumsum(is_first) - 1)[first_index], np.flatnonzero(is_first)


def dense_unique(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys in ``[0, n_keys)``, by counting when that is cheaper."""
    if n_keys > 64 * len(keys) + 65536:  # counting costs O(n_keys): cheap up to a few hundred thousand
        uniq, inv = np.unique(keys, return_inverse=True)
        return uniq, inv.astype(np.int64, copy=False)
    uniq = np.flatnonzero(np.bincount(keys, minlength=n_keys))
    table = np.empty(n_keys, dtype=np.int64)
    table[uniq] = np.arange(len(uniq))
    return uniq, table[keys]


@dataclass(frozen=True, eq=False)
class StepColumns:
    """What a :class:`StepBatch` is built from (its constructors' work): per group its id, per trajectory its group,
    success, outcome and length, per step its (group, anchor) key, action id, reward and validity, the anchor
    tables, the interned action strings and the trajectories themselves. ``step_reward`` / ``step_valid``
    ``None``: all 0 / all valid."""

    group_ids: Sequence[str]
    traj_group: np.ndarray
    traj_success: np.ndarray
    traj_outcome: np.ndarray
    traj_len: np.ndarray
    state_key: np.ndarray
    anchor_tables: Sequence[Mapping[Hashable, int]]
    step_action: np.ndarray
    actions: list[str]
    step_reward: np.ndarray | None
    step_valid: np.ndarray | None
    trajectories: Sequence[Any]


class StepBatch:
    """Every step of a batch of groups as flat arrays; groups and trajectories keep their input order.

    Trajectory arrays (length ``n_traj``): ``traj_group``, ``traj_success``, ``traj_outcome`` (R), ``traj_len``,
    ``traj_start``. Step arrays (length ``n_steps``): ``step_traj``, ``step_t`` (1-indexed), ``step_state``
    (equal iff same group and same anchor; ``0..n_states-1`` in first-visit order), ``step_action`` (interned
    action strings), ``step_reward``, ``step_valid``. Derived: ``step_group``, ``step_last``, ``step_next``
    (successor state, or ``n_states`` for the success boundary z+ and ``n_states + 1`` for the failure boundary z-).

    Anchors are interned in one pass per step, each text hashed once, in one table per group
    (``anchor_tables[g]`` maps an anchor to the batch index of its first step in group ``g``): equal anchors in
    different groups never merge, and no (group, anchor) key is ever built.
    """

    def __init__(self, columns: StepColumns) -> None:
        group_ids, traj_group, traj_success = columns.group_ids, columns.traj_group, columns.traj_success
        traj_outcome, traj_len, state_key = columns.traj_outcome, columns.traj_len, columns.state_key
        anchor_tables, step_action, actions = columns.anchor_tables, columns.step_action, columns.actions
        step_reward, step_valid, trajectories = columns.step_reward, columns.step_valid, columns.trajectories
        self.group_ids = tuple(group_ids)
        self.n_groups = len(self.group_ids)
        self.traj_group = traj_group
        self.traj_success = traj_success
        self.traj_outcome = traj_outcome
        self.traj_len = traj_len
        self.n_traj = len(traj_len)
        self.traj_start = np.zeros(self.n_traj, dtype=np.int64)
        np.cumsum(traj_len[:-1], out=self.traj_start[1:])
        self.n_steps = int(traj_len.sum())
        self.step_traj = np.repeat(np.arange(self.n_traj, dtype=np.int64), traj_len)
        self.step_t = np.arange(self.n_steps, dtype=np.int64) - self.traj_start[self.step_traj] + 1
        self.step_group = traj_group[self.step_traj]
        self.step_state, self._state_first = _dense(state_key)
        self.n_states = len(self._state_first)
        self._anchor_tables = anchor_tables
        self.state_group = self.step_group[self._state_first]
        self.step_action = step_action
        self.actions = actions
        self.step_reward = np.zeros(self.n_steps) if step_reward is None else step_reward
        self.step_valid = np.ones(self.n_steps, dtype=bool) if step_valid is None else step_valid
        last = self.traj_start + traj_len - 1
        self.step_last = np.zeros(self.n_steps, dtype=bool)
        self.step_last[last] = True
        nxt = np.empty(self.n_steps, dtype=np.int64)
        nxt[:-1] = self.step_state[1:]
        nxt[last] = np.where(traj_success, self.n_states, self.n_states + 1)
        self.step_next = nxt
        self._trajectories = trajectories

    @cached_property
    def state_anchor(self) -> list[Hashable]:
        """The anchor (canonical key) of each state id."""
        first_to_anchor = {i: a for table in self._anchor_tables for a, i in table.items()}
        return [first_to_anchor[i] for i in self._state_first.tolist()]

    # -- construction -------------------------------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any] | Group | Trajectory], *,
                     source: str = "records") -> StepBatch:
        """Build from credit-contract dicts (or :class:`Group` objects); bad input raises :class:`RecordError`
        naming ``source`` and the 1-based record number."""
        given = list(records)
        if given and all(isinstance(r, Group) for r in given):
            return cls.from_groups(given)  # type: ignore[arg-type]
        records = cast("list[Mapping[str, Any]]", given)
        if not records:
            raise RecordError(f"{source}: no records; give at least one trajectory")
        group_index: dict[str, int] = {}
        tg: list[int] = []
        lens: list[int] = []
        succ: list[bool] = []
        outc: list[float] = []
        all_steps: list[Any] = []
        ctab: dict[Any, int] = {}
        try:
            for rec in records:
                g = rec["group"]
                steps = rec["steps"]
                s = rec["success"]
                r = rec.get("reward")
                if (type(g) is not str or type(steps) is not list or not steps or type(s) is not bool
                        or not (r is None or type(r) is float or type(r) is int or _is_number(r))):
                    raise TypeError
                tg.append(group_index.setdefault(g, len(group_index)))
                lens.append(len(steps))
                succ.append(s)
                outc.append(float(s) if r is None else float(r))
                all_steps.extend(steps)
            action_first = _first_indices(all_steps, _ACTION, ctab)
            if set(map(type, ctab)) != {str}:
                raise TypeError
            keys, tables = _state_keys(all_steps, _ANCHOR, len(group_index), tg, lens)
            extra = max(map(len, all_steps)) > 2  # optional per-step fields present somewhere
        except (TypeError, KeyError, AttributeError, ValueError, OverflowError, RecursionError):
            cls._raise_first_error(records, source)
            raise  # unreachable: _raise_first_error always raises
        rewards = valid = None
        if extra:
            rw = [s.get("reward", 0.0) for s in all_steps]
            vd = [s.get("valid", True) for s in all_steps]
            if (not (set(map(type, rw)) <= {float, int} or all(map(_is_number, rw)))
                    or set(map(type, vd)) != {bool}):
                cls._raise_first_error(records, source)
            try:
                rewards = np.asarray(rw, dtype=np.float64)
            except OverflowError:
                rewards = np.array([np.nan])
            if not (np.abs(rewards) < MAX_REWARD).all():  # also false for NaN
                cls._raise_first_error(records, source)
            valid = np.asarray(vd, dtype=bool)
        outcome = np.asarray(outc, dtype=np.float64)
        if not (np.abs(outcome) < MAX_REWARD).all():
            cls._raise_first_error(records, source)
        return cls(StepColumns(group_ids=list(group_index), traj_group=np.asarray(tg, dtype=np.int64),
                                traj_success=np.asarray(succ, dtype=bool), traj_outcome=outcome,
                                traj_len=np.asarray(lens, dtype=np.int64), state_key=keys, anchor_tables=tables,
                                step_action=_dense(action_first)[0], actions=list(ctab), step_reward=rewards,
                                step_valid=valid, trajectories=records))

    @staticmethod
    def _raise_first_error(records: Sequence[Any], source: str) -> None:
        for i, rec in enumerate(records, 1):
            validate_record(rec, f"{source}: record {i}")
        raise RecordError(f"{source}: malformed records")  # pragma: no cover - validate_record finds it

    @classmethod
    def from_groups(cls, groups: Sequence[Group]) -> StepBatch:
        """Build from :class:`Group` objects (anchors JSON values or hashable; identified as in
        :meth:`from_records`, so a batch gets the same credit in process and from its JSON Lines records)."""
        group_ids, tg, lens, succ, outc, trajs = [], [], [], [], [], []
        steps: list[Step] = []
        for gi, group in enumerate(groups):
            group_ids.append(group.task_id)
            for traj in group.trajectories:
                if not traj.steps:
                    raise RecordError(f"group {group.task_id!r}: a trajectory has no steps")
                tg.append(gi)
                lens.append(len(traj.steps))
                succ.append(bool(traj.success))
                outc.append(traj.outcome)
                trajs.append(traj)
                steps.extend(traj.steps)
        if not steps:
            raise RecordError("no trajectories given")
        try:
            keys, tables = _state_keys(steps, attrgetter("anchor"), len(groups), tg, lens)
        except ValueError as exc:  # a tuple holding something that is neither JSON nor a string
            raise RecordError(f"a step's anchor cannot be identified: {exc}") from None
        ctab: dict[str, int] = {}
        action_first = _first_indices(steps, attrgetter("action"), ctab)
        try:
            outcome = np.asarray(outc, dtype=np.float64)
            rewards = np.asarray([s.reward for s in steps], dtype=np.float64)
        except (OverflowError, TypeError, ValueError):
            outcome = rewards = np.array([np.nan])
        if not ((np.abs(outcome) < MAX_REWARD).all() and (np.abs(rewards) < MAX_REWARD).all()):
            raise RecordError(f"a reward is not a finite number below {MAX_REWARD:g} in size (rescale the rewards)")
        return cls(StepColumns(group_ids=group_ids, traj_group=np.asarray(tg, dtype=np.int64),
                                traj_success=np.asarray(succ, dtype=bool), traj_outcome=outcome,
                                traj_len=np.asarray(lens, dtype=np.int64), state_key=keys, anchor_tables=tables,
                                step_action=_dense(action_first)[0], actions=list(ctab), step_reward=rewards,
                                step_valid=np.asarray([s.valid for s in steps], dtype=bool), trajectories=trajs))

    # -- views ----------------------------------------------------------------------------------------------------
    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Cut a per-step array into one array per trajectory (input order; views, slicing is ~5x np.split)."""
        bounds = np.append(self.traj_start, self.n_steps).tolist()
        return [flat[a:b] for a, b in pairwise(bounds)]

    def group_trajectories(self) -> list[np.ndarray]:
        """For each group, the indices of its trajectories in input order."""
        order = np.argsort(self.traj_group, kind="stable")
        return np.split(order, np.cumsum(np.bincount(self.traj_group, minlength=self.n_groups))[:-1])

    def groups(self) -> list[Group]:
        """The batch as :class:`Group` objects (for per-group assigners); anchors are canonical keys."""
        trajs = self._trajectories
        out = []
        for gi, idx in enumerate(self.group_trajectories()):
            built = []
            for i in idx.tolist():
                t = trajs[i]
                if isinstance(t, Trajectory):
                    built.append(t)
                    continue
                s0 = int(self.traj_start[i])
                steps = tuple(
                    Step(anchor=self.state_anchor[self.step_state[k]], action=self.actions[self.step_action[k]],
                         reward=float(self.step_reward[k]), valid=bool(self.step_valid[k]))
                    for k in range(s0, s0 + int(self.traj_len[i]))
                )
                built.append(Trajectory(steps=steps, success=bool(self.traj_success[i]),
                                        reward=float(self.traj_outcome[i]), subtask=t.get("subtask")))
            out.append(Group(task_id=self.group_ids[gi], trajectories=tuple(built)))
        return out
