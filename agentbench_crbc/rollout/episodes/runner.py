"""Group rollouts: G env copies per task seed stepped together, generation only for active copies, crash-safe."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import ConfigError, UnknownNameError
from ...family import ADMISSIBLE_ACTIONS, MAX_ACTION_CHARS, action_problem, resolve_env, style_of
from ..engines.factory import call_engine, engine_capabilities
from ..hosting.workers import DEFAULT_STEP_TIMEOUT, EnvBackend, EnvRecipe, SlotResult
from .base import (
    Completion,
    EngineCapabilities,
    RolloutGroup,
    RolloutStep,
    RolloutTrajectory,
    SamplingParams,
    record_anchor,
)
from .parse import INVALID_ACTION, parse_action
from .prompts import Prompt, PromptBuilder, observation_text, task_description

__all__ = ["DEFAULT_MAX_STEPS", "MAX_ENV_COPIES", "MAX_EPISODE_STEPS", "MAX_PENALTY", "RolloutRunner", "RolloutStats",
           "RunnerConfig", "TextPolicy", "collect", "env_step_limit"]

log = logging.getLogger(__name__)

#: The episode cap of an env that declares none (neither its family nor its Gymnasium spec).
DEFAULT_MAX_STEPS = 50
#: The most env copies one collect holds at once (tasks x rollouts per task; the paper's batches hold 128-256).
MAX_ENV_COPIES = 65_536
#: The longest episode cap (ALFWorld's is 50; WebShop's 15).
MAX_EPISODE_STEPS = 100_000
#: The largest invalid-action penalty in size (the paper's is 0.1; rewards beyond this drown every other signal).
MAX_PENALTY = 1e6


def _resolve(env: str) -> tuple[str, int | None]:
    """``(env id, its step limit or None)``: a family name or id through :func:`~agentbench_crbc.family.resolve_env`;
    a Gymnasium id no family declares (a test double, a third-party env without a family) passes through."""
    try:
        r = resolve_env(env)
    except UnknownNameError:
        import gymnasium

        spec = gymnasium.registry.get(env)
        return env, (spec.max_episode_steps if spec is not None else None)
    return r.env_id, r.family.max_steps(r.env_id)


def env_step_limit(env: str) -> int:
    """The episode step limit of a family name or id: its family's :class:`~agentbench_crbc.family.EnvId`, else its
    Gymnasium spec's ``max_episode_steps``, else :data:`DEFAULT_MAX_STEPS`."""
    limit = _resolve(env)[1]
    return limit if limit is not None else DEFAULT_MAX_STEPS


class TextPolicy:
    """Base of policies that answer with text from observations rather than tokens from prompt ids (expert,
    random, scripted). ``act`` returns one response text per active env; a subclass whose record says
    ``needs_expert`` gets the env's expert action in ``info['expert_action']``."""

    #: answers with text, holds no weights (see :class:`~agentbench_crbc.rollout.episodes.base.EngineCapabilities`)
    capabilities = EngineCapabilities(acts=True)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]], steps: Sequence[int],
            sampling: SamplingParams) -> list[str]:
        raise NotImplementedError

    def update_weights(self, state: Mapping[str, Any]) -> None:
        """No weights."""

    def sleep(self) -> None:
        """Nothing to release."""

    def wake_up(self) -> None:
        """Nothing to re-acquire."""


@dataclass
class RolloutStats:
    """Counters of the last :meth:`RolloutRunner.collect` call."""

    llm_calls: int = 0  #: sequences generated (active-only: equals the sum of trajectory lengths)
    generate_batches: int = 0  #: engine.generate calls
    env_steps: int = 0
    generated_tokens: int = 0
    wall_s: float = 0.0
    generate_s: float = 0.0
    env_s: float = 0.0
    prompt_s: float = 0.0
    worker_errors: int = 0
    invalid_actions: int = 0
    stopped: bool = False  #: ``should_stop`` answered True: the groups are partial (running episodes truncated)


class _Episode:
    """The mutable state of one running episode; :meth:`trajectory` freezes it into a :class:`RolloutTrajectory`."""

    __slots__ = ("choices", "done", "error", "group", "history", "info", "last_prompt", "obs", "ret", "slot",
                 "started", "steps", "success", "task", "truncated")

    def __init__(self, group: int, slot: int) -> None:
        self.group, self.slot = group, slot
        self.obs: Any = None
        self.info: dict[str, Any] = {}
        self.task = ""
        self.steps: list[RolloutStep] = []
        self.history: list[tuple[str, str]] = []
        self.ret = 0.0
        self.done = self.success = self.truncated = self.started = False
        self.error: str | None = None
        self.last_prompt: Prompt | None = None
        self.choices: tuple[tuple[int, ...], ...] = ()  # the answers the last step was restricted to

    def trajectory(self) -> RolloutTrajectory:
        subtask = self.info.get("subtask")
        return RolloutTrajectory(steps=tuple(self.steps), success=self.success, reward=self.ret,
                                 subtask=str(subtask) if subtask is not None else None, truncated=self.truncated,
                                 error=self.error)


@dataclass(frozen=True)
class RunnerConfig:
    """How a :class:`RolloutRunner` rolls out; every field has a default.

    :param group_size: G, env copies per task seed.
    :param sampling: decoding settings (default :class:`SamplingParams`); when ``sampling.seed`` is set, the call at
        step t uses seed ``seed + t`` (so equal seeds give equal rollouts).
    :param max_steps: episode cap (default: the id's step limit, :func:`env_step_limit`); an episode cut here is
        ``truncated`` and failed.
    :param invalid_penalty: subtracted from the env reward of a step whose response did not parse to an
        admissible action (paper: 0.1).
    :param num_workers: env worker processes (None: one per CPU, at most one per env; 0: in this process).
    :param env_kwargs: passed to ``gymnasium.make``.
    :param gate: name of a registered group gate (``abc plugins``), called after every step of a group with the
        group's actions so far; when it answers True the group stops and is marked ``gated``.
    :param gate_options: keyword options of the gate.
    :param lockstep: generate for every copy until the slowest ends (verl-agent's behaviour; for benchmarks).
    :param step_timeout: seconds an env worker may take for one step before its episode ends with an error.
    :param make_env: a picklable zero-argument env factory replacing the env id's (tests, custom envs).
    :param constrain: constrained decoding: every response is one of ``<action>a</action>`` (then the stop token)
        for the env's admissible actions ``a`` (its family's default actions when it lists none), sampled from the
        policy restricted to them; the engine's record must say it ``constrains`` (e.g. ``hf``).
    :param env_backend: where the env copies live (:class:`~agentbench_crbc.rollout.hosting.workers.EnvBackend`:
        worker processes, ``abc serve`` servers or Ray actors); default: worker processes.
    """

    group_size: int = 8
    sampling: SamplingParams | None = None
    max_steps: int | None = None
    invalid_penalty: float = 0.1
    num_workers: int | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    gate: str | None = None
    gate_options: Mapping[str, Any] = field(default_factory=dict)
    lockstep: bool = False
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    make_env: Callable[[], Any] | None = None
    constrain: bool = False
    env_backend: EnvBackend | None = None


class RolloutRunner:
    """Collects :class:`RolloutGroup` s of one env with one policy; keeps its env workers between calls.

    :param env_id: an env family's name (its default id) or a Gymnasium id (``abc plugins`` lists the families).
    :param engine: a :class:`~agentbench_crbc.rollout.episodes.base.PolicyEngine` (token ids) or a :class:`TextPolicy`;
        its :class:`~agentbench_crbc.rollout.episodes.base.EngineCapabilities` record says which.
    :param builder: a :class:`PromptBuilder` (or a tokenizer, wrapped with the paper template); token engines
        need one, text policies use it only to record prompt ids.
    :param config: how it rolls out (:class:`RunnerConfig`; default: its defaults).
    :raises PluginError: the engine declares no capabilities record (or lacks the method it names).
    :raises ConfigError: ``constrain`` with an engine that does not constrain, or sizes out of bounds.
    """

    def __init__(self, env_id: str, engine: Any, builder: PromptBuilder | Any = None,
                 config: RunnerConfig | None = None) -> None:
        config = config if config is not None else RunnerConfig()
        self.config = config
        self.env_id, limit = _resolve(env_id)
        #: the family's prompt conventions: task pattern, template actions, default actions (generic: none)
        self.style = style_of(self.env_id)
        self.engine = engine
        #: what the engine declared about itself (checked: a record, and the method it names)
        self.caps = engine_capabilities(engine)
        if builder is not None and not isinstance(builder, PromptBuilder) and hasattr(builder, "encode"):
            builder = PromptBuilder(builder, self.env_id)
        self.builder = builder
        self.text_policy = self.caps.acts
        if not self.text_policy and builder is None:
            raise TypeError("a token engine needs a PromptBuilder (or a tokenizer) to build prompts")
        self.constrain = bool(config.constrain) and not self.text_policy
        if self.constrain and not self.caps.constrains:
            raise ConfigError(f"rollout.constrain: the {type(engine).__name__} engine cannot restrict decoding to "
                              "the admissible answers (its capabilities say constrains=False); use the hf engine "
                              "or set rollout.constrain=false")
        self._choices: dict[tuple[str, ...], tuple[tuple[int, ...], ...]] = {}
        _check_sizes(config.group_size, config.max_steps, config.invalid_penalty)
        self.group_size = config.group_size
        self.sampling = config.sampling if config.sampling is not None else SamplingParams()
        self.max_steps = config.max_steps if config.max_steps is not None else (
            limit if limit is not None else DEFAULT_MAX_STEPS)
        self.invalid_penalty = config.invalid_penalty
        self.env_kwargs = dict(config.env_kwargs)
        self.gate_name = config.gate
        self.gate_options = dict(config.gate_options)
        self.lockstep = config.lockstep
        self.make_env = config.make_env if config.make_env is not None else EnvRecipe(self.env_id, self.env_kwargs)
        self.num_workers = config.num_workers
        self.step_timeout = config.step_timeout
        self.env_backend = config.env_backend or EnvBackend()
        self._pool: Any = None
        self.stats = RolloutStats()

    # -- lifecycle ------------------------------------------------------------------------------------------
    def pool(self, n_envs: int) -> Any:
        """The env pool (:attr:`env_backend`'s), (re)built when more slots are needed."""
        if self._pool is None or self._pool.n_envs < n_envs:
            if self._pool is not None:
                self._pool.close()
            self._pool = self.env_backend.pool(self.make_env, n_envs, num_workers=self.num_workers,
                                               with_expert=self.caps.needs_expert,
                                               step_timeout=self.step_timeout)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> RolloutRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- collection -----------------------------------------------------------------------------------------
    def collect(self, seeds: Sequence[int], *, group_prefix: str = "g",
                on_step: Callable[[RolloutRunner, int], None] | None = None,
                should_stop: Callable[[], bool] | None = None) -> list[RolloutGroup]:
        """Roll out ``group_size`` copies of each seed's task to the end; one :class:`RolloutGroup` per seed.

        Every step, only episodes still running get a prompt (one LLM call each; ``stats.llm_calls`` equals the
        sum of trajectory lengths unless ``lockstep``). An env that raises or whose worker dies ends its episode as
        a failure with ``error`` set (logged); the other episodes continue.

        :param on_step: called as ``on_step(runner, t)`` after step ``t`` (tests use it to kill a worker).
        :param should_stop: checked before every step (a Ctrl-C / SIGTERM flag); when it answers True the episodes
            still running end as truncated, ``stats.stopped`` is set and the partial groups are returned at once
            (a trainer discards them), so a stop waits for at most one generation step, not a whole rollout.
        """
        t0 = time.perf_counter()
        G = self.group_size
        n = len(seeds) * G
        if n > MAX_ENV_COPIES:  # before any env is built: each copy is an env (and a worker slot)
            raise ConfigError(f"{len(seeds)} tasks x {G} rollouts = {n} env copies at once; at most "
                              f"{MAX_ENV_COPIES} (give fewer groups or a smaller group size)")
        st = self.stats = RolloutStats()
        pool = self.pool(n)
        eps = [_Episode(group=i // G, slot=i) for i in range(n)]
        te = time.perf_counter()
        res = pool.reset({e.slot: int(seeds[e.group]) for e in eps})
        st.env_s += time.perf_counter() - te
        for e in eps:
            r = res[e.slot]
            error = r.error if r.error is not None else _bad_info(r.info)
            if error is not None:
                self._end_with_error(e, error)
                continue
            e.obs, e.info, e.started = r.obs, r.info, True
            e.task = task_description(observation_text(r.obs, r.info), r.info, self.style.task_pattern)
        gated = [False] * len(seeds)
        for t in range(self.max_steps):
            active = [e for e in eps if not e.done]
            if not active:
                break
            if should_stop is not None and should_stop():
                st.stopped = True
                break
            call = active if not self.lockstep else [e for e in eps if e.started and not gated[e.group]]
            texts, comps, prompts = self._act(call, t)
            st.llm_calls += len(call)
            by_slot = {e.slot: i for i, e in enumerate(call)}
            actions: dict[int, str] = {}
            parsed = {}
            for e in active:
                i = by_slot[e.slot]
                p = parse_action(texts[i], e.info.get(ADMISSIBLE_ACTIONS), free_arguments=self.style.free_arguments)
                parsed[e.slot] = p
                actions[e.slot] = p.action
            te = time.perf_counter()
            res = pool.step(actions)
            st.env_s += time.perf_counter() - te
            st.env_steps += len(actions)
            for e in active:
                i = by_slot[e.slot]
                self._record(e, res[e.slot], parsed[e.slot], texts[i], comps[i], prompts[i], t)
            if self.gate_name is not None:
                self._apply_gate(eps, seeds, gated, t + 1)
            if on_step is not None:
                on_step(self, t)
        for e in eps:
            if not e.done:
                e.done, e.truncated = True, True
        st.wall_s = time.perf_counter() - t0
        return self._groups(eps, seeds, gated, group_prefix)

    def _act(self, call: Sequence[_Episode], t: int) -> tuple[list[str], list[Completion | None],
                                                              list[Prompt | None]]:
        sampling = self.sampling
        if sampling.seed is not None:
            sampling = replace(sampling, seed=sampling.seed + t)
        tp = time.perf_counter()
        prompts: list[Prompt | None] = []
        for e in call:
            if e.done:  # lockstep: a finished copy keeps generating on its last prompt
                prompts.append(e.last_prompt)
            elif self.builder is not None:
                p = self.builder.build(e.obs, e.info, e.history, len(e.steps), e.task)
                e.last_prompt = p
                prompts.append(p)
            else:
                prompts.append(None)
        self.stats.prompt_s += time.perf_counter() - tp
        tg = time.perf_counter()
        if self.text_policy:
            texts = call_engine(self.engine, "act", ([e.obs for e in call], [e.info for e in call],
                                                     [len(e.steps) for e in call], sampling), {}, len(call))
            comps: list[Completion | None] = [None] * len(call)
        else:
            imgs = [list(p.images) if p is not None and p.images else None for p in prompts]
            ids = [p.ids for p in prompts if p is not None]
            kw: dict[str, Any] = {"images": imgs if any(imgs) else None}
            if self.constrain:
                for e in call:
                    e.choices = self.answer_choices(e.info)
                kw["choices"] = [e.choices for e in call]
            out = call_engine(self.engine, "generate", (ids, sampling), kw, len(ids), self._vocab_size)
            comps = list(out)
            texts = [c.text if c.text else self._decode(c.token_ids) for c in out]
            self.stats.generated_tokens += sum(len(c.token_ids) for c in out)
        self.stats.generate_batches += 1
        self.stats.generate_s += time.perf_counter() - tg
        return texts, comps, prompts

    def answer_choices(self, info: Mapping[str, Any]) -> tuple[tuple[int, ...], ...]:
        """The token ids of every answer constrained decoding allows for a step with ``info``:
        ``<action>a</action>`` and the stop token for each admissible action ``a`` that the action parser accepts
        (:func:`~agentbench_crbc.family.action_problem`: an answer it always rejects is never offered), cached per
        action set."""
        listed = tuple(info.get(ADMISSIBLE_ACTIONS) or ())
        adm = tuple(a for a in listed if action_problem(a) is None)
        if listed and not adm:
            raise ConfigError(f"rollout.constrain: none of the admissible actions {self.env_id} lists can be answered "
                              f"({str(listed[0])[:60]!r} {action_problem(listed[0])}); the action parser accepts "
                              f"printable ASCII of 1-{MAX_ACTION_CHARS} characters without tags: fix the env's "
                              "admissible_actions, or set rollout.constrain=false")
        if not adm:
            adm = tuple(self.style.default_actions)
        if not adm:
            raise ConfigError(f"rollout.constrain: {self.env_id} lists no admissible actions and its family names no "
                              "default actions; constrained decoding needs a finite answer set: list them in the "
                              "step info's admissible_actions or PromptStyle.default_actions, or train on free "
                              "text (--set rollout.constrain=false, or training={'rollout': {'constrain': False}} "
                              "in the family's spec; docs/families.md)")
        got = self._choices.get(adm)
        if got is None:
            tok = self.builder.tokenizer
            stop = tok.convert_tokens_to_ids("<|im_end|>")
            if not isinstance(stop, int) or stop == getattr(tok, "unk_token_id", None):
                stop = tok.eos_token_id
            got = tuple(dict.fromkeys((*tok(f"<action>{a}</action>", add_special_tokens=False)["input_ids"], int(stop))
                                      for a in adm))
            self._choices[adm] = got
        return got

    @functools.cached_property
    def _vocab_size(self) -> int | None:
        """The largest token id + 1 an engine may answer: the tokenizer's vocabulary, or the engine's declared
        ``vocab_size`` (a padded embedding table) where that is larger; None when neither is known."""
        sizes = []
        tok = getattr(self.builder, "tokenizer", None) or self.caps.tokenizer
        with contextlib.suppress(Exception):
            sizes.append(len(tok))
        with contextlib.suppress(Exception):
            sizes.append(int(tok.vocab_size))
        if self.caps.vocab_size is not None:  # the engine's (padded) embedding table
            sizes.append(self.caps.vocab_size)
        return max((n for n in sizes if isinstance(n, int) and n > 0), default=None)

    def _decode(self, ids: Sequence[int]) -> str:
        tok = getattr(self.builder, "tokenizer", None)
        return str(tok.decode(list(ids), skip_special_tokens=True)) if tok is not None else ""

    def _record(self, e: _Episode, r: SlotResult, parsed: Any, text: str, comp: Completion | None,
                prompt: Prompt | None, t: int) -> None:
        error = r.error
        if error is None and not math.isfinite(r.reward):
            error = f"the env returned a non-finite reward ({r.reward!r})"
        if error is None and not (r.terminated or r.truncated):
            error = _bad_info(r.info)
        if error is not None:
            self._end_with_error(e, error)
            return
        valid = bool(parsed.valid)
        if not valid:
            self.stats.invalid_actions += 1
        reward = float(r.reward) - (0.0 if valid else self.invalid_penalty)
        obs_text = observation_text(e.obs, e.info)
        resp_ids: tuple[int, ...] = comp.token_ids if comp is not None else ()
        if comp is None and prompt is not None and hasattr(self.builder, "tokenizer"):
            resp_ids = tuple(self.builder.tokenizer(text, add_special_tokens=False)["input_ids"])
        info = {k: v for k, v in e.info.items() if k != "expert_action"}
        info["next_action_valid"] = r.info.get("action_valid")
        info["parse_reason"] = parsed.reason
        e.steps.append(RolloutStep(
            record_anchor(e.info.get("anchor", obs_text)), parsed.action, reward, valid,
            prompt_ids=prompt.ids if prompt is not None else (), response_ids=resp_ids,
            choices=e.choices,
            logprobs=comp.logprobs if comp is not None else (), response_text=text, observation=obs_text,
            images=prompt.images if prompt is not None else (), info=info))
        e.history.append((obs_text, parsed.action if valid else INVALID_ACTION))
        e.ret += reward
        e.obs, e.info = r.obs, r.info
        if r.terminated or r.truncated:
            e.done = True
            e.success = bool(r.info.get("success", False))
            e.truncated = bool(r.truncated and not r.terminated)

    def _end_with_error(self, e: _Episode, error: str) -> None:
        self.stats.worker_errors += 1
        log.warning("episode of group %d, slot %d ended by an env error after %d steps: %s",
                    e.group, e.slot, len(e.steps), error.strip().splitlines()[-1] if error.strip() else error)
        e.done, e.success, e.error = True, False, error

    def _apply_gate(self, eps: Sequence[_Episode], seeds: Sequence[int], gated: list[bool], step: int) -> None:
        from ...host import get_host

        gate = get_host().gate(self.gate_name)  # type: ignore[arg-type]
        G = self.group_size
        for g in range(len(seeds)):
            members = eps[g * G:(g + 1) * G]
            if gated[g] or all(e.done for e in members):
                continue
            if gate.fn([[s.action for s in e.steps] for e in members], step, **self.gate_options):
                gated[g] = True
                for e in members:
                    if not e.done:
                        e.done, e.truncated = True, True

    def _groups(self, eps: Sequence[_Episode], seeds: Sequence[int], gated: Sequence[bool],
                prefix: str) -> list[RolloutGroup]:
        G = self.group_size
        return [RolloutGroup(f"{prefix}{g}-{seed}", tuple(e.trajectory() for e in eps[g * G:(g + 1) * G]),
                             env_id=self.env_id, seed=int(seed), gated=gated[g]) for g, seed in enumerate(seeds)]


def _check_sizes(group_size: Any, max_steps: Any, invalid_penalty: Any) -> None:
    """The runner's sizes and penalty, bounded before any env exists (ConfigError naming the value)."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or not 1 <= group_size <= MAX_ENV_COPIES:
        raise ConfigError(f"group size {group_size!r}: give a whole number of rollouts per task in [1, "
                          f"{MAX_ENV_COPIES}]")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                  or not 1 <= max_steps <= MAX_EPISODE_STEPS):
        raise ConfigError(f"max_steps {max_steps!r}: give a whole number of steps per episode in [1, "
                          f"{MAX_EPISODE_STEPS}]")
    if isinstance(invalid_penalty, bool) or not isinstance(invalid_penalty, (int, float)) or not (
            math.isfinite(invalid_penalty) and abs(invalid_penalty) <= MAX_PENALTY):
        raise ConfigError(f"invalid_penalty {invalid_penalty!r}: give a finite number of at most {MAX_PENALTY:g} "
                          "in size (a NaN or infinite penalty makes every record unreadable to the credit layer)")


def _bad_info(info: Mapping[str, Any]) -> str | None:
    """Why an env's ``info`` cannot be used (``admissible_actions`` not a list of strings), or None."""
    adm = info.get(ADMISSIBLE_ACTIONS)
    if adm is None or (isinstance(adm, (list, tuple)) and all(isinstance(a, str) for a in adm)):
        return None
    return f"the env's info[{ADMISSIBLE_ACTIONS!r}] must be a list of strings, got {_clip(repr(adm))}"


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def collect(env_id: str, engine: Any, builder: PromptBuilder | Any, seeds: Sequence[int],
            config: RunnerConfig | None = None, *, runner: RolloutRunner | None = None,
            group_prefix: str = "g") -> list[RolloutGroup]:
    """Roll out ``group_size`` copies of each seed's task with ``engine``; one :class:`RolloutGroup` per seed.

    Each trajectory's steps carry prompt ids, response ids, log-probs, anchor, parsed action, validity, reward
    (env reward minus ``invalid_penalty`` when invalid) and info; trajectories keep ``success``, the return
    ``reward``, ``subtask``, ``truncated`` and ``error`` (env crash). Pass ``runner`` (a :class:`RolloutRunner`) to
    keep env workers alive across calls; otherwise a temporary one is made from ``config`` and closed.

    :param env_id: a family name or a Gymnasium id (``abc/SokobanText-v0``).
    :param engine: a token engine or a text policy, as
        :func:`~agentbench_crbc.rollout.engines.factory.build_engine` makes them
        (``hf``, ``vllm``, ``openai``, ``expert``, ``random``...).
    :param builder: a :class:`PromptBuilder` (``template="compact"`` for tiny models) or a tokenizer.
    :param config: the temporary runner's :class:`RunnerConfig` (default: its defaults with ``num_workers=0``,
        the envs in this process).
    """
    if runner is not None:
        return runner.collect(seeds, group_prefix=group_prefix)
    with RolloutRunner(env_id, engine, builder, config if config is not None else RunnerConfig(num_workers=0)) as r:
        return r.collect(seeds, group_prefix=group_prefix)
