"""Group rollout engine: prompts, action parsing, policy engines (transformers, vLLM, OpenAI, baselines).

``RolloutRunner(env_id, engine, builder, RunnerConfig(group_size=8, ...)).collect(seeds)`` is what the trainer
calls (``collect(env_id, engine, builder, seeds, config)`` makes a runner for one call);
``build_engine(name, EngineRequest(...))`` the one place engines are built (registered like credit methods, see
``abc plugins``); engines import torch, vLLM or httpx only when built. Rollouts are the credit layer's types:
:class:`RolloutGroup` / :class:`RolloutTrajectory` / :class:`RolloutStep` subclass ``Group`` / ``Trajectory`` /
``Step``.
"""

from __future__ import annotations

from .engines.baselines import ExpertPolicy, RandomPolicy, ScriptedPolicy
from .engines.factory import EngineRequest, build_engine
from .episodes.base import (
    AnchorMap,
    Completion,
    EngineCapabilities,
    PolicyEngine,
    RolloutGroup,
    RolloutStep,
    RolloutTrajectory,
    SamplingParams,
    record_anchor,
)
from .episodes.parse import INVALID_ACTION, ParsedAction, parse_action
from .episodes.prompts import Prompt, PromptBuilder
from .episodes.runner import RolloutRunner, RolloutStats, RunnerConfig, TextPolicy, collect, env_step_limit
from .hosting.workers import EnvBackend, EnvPool, EnvRecipe, ProcessEnvPool

__all__ = [
    "INVALID_ACTION",
    "AnchorMap",
    "Completion",
    "EngineCapabilities",
    "EngineRequest",
    "EnvBackend",
    "EnvPool",
    "EnvRecipe",
    "ExpertPolicy",
    "ParsedAction",
    "PolicyEngine",
    "ProcessEnvPool",
    "Prompt",
    "PromptBuilder",
    "RandomPolicy",
    "RolloutGroup",
    "RolloutRunner",
    "RolloutStats",
    "RolloutStep",
    "RolloutTrajectory",
    "RunnerConfig",
    "SamplingParams",
    "ScriptedPolicy",
    "TextPolicy",
    "build_engine",
    "collect",
    "env_step_limit",
    "parse_action",
    "record_anchor",
]
