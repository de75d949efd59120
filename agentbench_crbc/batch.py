"""StepBatch: a batch of rollout groups flattened into numpy arrays (the form credit assigners compute on)."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any, cast

import numpy as np

from .errors import RecordError
from .types import Group, Step, Trajectory

__all__ = ["StepBatch", "canonical_anchor", "dense_unique", "validate_record"]

_JSON_SCALARS = (int, float, bool, type(None))


def canonical_anchor(anchor: Any) -> Hashable:
    """A hashable key for a JSON anchor: strings as they are, anything else as canonical JSON text.

    ``[1, 2]`` and ``[1, 2]`` give one key, ``[1, 2]`` and ``[2, 1]`` two, and ``"[1,2]"`` (a string) a third.
    """
    if type(anchor) is str:
        return anchor
    if isinstance(anchor, (list, dict, tuple, *_JSON_SCALARS)):
        try:
            text = json.dumps(anchor, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"anchor is not plain JSON ({exc})") from None
        return ("json", text)
    if isinstance(anchor, Hashable):
        return anchor
    raise ValueError(f"anchor of type {type(anchor).__name__} is neither JSON nor hashable")


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
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))
                               or not math.isfinite(reward)):
        raise RecordError(f"{where}: 'reward' must be a finite number, got {reward!r}")
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
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
            raise RecordError(f"{here}: 'reward' must be a finite number, got {r!r}")
        if "valid" in step and not isinstance(step["valid"], bool):
            raise RecordError(f"{here}: 'valid' must be true or false, got {step['valid']!r}")


def _intern(values: Iterable[Any]) -> tuple[np.ndarray, list[Any]]:
    """Ids in first-seen order (each value hashed once; the hash dominates for long text anchors)."""
    table: dict[Any, int] = {}
    ids = [table.setdefault(v, len(table)) for v in values]
    return np.asarray(ids, dtype=np.int64), list(table)


def dense_unique(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys in ``[0, n_keys)``, by counting when that is cheaper."""
    if n_keys > 64 * len(keys) + 65536:  # counting costs O(n_keys): cheap up to a few hundred thousand
        uniq, inv = np.unique(keys, return_inverse=True)
        return uniq, inv.astype(np.int64, copy=False)
    uniq = np.flatnonzero(np.bincount(keys, minlength=n_keys))
    table = np.empty(n_keys, dtype=np.int64)
    table[uniq] = np.arange(len(uniq))
    return uniq, table[keys]


class StepBatch:
    """Every step of a batch of groups as flat arrays; groups and trajectories keep their input order.

    Trajectory arrays (length ``n_traj``): ``traj_group``, ``traj_success``, ``traj_outcome`` (R), ``traj_len``,
    ``traj_start``. Step arrays (length ``n_steps``): ``step_traj``, ``step_t`` (1-indexed), ``step_state``
    (equal iff same group and same anchor; ``0..n_states-1``), ``step_action`` (interned action strings),
    ``step_reward``, ``step_valid``. Derived: ``step_group``, ``step_last``, ``step_next`` (successor state, or
    ``n_states`` for the success boundary z+ and ``n_states + 1`` for the failure boundary z-).
    """

    def __init__(self, *, group_ids: Sequence[str], traj_group: np.ndarray, traj_success: np.ndarray,
                 traj_outcome: np.ndarray, traj_len: np.ndarray, anchor_ids: np.ndarray, anchors: list[Hashable],
                 step_action: np.ndarray, actions: list[str], step_reward: np.ndarray | None,
                 step_valid: np.ndarray | None, trajectories: Sequence[Any]) -> None:
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
        # a state is an (group, anchor) pair: equal anchors in different groups never merge
        keys = self.step_group * max(len(anchors), 1) + anchor_ids
        uniq, self.step_state = dense_unique(keys, self.n_groups * max(len(anchors), 1))
        self.n_states = len(uniq)
        self._anchors, self._state_anchor_id = anchors, uniq % max(len(anchors), 1)
        self.state_group = (uniq // max(len(anchors), 1)).astype(np.int64)
        self.step_action = step_action
        self.actions = actions
        self.step_reward = np.zeros(self.n_steps) if step_reward is None else step_reward
        self.step_valid = np.ones(self.n_steps, dtype=bool) if step_valid is None else step_valid
        self.step_last = np.zeros(self.n_steps, dtype=bool)
        self.step_last[self.traj_start + traj_len - 1] = True
        nxt = np.empty(self.n_steps, dtype=np.int64)
        nxt[:-1] = self.step_state[1:]
        last = self.traj_start + traj_len - 1
        nxt[last] = np.where(traj_success, self.n_states, self.n_states + 1)
        self.step_next = nxt
        self._trajectories = trajectories

    @cached_property
    def state_anchor(self) -> list[Hashable]:
        """The anchor (canonical key) of each state id."""
        return [self._anchors[k] for k in self._state_anchor_id.tolist()]

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
        try:
            for rec in records:
                g = rec["group"]
                steps = rec["steps"]
                s = rec["success"]
                r = rec.get("reward")
                if (type(g) is not str or type(steps) is not list or not steps or type(s) is not bool
                        or not (r is None or type(r) is float or type(r) is int)):
                    raise TypeError
                tg.append(group_index.setdefault(g, len(group_index)))
                lens.append(len(steps))
                succ.append(s)
                outc.append(float(s) if r is None else float(r))
                all_steps.extend(steps)
            # intern while reading (no intermediate lists); types are checked on the distinct keys only
            atab: dict[Any, int] = {}
            anchor_list = [atab.setdefault(st["anchor"], len(atab)) for st in all_steps]
            ctab: dict[Any, int] = {}
            action_list = [ctab.setdefault(st["action"], len(ctab)) for st in all_steps]
            if set(map(type, ctab)) != {str}:
                raise TypeError
            canonical = False
        except (TypeError, KeyError, AttributeError):  # also unhashable (list/dict) anchors: canonicalise below
            atab, canonical = {}, True
            try:
                ctab = {}
                action_list = [ctab.setdefault(st["action"], len(ctab)) for st in all_steps]
                if set(map(type, ctab)) != {str}:
                    raise TypeError
                anchor_list = [atab.setdefault(canonical_anchor(st["anchor"]), len(atab)) for st in all_steps]
            except (TypeError, KeyError, AttributeError, ValueError):
                cls._raise_first_error(records, source)
                raise  # unreachable: _raise_first_error always raises
        if not canonical and set(map(type, atab)) != {str}:
            # numbers or tuples (1, 1.0 and true are equal as dict keys but not as JSON): canonicalise every anchor
            try:
                atab = {}
                anchor_list = [atab.setdefault(canonical_anchor(st["anchor"]), len(atab)) for st in all_steps]
            except ValueError:
                cls._raise_first_error(records, source)
        rewards = valid = None
        if max(map(len, all_steps)) > 2:  # optional per-step fields present somewhere
            rw = [s.get("reward", 0.0) for s in all_steps]
            vd = [s.get("valid", True) for s in all_steps]
            if not set(map(type, rw)) <= {float, int} or set(map(type, vd)) != {bool}:
                cls._raise_first_error(records, source)
            rewards = np.asarray(rw, dtype=np.float64)
            if not np.isfinite(rewards).all():
                cls._raise_first_error(records, source)
            valid = np.asarray(vd, dtype=bool)
        outcome = np.asarray(outc, dtype=np.float64)
        if not np.isfinite(outcome).all():
            cls._raise_first_error(records, source)
        anchor_ids, anchors = np.asarray(anchor_list, dtype=np.int64), list(atab)
        action_ids, actions = np.asarray(action_list, dtype=np.int64), list(ctab)
        return cls(group_ids=list(group_index), traj_group=np.asarray(tg, dtype=np.int64),
                   traj_success=np.asarray(succ, dtype=bool), traj_outcome=outcome,
                   traj_len=np.asarray(lens, dtype=np.int64), anchor_ids=anchor_ids, anchors=anchors,
                   step_action=action_ids, actions=actions, step_reward=rewards, step_valid=valid,
                   trajectories=records)

    @staticmethod
    def _raise_first_error(records: Sequence[Any], source: str) -> None:
        for i, rec in enumerate(records, 1):
            validate_record(rec, f"{source}: record {i}")
        raise RecordError(f"{source}: malformed records")  # pragma: no cover - validate_record finds it

    @classmethod
    def from_groups(cls, groups: Sequence[Group]) -> StepBatch:
        """Build from :class:`Group` objects (anchors must be hashable)."""
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
        anchor_ids, anchors = _intern(s.anchor for s in steps)
        action_ids, actions = _intern(s.action for s in steps)
        return cls(group_ids=group_ids, traj_group=np.asarray(tg, dtype=np.int64),
                   traj_success=np.asarray(succ, dtype=bool), traj_outcome=np.asarray(outc, dtype=np.float64),
                   traj_len=np.asarray(lens, dtype=np.int64), anchor_ids=anchor_ids, anchors=anchors,
                   step_action=action_ids, actions=actions,
                   step_reward=np.asarray([s.reward for s in steps], dtype=np.float64),
                   step_valid=np.asarray([s.valid for s in steps], dtype=bool), trajectories=trajs)

    # -- views ----------------------------------------------------------------------------------------------------
    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Cut a per-step array into one array per trajectory (input order; views, slicing is ~5x np.split)."""
        bounds = np.append(self.traj_start, self.n_steps).tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

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
