"""The rollout engine's contracts: policy engine protocol and the per-step / per-trajectory records it produces.

Token in, token out: engines take prompt token ids and return completion token ids with their log-probs, so
multi-turn masks never drift through re-tokenisation. The trainer recomputes old and reference log-probs itself.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Completion",
    "PolicyEngine",
    "RolloutGroup",
    "RolloutStep",
    "RolloutTrajectory",
    "SamplingParams",
    "drop_env_failures",
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


@runtime_checkable
class PolicyEngine(Protocol):
    """What the rollout loop needs from a policy (``hf``, ``vllm``, ``openai``, ``expert``, ``random``...)."""

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                 images: Sequence[Any] | None = None) -> list[Completion]:
        """Complete each prompt (token ids); ``images`` holds one image list (or None) per prompt."""
        ...

    def update_weights(self, state: Any) -> None:
        """Load new policy weights (a state dict or a model sharing parameters)."""
        ...

    def sleep(self) -> None:
        """Release accelerator memory between rollouts (no-op where meaningless)."""
        ...

    def wake_up(self) -> None:
        """Re-acquire what ``sleep`` released."""
        ...


@dataclass(frozen=True, slots=True)
class RolloutStep:
    """One environment step of one rollout, with everything the credit layer and the trainer need."""

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    anchor: Hashable
    action: str  # the semantic action executed (parsed), or the env's answer to an invalid one
    response_text: str
    valid: bool
    reward: float  # env reward of this step, minus the invalid-action penalty when invalid
    observation: str = ""
    images: tuple[Any, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class RolloutTrajectory:
    """One rollout: steps, outcome (``success``), scalar return ``reward`` (R for return-based credit)."""

    steps: tuple[RolloutStep, ...]
    success: bool
    reward: float
    subtask: str | None = None
    truncated: bool = False
    error: str | None = None  # set when the env worker crashed; the trajectory then counts as a failure


@dataclass(frozen=True, slots=True)
class RolloutGroup:
    """G rollouts of one task (same env id, same seed)."""

    group_id: str
    env_id: str
    seed: int
    trajectories: tuple[RolloutTrajectory, ...]
    gated: bool = False  # True when a group gate stopped it (the trainer drops it from the batch)

    def to_records(self) -> list[dict[str, Any]]:
        """Credit-contract records (one per trajectory), texts, subtasks, ``truncated`` and ``error`` carried along;
        a trajectory without steps (its env crashed at reset) has no record, since the contract needs a step.
        The credit layer gives a record with ``error`` set zero credit and leaves it out of its group."""
        out = []
        for i, t in enumerate(self.trajectories):
            if not t.steps:
                continue
            out.append({
                "group": self.group_id,
                "rollout": i,
                "env": self.env_id,
                "seed": self.seed,
                "steps": [{"anchor": _json_anchor(s.anchor), "action": s.action, "reward": s.reward,
                           "valid": s.valid, "response": s.response_text} for s in t.steps],
                "success": t.success,
                "reward": t.reward,
                "subtask": t.subtask,
                "truncated": t.truncated,
                "error": t.error,
            })
        return out


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
    if isinstance(anchor, (str, int, float, bool)) or anchor is None:
        return anchor
    if isinstance(anchor, tuple):
        return [_json_anchor(a) for a in anchor]
    return repr(anchor)
