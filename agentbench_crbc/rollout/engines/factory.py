"""Rollout engines as plugins: the one place a policy engine is built, by its registered name, and the one place its
answers are checked (:func:`call_engine`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import AbcError, ConfigError, EngineError, MissingDependencyError, PluginError
from ...extras import from_import_error, install_hint
from ...host import Host, get_host
from ..episodes.base import EngineCapabilities

__all__ = ["MAX_LOGPROB", "EngineRequest", "build_engine", "call_engine", "check_engine_options",
           "engine_capabilities", "engine_label", "engine_names", "parse_policy"]

#: The largest log-prob an engine may report for a token it chose: 0 (probability one) plus float rounding.
MAX_LOGPROB = 1e-4


@dataclass(frozen=True)
class EngineRequest:
    """What a rollout engine is built from; an engine's factory reads the fields it needs.

    :param model: a loaded model (the trainer's policy: ``hf`` generates with it, ``vllm`` pushes its weights).
    :param tokenizer: its tokenizer (``hf``; ``openai`` decodes with it).
    :param image_processor: a vision-language model's image processor (``hf``).
    :param model_name: a Hugging Face id or folder (``vllm`` loads it, ``hf`` when no ``model`` is given) or the
        served model name (``openai``).
    :param spec: what follows ``NAME:`` in ``--policy NAME:SPEC`` (``hf:PATH``, ``openai:URL``, ``scripted:a,b``).
    :param device: where ``hf`` loads ``model_name`` (``cpu``, ``cuda``; default: cuda when available).
    :param autocast_dtype: ``hf`` forwards in ``torch.autocast`` of this dtype (bf16 with fp32 master weights).
    :param options: engine-specific settings (``rollout.engine_options``, ``--engine-option``), checked against
        the keys the engine registered (:func:`check_engine_options`; ``abc plugins`` lists them): ``vllm``: the
        ``vllm.LLM`` keywords such as ``gpu_memory_utilization``; ``openai``: ``api_key``, ``timeout``,
        ``max_concurrency``; ``hf``: ``threads``, ``stop_token_ids``; ``random``: ``seed``, ``invalid_rate``,
        ``actions``; ``scripted``: ``script``.
    :param env_id: the Gymnasium id the engine will play (for engines that adapt to it).
    :param seed: this process's seed (the trainer's ``seed`` plus its rank), for engines that seed themselves.
    :param distributed: the engine runs in one rank of a torchrun job (each rank builds its own).
    :param beside_trainer: the trainer builds it, beside its policy on the same accelerator (an engine holding
        memory of its own then takes its colocated defaults, e.g. vLLM's 40% of the GPU and sleep mode).
    """

    model: Any = None
    tokenizer: Any = None
    image_processor: Any = None
    model_name: str = ""
    spec: str = ""
    device: Any = None
    autocast_dtype: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    env_id: str = ""
    seed: int | None = None
    distributed: bool = False
    beside_trainer: bool = False


def engine_names(host: Host | None = None) -> list[str]:
    """The installed rollout engines' names, sorted."""
    return list((host or get_host()).engines.names())


def parse_policy(policy: str, host: Host | None = None) -> tuple[str, str]:
    """``--policy NAME[:SPEC]`` as ``(engine name, spec)``: ``expert`` -> ``("expert", "")``, ``hf:PATH`` ->
    ``("hf", "PATH")``, ``openai:http://host:8000/v1`` -> ``("openai", "http://host:8000/v1")``.

    :raises UnknownNameError: ``NAME`` is no installed engine (the message lists them).
    """
    engines = (host or get_host()).engines
    name, _, spec = policy.partition(":")
    engines.get(name)  # raises, listing the installed engines
    return name, spec


def check_engine_options(name: str, options: Mapping[str, Any], *, host: Host | None = None,
                         where: str = "rollout.engine_options") -> None:
    """``options`` hold only keys engine ``name`` registered (``register.add(..., options=...)``); an engine that
    declared none takes any.

    :raises UnknownNameError: no engine of that name is installed.
    :raises ConfigError: a key the engine does not read (one line naming it and the engine's keys).
    """
    entry = (host or get_host()).engine(name)
    if entry.options is None:
        return
    unknown = sorted(str(k) for k in options if k not in entry.options)
    if unknown:
        known = ", ".join(entry.options) or "none"
        raise ConfigError(f"{where}: rollout engine {name!r} takes no option {unknown[0]!r}; its options: {known}")


def build_engine(name: str, request: EngineRequest, *, host: Host | None = None) -> Any:
    """The :class:`~agentbench_crbc.rollout.episodes.base.PolicyEngine` (or text policy) that engine ``name``
    builds from ``request``.

    :raises UnknownNameError: no engine of that name is installed (the message lists the installed ones).
    :raises MissingDependencyError: the engine needs a pip extra that is not installed (one line naming it).
    :raises ConfigError: ``request.options`` hold a key the engine did not register (:func:`check_engine_options`).
    :raises PluginError: the factory returned something that is no engine (no capabilities record, or without the
        method the record names: :func:`engine_capabilities`).
    """
    entry = (host or get_host()).engine(name)
    check_engine_options(name, request.options, host=host)
    try:
        engine = entry.load()(request)
    except MissingDependencyError:
        raise
    except ImportError as exc:  # a factory's lazy import of an optional package
        known = from_import_error(exc)
        if known is not None:
            raise known from None
        if entry.extra:
            raise MissingDependencyError(install_hint(exc.name or str(exc), entry.extra)) from None
        raise
    engine_capabilities(engine, f"rollout engine {name!r} of {entry.distribution}")
    return engine


def engine_capabilities(engine: Any, who: str | None = None) -> EngineCapabilities:
    """The :class:`~agentbench_crbc.rollout.episodes.base.EngineCapabilities` record ``engine`` declares
    (``engine.capabilities``), checked: a record of that type, and the method it says the engine answers with
    (``act`` when ``acts``, else ``generate``) callable.

    :param who: how the error names the engine (default: :func:`engine_label`).
    :raises PluginError: no record, a record of another type, or the method it names missing (one line naming the
        engine and the fix).
    """
    who = who or engine_label(engine)
    cls = type(engine).__name__
    try:
        caps = engine.capabilities
    except AttributeError:
        raise PluginError(f"{who}: {cls} declares no capabilities; give it capabilities = EngineCapabilities(...) "
                          "(agentbench_crbc.rollout.episodes.base; acts=True for a text policy)") from None
    if not isinstance(caps, EngineCapabilities):
        raise PluginError(f"{who}: {cls}.capabilities is {type(caps).__name__}, not an EngineCapabilities record; "
                          "set capabilities = EngineCapabilities(...) (agentbench_crbc.rollout.episodes.base)")
    method = "act" if caps.acts else "generate"
    try:
        bound = engine.act if caps.acts else engine.generate
    except AttributeError:
        bound = None
    if not callable(bound):
        other = "acts=False if it generates" if caps.acts else "acts=True if it is a text policy with act()"
        raise PluginError(f"{who}: {cls}.capabilities declares acts={caps.acts} but it has no {method}() method; "
                          f"define {method}(), or declare {other}")
    return caps


def engine_label(engine: Any) -> str:
    """How errors name an engine: its class and the module it comes from."""
    cls = type(engine)
    return f"rollout engine {cls.__name__} ({cls.__module__})"


def call_engine(engine: Any, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], n: int,
                vocab_size: int | None = None) -> list[Any]:
    """``engine.<method>(*args, **kwargs)`` with its answer checked at the boundary: ``act`` must return ``n``
    strings, ``generate`` ``n`` completions whose token ids are ints in ``[0, vocab_size)``.

    :raises EngineError: the engine raised (anything but this package's own errors, an interrupt or running out of
        memory) or answered out of contract; one line naming the engine and what it returned.
    """
    who = engine_label(engine)
    try:
        got = (engine.act if method == "act" else engine.generate)(*args, **kwargs)
    except (AbcError, MemoryError):
        raise
    except (Exception, SystemExit) as exc:  # an engine's sys.exit(7) ends no run silently
        if "OutOfMemory" in type(exc).__name__:  # torch.cuda.OutOfMemoryError: the machine's limit, not the engine
            raise
        text = str(exc).strip().splitlines()
        raise EngineError(f"{who}: {method}() raised {type(exc).__name__}: {text[0][:300] if text else ''}") from exc
    if not isinstance(got, (list, tuple)):
        raise EngineError(f"{who}: {method}() returned {type(got).__name__}; it must return a list with one answer "
                          f"per prompt ({n})")
    if len(got) != n:
        raise EngineError(f"{who}: {method}() returned {len(got)} answers for {n} prompts; return one per prompt")
    for i, item in enumerate(got):
        where = f"{who}: {method}() answer {i}"
        if method == "act":
            if not isinstance(item, str):
                raise EngineError(f"{where} is {type(item).__name__}; act() returns one action string per prompt")
            continue
        _check_completion(item, where, vocab_size)
    return list(got)


def _check_completion(item: Any, where: str, vocab_size: int | None) -> None:
    ids, lps, text = (getattr(item, k, None) for k in ("token_ids", "logprobs", "text"))
    if not isinstance(ids, Sequence) or isinstance(ids, (str, bytes)) or not isinstance(lps, Sequence) or (
            text is not None and not isinstance(text, str)):
        raise EngineError(f"{where} is {type(item).__name__}, not a Completion (token_ids, logprobs, text)")
    top = vocab_size if vocab_size else 2**31
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral) or not 0 <= t < top:
            shown = repr(t) if len(repr(t)) < 40 else repr(t)[:37] + "..."
            raise EngineError(f"{where}: token id {shown} is not an int in [0, {top}) (the tokenizer's vocabulary)")
    if len(lps) != len(ids):
        raise EngineError(f"{where}: {len(lps)} log-probs for {len(ids)} token ids; give one log-prob per token")
    for lp in lps:
        if isinstance(lp, bool) or not isinstance(lp, numbers.Real) or math.isnan(lp):
            raise EngineError(f"{where}: log-prob {lp!r} is not a number")
        if lp == -math.inf:  # probability zero: no engine samples such a token
            raise EngineError(f"{where}: log-prob -inf (probability zero) for a sampled token; the engine's "
                              "log-probs do not belong to its tokens")
        if lp > MAX_LOGPROB:  # +inf, or a probability above one
            raise EngineError(f"{where}: log-prob {float(lp)!r} is above 0 (a probability above one); a token's "
                              "log-prob is at most 0")
