"""The env family of a training config (the registry itself, the resolver and the Gymnasium ids live in
:mod:`agentbench_crbc.family`)."""

from __future__ import annotations

from typing import Any

from ..family import EnvFamily, resolve_env

__all__ = ["cpu_demo_constrains", "family_of"]


def family_of(cfg: Any) -> EnvFamily:
    """The family of a resolved config's ``env.id`` (or, before it is resolved, of ``env.name``)."""
    return resolve_env(cfg.env.id or cfg.env.name).family


def cpu_demo_constrains(family: EnvFamily, env_id: str | None = None) -> bool:
    """Whether the CPU demo's constrained answers (``rollout.constrain``) carry over to ``family`` when it is
    chosen on top of the ``cpu-demo`` preset: yes when its answers come from a finite list (the admissible actions
    its envs list, else :attr:`~agentbench_crbc.family.PromptStyle.default_actions`), that is when its prompt
    style takes no free arguments (WebShop's ``search[<query>]``) and ``env_id`` (default: its default id) has text
    observations (the ``hf`` engine constrains text prompts only). The family's training table and the user's
    values still override it."""
    if family.prompt_style.free_arguments:
        return False
    return family.env_id(env_id or family.default_id).observation == "text"
