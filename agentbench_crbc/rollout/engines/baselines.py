"""Baseline and test-double policies that answer with text: the env's expert, uniform random, and scripted."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...family import ADMISSIBLE_ACTIONS, PromptStyle
from ...hookspecs import hookimpl
from ..episodes.base import EngineCapabilities, SamplingParams
from ..episodes.parse import is_template
from ..episodes.runner import TextPolicy

if TYPE_CHECKING:
    from ...host import EngineRegister
    from .factory import EngineRequest

__all__ = ["ExpertPolicy", "RandomPolicy", "ScriptedPolicy", "abc_register_rollout_engines", "build_expert",
           "build_random", "build_scripted", "wrap_action"]

def wrap_action(action: str, think: str = "") -> str:
    """``<think>{think}</think><action>{action}</action>`` (the think part only when given)."""
    return (f"<think>{think}</think>" if think else "") + f"<action>{action}</action>"


def _fill(command: str, free_arguments: Sequence[str]) -> str:
    """A template (``search[<query>]``, :func:`~agentbench_crbc.rollout.episodes.parse.is_template`) ->
    ``search[item]``; other commands unchanged."""
    if is_template(command, free_arguments):
        return command[: command.find("[") + 1] + "item]"
    return command


class ExpertPolicy(TextPolicy):
    """The env's own expert (its family's :attr:`~agentbench_crbc.family.EnvFamily.expert`, ``expert(env)``: an
    optimal solver, a planner, an oracle), run beside the env in its worker; answers
    ``<action>expert action</action>``."""

    capabilities = EngineCapabilities(acts=True, needs_expert=True)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]], steps: Sequence[int],
            sampling: SamplingParams) -> list[str]:
        out = []
        for info in infos:
            a = info.get("expert_action")
            out.append(wrap_action(str(a)) if a else "")
        return out


class RandomPolicy(TextPolicy):
    """A uniform choice among the admissible actions (``actions`` when the env lists none: the family's
    :attr:`~agentbench_crbc.family.PromptStyle.default_actions` when built by the ``random`` engine); seeded by
    ``seed`` and the sampling seed of each call, so equal seeds give equal rollouts.

    :param invalid_rate: probability of answering garbage instead (exercises the invalid path).
    :param free_arguments: the family's template placeholders (``search[<query>]`` is answered ``search[item]``).
    """

    def __init__(self, seed: int = 0, actions: Sequence[str] = (), invalid_rate: float = 0.0,
                 free_arguments: Sequence[str] = ()) -> None:
        self.seed = seed
        self.actions = tuple(actions)
        self.invalid_rate = invalid_rate
        self.free_arguments = tuple(free_arguments)
        self._calls = 0

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]], steps: Sequence[int],
            sampling: SamplingParams) -> list[str]:
        key = [self.seed, sampling.seed if sampling.seed is not None else self._calls]
        self._calls += 1
        rng = np.random.default_rng(key)
        out = []
        for info in infos:
            if self.invalid_rate and rng.random() < self.invalid_rate:
                out.append("I am not sure what to do.")
                continue
            adm = [_fill(a, self.free_arguments) for a in (info.get(ADMISSIBLE_ACTIONS) or self.actions)]
            out.append(wrap_action(adm[int(rng.integers(len(adm)))]) if adm else "")
        return out


class ScriptedPolicy(TextPolicy):
    """A test double: ``script(observation, info, step) -> response text``, or a list of texts played in order
    (the last repeated)."""

    def __init__(self, script: Callable[[Any, Mapping[str, Any], int], str] | Sequence[str]) -> None:
        self.script = script

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]], steps: Sequence[int],
            sampling: SamplingParams) -> list[str]:
        if callable(self.script):
            return [str(self.script(o, i, s)) for o, i, s in zip(observations, infos, steps, strict=True)]
        seq = list(self.script)
        return [seq[min(s, len(seq) - 1)] if seq else "" for s in steps]


def build_expert(request: EngineRequest) -> ExpertPolicy:
    """The ``expert`` engine: the env family's own expert, run beside each env copy."""
    return ExpertPolicy()


def build_random(request: EngineRequest) -> RandomPolicy:
    """The ``random`` engine: a uniform admissible action; options ``seed`` (default: ``request.seed``, else 0),
    ``invalid_rate``, ``actions`` (default: the default actions of ``request.env_id``'s family)."""
    from ...family import style_of

    opts = request.options
    style = style_of(request.env_id) if request.env_id else PromptStyle()
    return RandomPolicy(seed=int(opts.get("seed", request.seed if request.seed is not None else 0)),
                        actions=tuple(opts.get("actions", style.default_actions)),
                        invalid_rate=float(opts.get("invalid_rate", 0.0)), free_arguments=style.free_arguments)


def build_scripted(request: EngineRequest) -> ScriptedPolicy:
    """The ``scripted`` engine: ``options["script"]`` (a function or response texts), else the actions of
    ``scripted:up,up,left`` played in order (the last repeated)."""
    script = request.options.get("script")
    if script is None:
        script = [wrap_action(a.strip()) for a in request.spec.split(",") if a.strip()]
    return ScriptedPolicy(script)


@hookimpl
def abc_register_rollout_engines(register: EngineRegister) -> None:
    register.add("expert", build_expert, options=(), summary="the env family's expert (solver, planner, oracle)")
    register.add("random", build_random, options=("seed", "invalid_rate", "actions"),
                 summary="a uniform choice among the admissible actions")
    register.add("scripted", build_scripted, options=("script",),
                 summary="responses played in order (scripted:up,up,left)")
