"""``load_config``: a preset, a TOML file, flags and ``--set KEY=VALUE`` overrides resolved into a TrainConfig.

The schema (dataclasses with help, bounds and choices as field metadata) is :mod:`.schema`, the presets
:mod:`.presets`, dict/TOML/hash :mod:`.config_io` and validation :mod:`.config_checks`; their public names are
re-exported here. ``env.name`` is derived from ``env.id`` through the family registry, never set apart; ``family_of``
is the family a resolved config means.
"""

from __future__ import annotations

import copy
import json
import math
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UnknownNameError
from ..family import EnvFamily, Resolved
from ..family import resolve_env as resolve
from .config_checks import validate
from .config_io import config_hash, read_toml, to_dict, to_toml
from .presets import PRESETS, preset_method_options
from .schema import (
    CreditConfig,
    EnvConfig,
    EvalConfig,
    ModelConfig,
    OptimConfig,
    RolloutConfig,
    SFTConfig,
    TrainConfig,
    field_docs,
)

__all__ = [
    "PRESETS", "CreditConfig", "EnvConfig", "EvalConfig", "ModelConfig", "OptimConfig", "RolloutConfig",
    "SFTConfig", "TrainConfig", "check_credit", "config_hash", "cpu_demo_constrains", "family_of", "field_docs",
    "load_config", "resolve_env_config", "resolved_options", "to_dict", "to_toml",
]


Mark = Callable[[str], None]


def _coerce(key: str, tp: Any, value: Any) -> Any:
    """``value`` (from TOML or a ``--set`` string) as type ``tp``; ConfigError names ``key``."""
    origin = typing.get_origin(tp)
    text = isinstance(value, str)
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if text and value.strip().lower() in ("true", "1", "yes", "on"):
                return True
            if text and value.strip().lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError("true or false")
        if tp is int:
            if isinstance(value, bool):
                raise ValueError("an integer")
            if isinstance(value, float) and value.is_integer():
                return int(value)
            return int(value) if isinstance(value, int) or text else _fail("an integer")
        if tp is float:
            if isinstance(value, bool):
                raise ValueError("a number")
            out = float(value) if isinstance(value, (int, float)) or text else _fail("a number")
            if not math.isfinite(out):
                raise ValueError("a finite number")
            return out
        if tp is str:
            if not text:
                raise ValueError("a string")
            return value
        if origin is list:
            if text:
                value = json.loads(value) if value.strip().startswith("[") else [v.strip() for v in value.split(",")]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError("a list of strings")
            return list(value)
        if origin is dict:
            if text:
                value = json.loads(value)
            if not isinstance(value, dict):
                raise ValueError("a table / JSON object")
            return dict(value)
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        want = str(exc) if str(exc).startswith(("a ", "an ", "true")) else _kind(tp)
        raise ConfigError(f"config key {key!r}: {value!r} is not {want}") from None
    raise ConfigError(f"config key {key!r}: unsupported type {tp}")  # pragma: no cover


def _fail(what: str) -> Any:
    raise ValueError(what)


def _kind(tp: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def _set(cfg: Any, key: str, value: Any, *, prefix: str = "", mark: Mark | None = None) -> None:
    """Set dotted ``key`` on ``cfg``; unknown keys raise ConfigError listing the valid ones. ``mark`` is told every
    leaf key set (the layer bookkeeping of :func:`load_config`)."""
    import dataclasses

    head, _, rest = key.partition(".")
    names = {f.name: f for f in dataclasses.fields(cfg)}
    full = prefix + key
    if head not in names or head.startswith("_"):
        valid = ", ".join(prefix + n for n in names)
        raise ConfigError(f"unknown config key {full!r}; valid keys here: {valid}")
    hints = typing.get_type_hints(type(cfg))
    tp = hints[head]
    if dataclasses.is_dataclass(tp):
        if not rest:
            if not isinstance(value, Mapping):
                raise ConfigError(f"config key {full!r} is a table; set its fields, e.g. {full}.<field>=...")
            for k, v in value.items():
                _set(getattr(cfg, head), str(k), v, prefix=f"{prefix}{head}.", mark=mark)
            return
        _set(getattr(cfg, head), rest, value, prefix=f"{prefix}{head}.", mark=mark)
        return
    if mark is not None:
        mark(prefix + head)
    if rest:
        if typing.get_origin(tp) is dict:  # credit.options.beta=0.9, env.kwargs.size=7
            from ..credit import parse_option

            d = dict(getattr(cfg, head))
            d[rest] = parse_option(f"{rest}={value}")[1] if isinstance(value, str) else value
            setattr(cfg, head, d)
            return
        raise ConfigError(f"unknown config key {full!r}: {prefix + head} has no sub-keys")
    setattr(cfg, head, _coerce(full, tp, value))


def _apply(cfg: TrainConfig, table: Mapping[str, Any], mark: Mark | None = None) -> None:
    for k, v in table.items():
        if not k.startswith("_"):
            _set(cfg, k, v, mark=mark)


def _split(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r} must look like KEY=VALUE (e.g. optim.lr=1e-5)")
    return key.strip(), value


def resolve_env_config(cfg: TrainConfig, ranks: Mapping[str, int] | None = None) -> Resolved:
    """Derive ``env.name`` (and an empty ``env.id``, and ``env.max_steps = 0``) from the family registry.

    ``ranks`` says which layer set ``env.name`` and ``env.id`` last (higher wins): an id names its family; a name
    alone (a family, or an id given as ``--env``) gives the family's default id, unless the id a lower layer set is
    one of that family's. Name and id set by the same layer must agree.
    """
    ranks = ranks or {}
    rn, ri = ranks.get("env.name", -1), ranks.get("env.id", -1)
    env = cfg.env
    if env.id and (ri >= rn or not env.name):
        try:
            res = resolve(env.id)
        except UnknownNameError as exc:
            raise ConfigError(f"config key 'env.id': {exc}") from None
        if ri == rn and env.name and env.name not in (res.family.name, env.id):
            raise ConfigError(f"config key 'env.name': {env.name!r} is not the family of env.id {env.id!r} "
                              f"({res.family.name!r}); drop env.name, it is derived from env.id")
    elif env.name:
        try:
            res = resolve(env.name)
        except UnknownNameError as exc:
            raise ConfigError(f"config key 'env.name': {exc}") from None
        if env.id and env.name == res.family.name and any(i.id == env.id for i in res.family.ids):
            res = Resolved(res.family, env.id)  # a lower layer's id of the same family stays
    else:
        raise ConfigError("config key 'env.id': no environment chosen; give --env NAME or --set env.id=ID")
    env.name, env.id = res.family.name, res.env_id
    if env.max_steps == 0:
        env.max_steps = res.family.max_steps(res.env_id)
    return res


def _saved_engine_share(table: dict[str, Any]) -> dict[str, Any]:
    """A run folder's ``config.toml`` written before ``rollout.engine_options`` (every run until then saved
    ``rollout.vllm_gpu_memory_utilization``, 0.4 unless set) still loads: the default is dropped, another value
    becomes ``rollout.engine_options.gpu_memory_utilization``, so such a run resumes and re-evaluates."""
    rollout = table.get("rollout")
    if not isinstance(rollout, dict) or "vllm_gpu_memory_utilization" not in rollout:
        return table
    rollout = dict(rollout)
    share = rollout.pop("vllm_gpu_memory_utilization")
    if share != 0.4:
        rollout["engine_options"] = {"gpu_memory_utilization": share, **dict(rollout.get("engine_options") or {})}
    return {**table, "rollout": rollout}


def _family_of_table(table: Mapping[str, Any]) -> EnvFamily | None:
    """The family a preset table names (None: none, or one not installed)."""
    env = table.get("env") or {}
    name = env.get("id") or env.get("name")
    try:
        return resolve(name).family if name else None
    except UnknownNameError:
        return None


def load_config(*, preset: str | None = None, config: str | Path | None = None, env: str | None = None,
                credit: str | None = None, model: str | None = None,
                overrides: Iterable[str] = ()) -> TrainConfig:
    """Resolve a config: preset (default ``cpu-demo``, or the file's ``preset``) -> the family's training table
    (when another family than the preset's is chosen on top of a preset that allows it) -> TOML file -> flags ->
    ``--set``; then ``env.name`` is derived from ``env.id``.

    :param env: a family name or one of its Gymnasium ids.
    :param overrides: ``KEY=VALUE`` strings with dotted keys (``optim.lr=1e-5``, ``credit.options.beta=0.9``).
    :raises ConfigError: one line naming the bad key.
    """
    file_table = _saved_engine_share(read_toml(config)) if config else {}
    name = preset or file_table.get("preset") or "cpu-demo"
    if name not in PRESETS:
        raise ConfigError(f"config key 'preset': unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    table = copy.deepcopy(PRESETS[name])
    sets = [_split(text) for text in overrides]

    def build(training: Mapping[str, Any] | None) -> tuple[TrainConfig, dict[str, int], dict[str, Any]]:
        cfg, ranks = TrainConfig(), dict[str, int]()

        def layer(rank: int) -> Mark:
            return lambda key: ranks.__setitem__(key, rank)

        _apply(cfg, table, layer(0))
        cfg.preset = name
        if training:
            _apply(cfg, copy.deepcopy(dict(training)), layer(1))
        _apply(cfg, {k: v for k, v in file_table.items() if k != "preset"}, layer(2))
        for key, value in (("env.name", env), ("credit.name", credit), ("model.name", model)):
            if value:
                _set(cfg, key, value, mark=layer(3))
        user_options = dict(cfg.credit.options)
        for key, value in sets:
            _set(cfg, key, value, mark=layer(4))
            if key.startswith("credit.options"):
                user_options = dict(cfg.credit.options)
        return cfg, ranks, user_options

    cfg, ranks, user_options = build(None)
    res = resolve_env_config(cfg, ranks)
    base = _family_of_table(table)
    other = base is None or base.name != res.family.name
    if table.get("_family_training") and other and (res.family.training or base is not None):
        if base is not None:  # the preset family's env kwargs (Sokoban's view, move range) do not carry over
            table["env"] = {k: v for k, v in table.get("env", {}).items() if k not in ("kwargs", "max_steps")}
        # constrained answers do, where the family's answers are a finite list (under its table and the user's)
        table["rollout"] = {**table.get("rollout", {}), "constrain": cpu_demo_constrains(res.family, res.env_id)}
        cfg, ranks, user_options = build(res.family.training)
        resolve_env_config(cfg, ranks)
    # the preset's options for the chosen method, under whatever the user gave
    cfg.credit.options = {**preset_method_options(table, cfg.credit.name), **user_options}
    validate(cfg)
    check_credit(cfg)  # the method's options (and the gate's) now, not at the first RL update
    return cfg


def check_credit(cfg: TrainConfig) -> Any:
    """The credit method of ``cfg`` from the plugin host, with its options checked against their types and the
    bounds the plugin declared, and ``rollout.gate``'s likewise (ConfigError names the key)."""
    from ..errors import OptionError, UnknownNameError
    from ..host import get_host

    host = get_host()
    try:
        method = host.credit_method(cfg.credit.name)
    except UnknownNameError as exc:
        raise ConfigError(f"config key 'credit.name': {exc}") from None
    try:
        opts = method.check_options(cfg.credit.options)
    except OptionError as exc:
        raise ConfigError(f"config key 'credit.options': {exc}") from None
    if cfg.rollout.gate:
        try:
            host.gate(cfg.rollout.gate).check_options(cfg.rollout.gate_options)
        except UnknownNameError as exc:
            raise ConfigError(f"config key 'rollout.gate': {exc}") from None
        except OptionError as exc:
            raise ConfigError(f"config key 'rollout.gate_options': {exc}") from None
    return method, opts


def resolved_options(method: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options ``method`` runs with, for display (the run's banner): its declared defaults (the keyword-only
    parameters of its function) with ``options`` laid over them. The method itself is still given ``options``
    only, and fills in its own defaults."""
    return {**method.options, **options}


def family_of(cfg: Any) -> EnvFamily:
    """The family of a resolved config's ``env.id`` (or, before it is resolved, of ``env.name``)."""
    return resolve(cfg.env.id or cfg.env.name).family


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
