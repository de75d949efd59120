"""The rollout engine's contracts: policy engine protocol and the per-step / per-trajectory records it produces.

Token in, token out: engines take prompt token ids and return completion token ids with their log-probs, so
multi-turn masks never drift through re-tokenisation. The trainer recomputes old and reference log-probs itself.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...credit.keys import canonical_anchor
from ...credit.types import Group, Step, Trajectory
from ...errors import PluginError

__all__ = [
    "AnchorMap",
    "Completion",
    "EngineCapabilities",
    "PolicyEngine",
    "RolloutGroup",
    "RolloutStep",
    "RolloutTrajectory",
    "SamplingParams",
    "drop_env_failures",
    "record_anchor",
]


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Decoding settings of one generate call."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Completion:
    """One generated continuation: its token ids, per-token log-probs under the engine and why it stopped."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str  # "stop" | "length" | "error"
    text: str = ""


@dataclass(frozen=True, slots=True)
class EngineCapabilities:
    """What a policy engine declares about itself, in one record (``engine.capabilities``): the rollout loop, the
    trainer and ``abc rollout`` read it and never probe an engine for attributes, so no engine is tested by name.

    :param acts: the engine answers with text, ``act(observations, infos, steps, sampling)`` (a text policy:
        expert, random, scripted), instead of completing token ids with ``generate``.
    :param colocated: ``True`` (vLLM) when the engine keeps its own copy of the weights on the trainer's
        accelerator, which it releases with ``sleep`` during the update and which ``update_weights`` refreshes after
        it; ``False`` when it shares the trainer's parameters (hf) or holds none here (a server, a scripted policy).
    :param constrains: ``generate`` takes ``choices``: decoding restricted to given answers (``rollout.constrain``).
    :param needs_expert: the env workers put the env's expert action in ``info["expert_action"]`` for it.
    :param serving_dtype: the torch dtype a colocated engine serves in (pushed weights are cast to it); None: the
        trainer's compute dtype.
    :param tokenizer: the tokenizer its prompts are built with (``abc rollout`` builds them on it).
    :param image_processor: a vision-language model's image processor (image prompts).
    :param model: the torch model it generates with (an eval is labelled by its parameter count); None when it
        holds none here.
    :param vocab_size: the largest token id + 1 it may answer where that is above the tokenizer's (a padded
        embedding table); None: the tokenizer's.
    :raises PluginError: a flag that is not a bool, or a ``vocab_size`` that is not a positive int.
    """

    acts: bool = False
    colocated: bool = False
    constrains: bool = False
    needs_expert: bool = False
    serving_dtype: Any = None
    tokenizer: Any = field(default=None, repr=False)
    image_processor: Any = field(default=None, repr=False)
    model: Any = field(default=None, repr=False)
    vocab_size: int | None = None

    def __post_init__(self) -> None:
        for flag in ("acts", "colocated", "constrains", "needs_expert"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise PluginError(f"EngineCapabilities.{flag} is {value!r} ({type(value).__name__}); give True or "
                                  "False")
        n = self.vocab_size
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise PluginError(f"EngineCapabilities.vocab_size is {n!r}; give a positive int (the largest token id "
                              "+ 1) or None")


@runtime_checkable
class PolicyEngine(Protocol):
    """What the rollout loop needs from a policy (``hf``, ``vllm``, ``openai``; built by
    :func:`~agentbench_crbc.rollout.engines.factory.build_engine`).

    ``capabilities`` declares what it is and holds (:class:`EngineCapabilities`), so the trainer never tests an
    engine's name nor probes it: whether it completes token ids (``generate``) or answers text (``act``, a text
    policy), whether it is colocated (its own weights: slept during the update, pushed after it), whether it
    constrains decoding, its tokenizer. A text policy has ``act(observations, infos, steps, sampling) -> [str]``
    instead of ``generate``.
    """

    capabilities: EngineCapabilities

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                 images: Sequence[Any] | None = None) -> list[Completion]:
        """Complete each prompt (token ids); ``images`` holds one image list (or None) per prompt."""
        ...

    def update_weights(self, state: Mapping[str, Any]) -> None:
        """Load new policy weights: a state dict (parameter name -> tensor, the trainer's policy with LoRA adapters
        merged in for a colocated engine). An engine that shares the trainer's parameters finds its own tensors
        there and loads nothing."""
        ...

    def sleep(self) -> None:
        """Release accelerator memory between rollouts (no-op where meaningless)."""
        ...

    def wake_up(self) -> None:
        """Re-acquire what ``sleep`` released."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutStep(Step):
    """One environment step of one rollout: a credit-layer :class:`~agentbench_crbc.credit.types.Step` (``anchor``,
    ``action``, ``reward``, ``valid``) with what the trainer needs besides (token ids, log-probs, images, texts).

    ``anchor`` is canonical when recorded (:func:`record_anchor`): strings, numbers and tuples of them stay as they
    are, lists become tuples, dicts :class:`AnchorMap` s, anything else not JSON its ``repr``; ``reward`` is the
    env's reward minus the invalid-action penalty.
    ``choices`` holds the answers decoding was restricted to (token ids, ``rollout.constrain``; empty for free
    text): the trainer computes the step's log-probs under the same restriction. The added fields are keyword-only.
    """

    prompt_ids: tuple[int, ...] = ()
    response_ids: tuple[int, ...] = ()
    choices: tuple[tuple[int, ...], ...] = field(default=(), repr=False)
    logprobs: tuple[float, ...] = ()
    response_text: str = ""
    observation: str = ""
    images: tuple[Any, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutTrajectory(Trajectory):
    """One rollout: a credit-layer :class:`~agentbench_crbc.credit.types.Trajectory` of :class:`RolloutStep` s (outcome
    ``success``, return ``reward``, ``subtask``, ``error`` when an env crash ended it) that also records whether
    the step limit or a gate cut it (``truncated``)."""

    truncated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutGroup(Group):
    """G rollouts of one task (same env id, same seed): a credit-layer :class:`~agentbench_crbc.credit.types.Group`
    (``task_id``, ``trajectories``) with its env id, seed and whether a group gate stopped it (``gated``: the
    trainer drops it from the batch)."""

    env_id: str = ""
    seed: int = 0
    gated: bool = False

    @property
    def group_id(self) -> str:
        """The group's identity (its ``task_id``: ``{prefix}{index}-{seed}``)."""
        return self.task_id

    def to_records(self) -> list[dict[str, Any]]:
        """Credit-contract records (one per trajectory), texts, subtasks, ``truncated`` and ``error`` carried along;
        a trajectory without steps (its env crashed at reset) has no record, since the contract needs a step.
        The credit layer gives a record with ``error`` set zero credit and leaves it out of its group.

        For process boundaries only (``abc rollout`` output, JSON Lines); in-process code hands the groups
        themselves to :meth:`~agentbench_crbc.credit.batch.StepBatch.from_groups`."""
        out = []
        for i, t in enumerate(self.trajectories):
            if not t.steps:
                continue
            out.append({
                "group": self.task_id,
                "rollout": i,
                "env": self.env_id,
                "seed": self.seed,
                "steps": [{"anchor": _json_anchor(s.anchor), "action": s.action, "reward": s.reward,
                           "valid": s.valid, "response": getattr(s, "response_text", "")} for s in t.steps],
                "success": t.success,
                "reward": t.reward,
                "subtask": t.subtask,
                "truncated": getattr(t, "truncated", False),
                "error": t.error,
            })
        return out


class AnchorMap(dict[Any, Any]):
    """A dict anchor as it is recorded: the same keys and values (values recorded too), read-only and hashable, so a
    step can hold it and the credit layer identifies it as the JSON object it is (``{"a": 1, "b": 2}`` and
    ``{"b": 2, "a": 1}`` are one state, in the trainer as in ``abc credit``)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (AnchorMap, (dict(self),))

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a recorded anchor is read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only  # type: ignore


def record_anchor(anchor: Any) -> Hashable:
    """The canonical form an anchor is recorded in, once per step: strings, numbers, booleans and ``None`` as they
    are, tuples and lists element-wise as tuples (Sokoban's ``(player, boxes)`` stays a tuple; ``[1, 2]`` and
    ``(1, 2)`` are one record), dicts as :class:`AnchorMap` s (read-only, values recorded), numpy scalars and arrays
    as the Python values they hold (arrays as nested tuples). A list or dict that is not plain JSON (a NaN, keys of
    mixed types), or any other object, is recorded as its ``repr``. Equal canonical anchors are equal records
    (:meth:`RolloutGroup.to_records` writes tuples as JSON lists and maps as JSON objects). Which anchors are one
    state is decided by :func:`~agentbench_crbc.credit.keys.canonical_anchor` alone, in the trainer as in
    ``abc credit``: ``True`` and ``1``, or ``1.0`` and ``1``, are recorded as they are and stay two states."""
    if type(anchor) is str:
        return anchor
    if isinstance(anchor, np.generic):  # numpy scalars by value: np.int64(3) is 3, as it is once written to JSON
        return record_anchor(anchor.item())
    if isinstance(anchor, np.ndarray):  # an array by value, as nested tuples (written to JSON as nested lists)
        return record_anchor(_nested_tuple(anchor.tolist()))
    if isinstance(anchor, (str, int, float, bool)) or anchor is None:
        return anchor  # type: ignore[no-any-return]
    if isinstance(anchor, tuple):
        return tuple(map(record_anchor, anchor))
    if isinstance(anchor, (list, dict)):  # a JSON container: recorded as the value it is, if JSON can write it
        try:
            recorded: Hashable = (tuple(map(record_anchor, anchor)) if isinstance(anchor, list) else
                                  AnchorMap({record_anchor(k): record_anchor(v) for k, v in anchor.items()}))
            hash(recorded)
            canonical_anchor(recorded)
        except (TypeError, ValueError, RecursionError):
            return repr(anchor)
        return recorded
    return repr(anchor)


def _nested_tuple(x: Any) -> Any:
    return tuple(map(_nested_tuple, x)) if isinstance(x, list) else x


def drop_env_failures(groups: Sequence[RolloutGroup], min_size: int = 2
                      ) -> tuple[list[RolloutGroup], int, int]:
    """Leave out trajectories that an env crash or hang ended (``error`` set): they say nothing about the policy.

    A group left with fewer than ``min_size`` trajectories is dropped whole (one rollout has no group baseline).
    Returns ``(kept_groups, n_dropped_trajectories, n_dropped_groups)``: ``n_dropped_trajectories`` counts the
    errored trajectories only; the healthy ones of a dropped group go with it and are counted in the group.
    """
    kept: list[RolloutGroup] = []
    n_traj = n_groups = 0
    for g in groups:
        healthy = tuple(t for t in g.trajectories if t.error is None)
        n_traj += len(g.trajectories) - len(healthy)
        if len(healthy) < min_size:
            n_groups += 1
        elif len(healthy) == len(g.trajectories):
            kept.append(g)
        else:
            kept.append(replace(g, trajectories=healthy))
    return kept, n_traj, n_groups


def _json_anchor(anchor: Hashable) -> Any:
    anchor = record_anchor(anchor)
    if isinstance(anchor, tuple):
        return [_json_anchor(a) for a in anchor]
    if isinstance(anchor, AnchorMap):
        return {k: _json_anchor(v) for k, v in anchor.items()}
    return anchor
