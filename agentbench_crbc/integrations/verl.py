"""verl: any installed credit method's step credit written into a ``DataProto`` as token ``advantages``/``returns``.

Two layouts (docs/integrations.md):

- ``steps`` (verl-agent): one row per env step; ``non_tensor_batch`` holds ``uid`` (group), ``traj_uid``
  (trajectory), ``anchor_obs`` (the observation the step acted on) and ``rewards`` (the step's env reward);
  ``token_level_rewards`` of a trajectory's last row sums to its episode return.
- ``turns`` (verl's multi-turn agent loop): one row per trajectory, its turns the runs of ``response_mask == 1``,
  the tokens between them (mask 0) the observations; ``token_level_rewards`` over a turn and the observation after
  it is that turn's reward, the row's total its return.

verl's advantage-estimator registry (``register_adv_est``) passes an estimator only ``token_level_rewards``,
``response_mask``, ``index`` and ``config``: no anchors, no trajectory ids, no observations, no success. So this
module registers nothing there; :func:`with_step_credit` wraps the trainer's ``compute_advantage`` instead (one
line), and ``algorithm.adv_estimator=abc_<method>`` then names any method the plugin host knows, a third party's
included. torch is imported only when advantages are written; verl itself is never imported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..credit import assign, parse_option
from ..errors import OptionError, RecordError
from ..host import Host, get_host

__all__ = [
    "LAYOUTS",
    "PREFIX",
    "VerlRecords",
    "compute_advantage",
    "estimator_names",
    "method_of",
    "read_records",
    "with_step_credit",
]

#: ``algorithm.adv_estimator`` values ``abc_<method>`` select a credit method of the plugin host.
PREFIX = "abc_"
#: ``auto`` reads ``steps`` when ``non_tensor_batch`` has ``traj_uid``, else ``turns``.
LAYOUTS = ("auto", "steps", "turns")

#: An anchor choice: ``None`` (the observation), a ``non_tensor_batch`` key, or ``fn(observation) -> hashable``.
Anchor = str | Callable[[Any], Hashable] | None


@dataclass(frozen=True, slots=True)
class VerlRecords:
    """Credit-contract records read from a ``DataProto`` and where each step's credit goes back.

    :param layout: ``steps`` or ``turns``.
    :param records: one record per trajectory (``group``, ``steps``, ``success``, ``reward``), groups in first-seen
        order, as ``abc credit`` reads them.
    :param step_row: per step (records' order, flat), the batch row its tokens are in.
    :param step_turn: per step, its turn within that row (always 0 in the ``steps`` layout).
    """

    layout: str
    records: tuple[dict[str, Any], ...]
    step_row: np.ndarray
    step_turn: np.ndarray


def estimator_names(host: Host | None = None) -> list[str]:
    """``abc_<method>`` for every credit method the plugin host has (built-in and third-party), sorted."""
    return [PREFIX + name for name in (host or get_host()).credit.names()]


def method_of(adv_estimator: Any) -> str | None:
    """The credit method an ``adv_estimator`` value names (``abc_crbc`` -> ``crbc``), or ``None`` for verl's own."""
    name = getattr(adv_estimator, "value", adv_estimator)
    return name[len(PREFIX):] if isinstance(name, str) and name.startswith(PREFIX) else None


def _numpy(t: Any) -> np.ndarray:
    """A torch tensor (any dtype, any device) or array as float64 numpy."""
    if hasattr(t, "detach"):
        import torch

        return t.detach().to("cpu", torch.float64).numpy()
    return np.asarray(t, dtype=np.float64)


def _ints(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def _digest(ids: np.ndarray) -> str:
    """A short stable key for a token sequence (BLAKE2b of its int64 bytes)."""
    return hashlib.blake2b(np.ascontiguousarray(ids, dtype=np.int64).tobytes(), digest_size=16).hexdigest()


def _key(value: Any) -> Hashable:
    """An anchor or action value from ``non_tensor_batch`` as a record value: an array (an image) by its digest."""
    if isinstance(value, np.ndarray) and value.ndim:
        head = f"{value.dtype.str}{value.shape}".encode()
        return "nd:" + hashlib.blake2b(head + np.ascontiguousarray(value).tobytes(), digest_size=16).hexdigest()
    if isinstance(value, np.generic):
        return value.item()  # type: ignore[no-any-return]
    return value  # type: ignore[no-any-return]  # lists too: records take JSON anchors


def _response_mask(data: Any) -> np.ndarray:
    batch = data.batch
    if "response_mask" in batch.keys():  # noqa: SIM118 - a TensorDict answers `in` on its keys() only
        return _ints(batch["response_mask"]).astype(bool)
    width = batch["responses"].shape[-1]
    return _ints(batch["attention_mask"])[:, -width:].astype(bool)


def _column(data: Any, key: str, what: str) -> np.ndarray:
    nt = data.non_tensor_batch
    if key not in nt:
        have = ", ".join(sorted(nt)) or "none"
        raise RecordError(f"verl batch: non_tensor_batch has no {key!r} ({what}); it has: {have}")
    return np.asarray(nt[key])


def _success(data: Any, success: str | Callable[[float], bool] | None, rows: np.ndarray,
             outcome: np.ndarray) -> list[bool]:
    """Per trajectory (its row ``rows[i]``): the named key, ``fn(return)``, or, by default, the ``success`` key
    when present, else ``return > 0``."""
    if callable(success):
        return [bool(success(float(r))) for r in outcome]
    key = success if success is not None else ("success" if "success" in data.non_tensor_batch else None)
    if key is None:
        return (outcome > 0).tolist()
    col = _column(data, key, "the episode's success")
    return [bool(col[r]) for r in rows.tolist()]


def _layout(data: Any, layout: str) -> str:
    if layout not in LAYOUTS:
        raise OptionError(f"layout={layout!r}; choose one of {', '.join(LAYOUTS)}")
    if layout == "auto":
        return "steps" if "traj_uid" in data.non_tensor_batch else "turns"
    return layout


def read_records(data: Any, *, layout: str = "auto", anchor: Anchor = None, action: str | None = None,
                 success: str | Callable[[float], bool] | None = None, step_key: str | None = None,
                 reward_key: str = "rewards", valid_key: str = "is_action_valid") -> VerlRecords:
    """The credit-contract records of a verl ``DataProto`` (see the module docstring for the two layouts).

    :param layout: ``auto``, ``steps`` (one row per env step) or ``turns`` (one row per trajectory).
    :param anchor: ``None``: the observation (``anchor_obs``; in ``turns`` the token ids before each turn, the prompt
        for the first); a ``non_tensor_batch`` key (``turns``: one sequence per row, one anchor per turn), e.g. where
        a rollout stored our envs' ``info["anchor"]``; or ``fn(observation) -> hashable``.
    :param action: a ``non_tensor_batch`` key holding the parsed action (``turns``: one per turn); default: the
        step's response tokens, so two wordings of one move are two actions.
    :param success: a key, ``fn(episode return) -> bool``, or ``None``: the ``success`` key when present, else
        ``return > 0``.
    :param step_key: ``steps`` only: a key ordering a trajectory's rows (verl's ``balance_batch`` reorders rows);
        ``None`` keeps the rows' order.
    :param reward_key: ``steps`` only: the key of the step's env reward (verl-agent's ``rewards``); absent: 0.
    :param valid_key: the key of the step's validity (verl-agent's ``is_action_valid``); absent: every step valid.
    """
    kind = _layout(data, layout)
    tlr = _numpy(data.batch["token_level_rewards"])
    mask = _response_mask(data)
    if tlr.shape != mask.shape:
        raise RecordError(f"verl batch: token_level_rewards {tlr.shape} and response_mask {mask.shape} differ; "
                          "give one reward per response token")
    uid = _column(data, "uid", "the group id")
    read = _read_steps if kind == "steps" else _read_turns
    return read(data, uid, tlr, mask, anchor=anchor, action=action, success=success, step_key=step_key,
                reward_key=reward_key, valid_key=valid_key)


def _read_steps(data: Any, uid: np.ndarray, tlr: np.ndarray, mask: np.ndarray, *, anchor: Anchor,
                action: str | None, success: Any, step_key: str | None, reward_key: str,
                valid_key: str) -> VerlRecords:
    nt = data.non_tensor_batch
    traj = _column(data, "traj_uid", "the trajectory id")
    rows_of: dict[Any, list[int]] = {}  # trajectories in first-seen order, their rows in order
    for r in range(len(traj)):
        rows_of.setdefault(traj[r], []).append(r)
    if step_key is not None:
        step = _column(data, step_key, "the step's index in its trajectory")
        rows_of = {t: sorted(rows, key=step.__getitem__) for t, rows in rows_of.items()}
    if anchor is None or callable(anchor):
        obs = _column(data, "anchor_obs", "the observation each step acted on; or pass anchor=KEY")
        anchors = [_key(o) for o in obs] if anchor is None else [anchor(o) for o in obs]
    else:
        anchors = [_key(a) for a in _column(data, anchor, "the step's anchor")]
    if action is not None:
        actions = [str(_key(a)) for a in _column(data, action, "the step's action")]
    else:
        responses = _ints(data.batch["responses"])
        actions = [_digest(responses[r][mask[r]]) for r in range(len(traj))]
    rewards = np.asarray(nt[reward_key], dtype=np.float64) if reward_key in nt else np.zeros(len(traj))
    valid = np.asarray(nt[valid_key], dtype=bool) if valid_key in nt else np.ones(len(traj), dtype=bool)
    last = np.array([rows[-1] for rows in rows_of.values()], dtype=np.int64)
    outcome = tlr[last].sum(axis=1)
    won = _success(data, success, last, outcome)
    records = []
    for i, rows in enumerate(rows_of.values()):
        group = uid[rows[0]]
        if any(uid[r] != group for r in rows):
            raise RecordError(f"verl batch: trajectory {traj[rows[0]]!r} has rows in several uid groups; a "
                              "trajectory belongs to one group")
        records.append({"group": str(group), "success": won[i], "reward": float(outcome[i]), "steps": [
            {"anchor": anchors[r], "action": actions[r], "reward": float(rewards[r]), "valid": bool(valid[r])}
            for r in rows]})
    step_row = np.fromiter((r for rows in rows_of.values() for r in rows), dtype=np.int64)
    return VerlRecords("steps", tuple(records), step_row, np.zeros(len(step_row), dtype=np.int64))


def _spans(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` boolean grids: the first and one-past-last token of every run of ``mask``."""
    prev = np.zeros_like(mask)
    prev[:, 1:] = mask[:, :-1]
    nxt = np.zeros_like(mask)
    nxt[:, :-1] = mask[:, 1:]
    return mask & ~prev, mask & ~nxt


def _per_turn(data: Any, key: str, what: str, counts: np.ndarray) -> list[list[Any]]:
    col = _column(data, key, what)
    out = []
    for r, n in enumerate(counts.tolist()):
        values = list(col[r])
        if len(values) != n:
            raise RecordError(f"verl batch: row {r} has {n} turns but non_tensor_batch[{key!r}] holds "
                              f"{len(values)} values; give one per turn")
        out.append(values)
    return out


def _read_turns(data: Any, uid: np.ndarray, tlr: np.ndarray, mask: np.ndarray, *, anchor: Anchor,
                action: str | None, success: Any, step_key: str | None, reward_key: str,
                valid_key: str) -> VerlRecords:
    starts, ends = _spans(mask)
    counts = starts.sum(axis=1)
    if (counts == 0).any():
        raise RecordError(f"verl batch: row {int(np.flatnonzero(counts == 0)[0])} has no response token "
                          "(response_mask all 0); drop it or give it a turn")
    n_rows, width = mask.shape
    offset = np.concatenate([[0], np.cumsum(counts)[:-1]])
    turn_of = np.maximum(np.cumsum(starts, axis=1) - 1, 0)  # tokens after a turn count to it (rewards too)
    flat = (offset[:, None] + turn_of).ravel()
    rewards = np.bincount(flat, weights=tlr.ravel(), minlength=int(counts.sum()))  # adds in token order
    outcome = np.cumsum(tlr, axis=1)[:, -1]  # left to right, as an env adds its rewards (np.sum pairs them up)
    won = _success(data, success, np.arange(n_rows), outcome)
    rows_start = [np.flatnonzero(s) for s in starts]
    rows_end = [np.flatnonzero(e) + 1 for e in ends]
    if anchor is None or callable(anchor):
        responses = _ints(data.batch["responses"])
        prompts = _ints(data.batch["prompts"])
        attn = _ints(data.batch["attention_mask"]).astype(bool)
        p_attn, r_attn = attn[:, :prompts.shape[1]], attn[:, -width:]
        key: Callable[[np.ndarray], Hashable] = _digest if anchor is None else anchor
        anchors = []
        for r in range(n_rows):
            seen = [prompts[r][p_attn[r]]]
            for a, b in zip(rows_end[r][:-1].tolist(), rows_start[r][1:].tolist(), strict=True):
                seen.append(responses[r][a:b][r_attn[r][a:b]])
            anchors.append([key(ids) for ids in seen])
    else:
        anchors = [[_key(a) for a in row] for row in _per_turn(data, anchor, "one anchor per turn", counts)]
    if action is not None:
        actions = [[str(_key(a)) for a in row] for row in _per_turn(data, action, "one action per turn", counts)]
    else:
        responses = _ints(data.batch["responses"])
        actions = [[_digest(responses[r][a:b]) for a, b in zip(rows_start[r].tolist(), rows_end[r].tolist(),
                                                               strict=True)] for r in range(n_rows)]
    valid = (_per_turn(data, valid_key, "one validity per turn", counts) if valid_key in data.non_tensor_batch
             else [[True] * n for n in counts.tolist()])
    records = []
    for r in range(n_rows):
        k0 = int(offset[r])
        records.append({"group": str(uid[r]), "success": won[r], "reward": float(outcome[r]), "steps": [
            {"anchor": anchors[r][k], "action": actions[r][k], "reward": float(rewards[k0 + k]),
             "valid": bool(valid[r][k])} for k in range(int(counts[r]))]})
    step_row = np.repeat(np.arange(n_rows, dtype=np.int64), counts)
    step_turn = np.arange(len(step_row), dtype=np.int64) - np.repeat(offset, counts)
    return VerlRecords("turns", tuple(records), step_row, step_turn)


def _options(options: Mapping[str, Any] | Iterable[str] | None) -> dict[str, Any]:
    """Options as ``abc credit`` takes them: a mapping, or ``KEY=VALUE`` texts (``-O``), VALUE parsed as JSON."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    out = {}
    for text in options:
        try:
            k, v = parse_option(str(text))
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        out[k] = v
    return out


def compute_advantage(data: Any, method: str, *, options: Mapping[str, Any] | Iterable[str] | None = None,
                      host: Host | None = None, **reading: Any) -> Any:
    """Credit every step of ``data`` by ``method`` and write token-level ``advantages`` and ``returns`` (equal, as
    verl's GRPO and verl-agent's GiGPO write them): a step's credit on each of its response tokens
    (``response_mask == 1``), 0 elsewhere, in the dtype and device of ``token_level_rewards``.

    :param method: a credit method the plugin host knows (``abc plugins``); ``abc_crbc`` is read as ``crbc``.
    :param options: the method's options, a mapping or ``KEY=VALUE`` texts as ``abc credit -O`` takes them.
    :param reading: :func:`read_records`'s keywords (``layout``, ``anchor``, ``action``, ``success``...).
    :returns: ``data``, changed in place.
    """
    import torch

    read = read_records(data, **reading)
    credit = np.concatenate(assign(method_of(method) or method, list(read.records), host=host, **_options(options)))
    tlr = data.batch["token_level_rewards"]
    mask = _response_mask(data)
    if read.layout == "steps":
        per_row = np.zeros(mask.shape[0])
        per_row[read.step_row] = credit
        grid = per_row[:, None] * mask
    else:
        starts, _ = _spans(mask)
        counts = starts.sum(axis=1)
        offset = np.concatenate([[0], np.cumsum(counts)[:-1]])
        turn_of = np.maximum(np.cumsum(starts, axis=1) - 1, 0)
        grid = credit[offset[:, None] + turn_of] * mask
    adv = torch.as_tensor(grid, dtype=tlr.dtype, device=tlr.device)
    data.batch["advantages"] = adv
    data.batch["returns"] = adv.clone()
    return data


def with_step_credit(fn: Callable[..., Any], *, options: Mapping[str, Any] | Iterable[str] | None = None,
                     host: Host | None = None, **reading: Any) -> Callable[..., Any]:
    """``fn`` (verl's or verl-agent's ``compute_advantage``) with ``adv_estimator="abc_<method>"`` routed to
    :func:`compute_advantage`; every other estimator goes to ``fn`` unchanged.

    The one line, after the trainer's imports: ``compute_advantage = with_step_credit(compute_advantage)``.
    Options come from ``options`` here, overridden by ``algorithm.abc_options`` of the config verl passes
    (``+algorithm.abc_options.beta=0.98`` on the command line); ``reading`` keywords go to :func:`read_records`.
    """
    base = _options(options)

    def compute(data: Any, *args: Any, **kwargs: Any) -> Any:
        estimator = kwargs["adv_estimator"] if "adv_estimator" in kwargs else (args[0] if args else None)
        method = method_of(estimator)
        if method is None:
            return fn(data, *args, **kwargs)
        config: Any = kwargs.get("config")
        given: Any = config.get("abc_options", None) if hasattr(config, "get") else None
        opts = {**base, **_options(dict(given.items()) if hasattr(given, "items") else given)}
        return compute_advantage(data, method, options=opts, host=host, **reading)

    compute.__wrapped__ = fn  # type: ignore[attr-defined]
    compute.__doc__ = f"{getattr(fn, '__name__', 'compute_advantage')} with abc_<method> estimators (step credit)"
    return compute
