"""Group rollout engine: prompts, action parsing, policy engines (transformers, vLLM, OpenAI, baselines).

``collect(env_id, engine, builder, seeds, group_size=8, ...)`` is the one call the trainer makes; engines import
torch, vLLM or httpx only when built.
"""

from __future__ import annotations

from .base import Completion, PolicyEngine, RolloutGroup, RolloutStep, RolloutTrajectory, SamplingParams
from .baselines import ExpertPolicy, RandomPolicy, ScriptedPolicy
from .parse import INVALID_ACTION, ParsedAction, parse_action
from .prompts import Prompt, PromptBuilder
from .runner import RolloutRunner, RolloutStats, TextPolicy, collect, resolve_env_id
from .workers import EnvPool, EnvSpec

__all__ = [
    "INVALID_ACTION",
    "Completion",
    "EnvPool",
    "EnvSpec",
    "ExpertPolicy",
    "ParsedAction",
    "PolicyEngine",
    "Prompt",
    "PromptBuilder",
    "RandomPolicy",
    "RolloutGroup",
    "RolloutRunner",
    "RolloutStats",
    "RolloutStep",
    "RolloutTrajectory",
    "SamplingParams",
    "ScriptedPolicy",
    "TextPolicy",
    "collect",
    "parse_action",
    "resolve_env_id",
]
