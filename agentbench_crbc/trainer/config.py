"""``load_config``: a preset, a TOML file, flags and ``--set KEY=VALUE`` overrides resolved into a TrainConfig,
as plain data (dict, TOML, the resume hash) and validated (field bounds and choices, then the checks beyond them).

The schema (dataclasses with help, bounds and choices as field metadata) and the presets are :mod:`.schema`; their
public names are re-exported here. ``env.name`` is derived from ``env.id`` through the family registry, never set
apart; ``family_of`` is the family a resolved config means.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import json
import math
import os
import tomllib
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UnknownNameError
from ..family import EnvFamily, Resolved, ensure_gym_ids
from ..family import resolve_env as resolve
from ..io import json_text, read_text
from ..rollout.episodes.runner import MAX_ENV_COPIES
from .schema import (
    ENV_PLACEMENT_KEYS,
    MAX_CONFIG_INT,
    PRESETS,
    CreditConfig,
    EnvConfig,
    EvalConfig,
    ModelConfig,
    OptimConfig,
    RolloutConfig,
    SFTConfig,
    TrainConfig,
    field_docs,
    leaf_fields,
    preset_credit_options,
)

__all__ = [
    "PRESETS", "RENAMED", "CreditConfig", "EnvConfig", "EvalConfig", "ModelConfig", "OptimConfig", "RolloutConfig",
    "SFTConfig", "TrainConfig", "check_credit", "check_env_kwargs", "check_template", "config_hash",
    "cpu_demo_constrains", "family_of", "field_docs", "flatten", "groups_per_rank", "load_config", "read_toml",
    "resolve_env_config", "resolved_options", "to_dict", "to_toml", "validate"
]


Mark = Callable[[str], None]


#: config keys that were renamed (old -> new): an old one is an error that names the new one
RENAMED = {"rollout.vllm_gpu_memory_utilization": "rollout.engine_options.gpu_memory_utilization"}


def _coerce(key: str, tp: Any, value: Any, *, from_text: bool = True) -> Any:
    """``value`` (from TOML or a ``--set`` string) as type ``tp``; ConfigError names ``key``. A string stands for
    a number or a boolean only on the command line (``from_text``): in a TOML file ``seed = "0"`` is refused."""
    origin = typing.get_origin(tp)
    text = isinstance(value, str)
    if text and not from_text and tp in (bool, int, float):
        raise ConfigError(f"config key {key!r}: {value[:40]!r} is a string, not {_kind(tp)}; write it without "
                          "quotes")
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
            if text:  # a JSON list or string (`"x"` is the one string x), else comma-separated items
                value = (json.loads(value) if value.strip().startswith(("[", '"'))
                         else [v.strip() for v in value.split(",")])
                value = [value] if isinstance(value, str) else value
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


def _set(cfg: Any, key: str, value: Any, *, prefix: str = "", mark: Mark | None = None,
         from_text: bool = False) -> None:
    """Set dotted ``key`` on ``cfg``; unknown keys raise ConfigError listing the valid ones. ``mark`` is told every
    leaf key set (the layer bookkeeping of :func:`load_config`); ``from_text``: ``value`` is command-line text."""
    import dataclasses

    head, _, rest = key.partition(".")
    names = {f.name: f for f in dataclasses.fields(cfg)}
    full = prefix + key
    if head not in names or head.startswith("_"):
        if full in RENAMED:
            raise ConfigError(f"config key {full!r} is now {RENAMED[full]!r}: rename it in the config file or --set "
                              f"(a run folder's config.toml from before the change too)")
        valid = ", ".join(prefix + n for n in names)
        raise ConfigError(f"unknown config key {full!r}; valid keys here: {valid}")
    hints = typing.get_type_hints(type(cfg))
    tp = hints[head]
    if dataclasses.is_dataclass(tp):
        if not rest:
            if not isinstance(value, Mapping):
                raise ConfigError(f"config key {full!r} is a table; set its fields, e.g. {full}.<field>=...")
            for k, v in value.items():
                _set(getattr(cfg, head), str(k), v, prefix=f"{prefix}{head}.", mark=mark, from_text=from_text)
            return
        _set(getattr(cfg, head), rest, value, prefix=f"{prefix}{head}.", mark=mark, from_text=from_text)
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
    setattr(cfg, head, _coerce(full, tp, value, from_text=from_text))


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
    file_table = read_toml(config) if config else {}
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
                _set(cfg, key, value, mark=layer(3), from_text=True)
        user_options = dict(cfg.credit.options)
        for key, value in sets:
            _set(cfg, key, value, mark=layer(4), from_text=True)
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
    cfg.credit.options = {**preset_credit_options(table, cfg.credit.name), **user_options}
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


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict (JSON/TOML-able)."""
    return json.loads(json_text(dataclasses.asdict(cfg)))


def config_hash(cfg: Any) -> str:
    """12 hex digits identifying the resolved config (without output-only keys)."""
    d = to_dict(cfg)
    for k in ("out_dir", "progress", "tensorboard", "wandb", "wandb_mode", "wandb_project", "exp_name"):
        d.pop(k, None)
    for key in ENV_PLACEMENT_KEYS:
        section, _, leaf = key.partition(".")
        d.get(section, {}).pop(leaf, None)
    if not d.get("deterministic"):  # off (the default): the hash of a run saved before the key existed
        d.pop("deterministic", None)
    return hashlib.sha256(json_text(d, sort_keys=True).encode()).hexdigest()[:12]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json_text(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json_text(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        return '"none"'
    raise TypeError(type(v))


def to_toml(cfg: Any) -> str:
    """The resolved config as TOML (``load_config(config=...)`` reads it back)."""
    d = to_dict(cfg)
    lines = [f"{k} = {_toml_value(v)}" for k, v in d.items() if not isinstance(v, dict)]
    for k, v in d.items():
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items() if kk != "options"]
            if "options" in v:
                lines.append(f"\n[{k}.options]")
                lines += [f"{json_text(kk)} = {_toml_value(vv)}" for kk, vv in v["options"].items()]
    return "\n".join(lines) + "\n"


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file as a table; ConfigError names the file when it is missing or malformed."""
    where = f"config file {str(path)!r}"
    text = read_text(path, error=ConfigError, where=where, max_bytes=_MAX_BYTES)
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to be a training config") from None
    if _depth(table) > _MAX_DEPTH:
        raise ConfigError(f"{where}: values nested over {_MAX_DEPTH} levels deep; a training config nests 3")
    return table


#: A config file's limits: size and nesting (tables and arrays) far past any real config.
_MAX_BYTES = 4 * 2**20
_MAX_DEPTH = 16


def _depth(value: Any, level: int = 0) -> int:
    """How deep tables and arrays nest in ``value`` (stops counting past the limit)."""
    if level > _MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{dotted key: value}`` of a nested config dict (``options``/``kwargs``/``env_kwargs`` tables stay whole)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("options", "kwargs", "env_kwargs"):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _bound_text(bound: Any) -> str:
    """``> 0``, ``>= 0``, ``in (0, 1]`` or ``an integer in [0, 2**32 - 1]``: how the error states a bound."""
    import math

    if bound.integer:
        bits = int(bound.hi + 1).bit_length() - 1
        hi = f"2**{bits} - 1" if bound.hi > 2**16 and bound.hi + 1 == 2**bits else f"{bound.hi:.0f}"
        return f"an integer in [{bound.lo:g}, {hi}]"
    if math.isinf(bound.hi):
        return f"{'>' if bound.lo_open else '>='} {bound.lo:g}"
    return f"in {'(' if bound.lo_open else '['}{bound.lo:g}, {bound.hi:g}{')' if bound.hi_open else ']'}"


def groups_per_rank(cfg: TrainConfig, world_size: int) -> int:
    """The groups each of ``world_size`` ranks rolls out per update: ``rollout.groups`` is the total over all ranks
    (a preset means the paper's total on any number of GPUs), split evenly.

    :raises ConfigError: a total that ``world_size`` does not divide (one line naming the totals that split).
    """
    total, world = cfg.rollout.groups, max(int(world_size), 1)
    if total % world:
        fits = sorted({world * max(total // world, 1), world * (total // world + 1)})
        raise ConfigError(f"config key 'rollout.groups': {total} groups per update do not split over {world} ranks "
                          f"(it is the total over all ranks); set rollout.groups to a multiple of {world} "
                          f"({' or '.join(map(str, fits))}) or run on a number of GPUs that divides {total}")
    return total // world


def validate(cfg: TrainConfig) -> None:
    """Every field's ``choices`` and ``bounds`` (ConfigError names the key), then the checks beyond the config."""
    if cfg.preset not in PRESETS:
        raise ConfigError(f"config key 'preset': unknown preset {cfg.preset!r}; presets: {', '.join(PRESETS)}")
    flat = flatten(to_dict(cfg))
    for key, f in leaf_fields().items():
        choices, bound = f.metadata.get("choices"), f.metadata.get("bounds")
        if choices is None and bound is None:
            continue
        value = flat[key]
        if choices and value not in choices:
            raise ConfigError(f"config key {key!r}: {value!r} is not one of {', '.join(choices)}")
        if bound is not None and (isinstance(value, bool) or not bound.allows(value)):
            raise ConfigError(f"config key {key!r}: must be {_bound_text(bound)}, got {_shown(value)}")
    for key, f in leaf_fields().items():  # an integer key without an upper bound still has one
        value, bound = flat.get(key), f.metadata.get("bounds")
        if bound is not None and math.isfinite(bound.hi):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CONFIG_INT:
            raise ConfigError(f"config key {key!r}: {_shown(value)} is over {MAX_CONFIG_INT:.0e} in size; no run "
                              "gets that far")
    if cfg.model.tiny_hidden % 8:
        raise ConfigError(f"config key 'model.tiny_hidden': must be a multiple of 8 (4 attention heads of even "
                          f"width), got {cfg.model.tiny_hidden}")
    check_template(cfg.env.template, "config key 'env.template'")
    if cfg.rollout.groups * cfg.rollout.group_size > MAX_ENV_COPIES:
        raise ConfigError(f"config keys 'rollout.groups' x 'rollout.group_size': {cfg.rollout.groups} x "
                          f"{cfg.rollout.group_size} = {cfg.rollout.groups * cfg.rollout.group_size} env copies per "
                          f"update; at most {MAX_ENV_COPIES} (lower one of them)")
    for key, value in flat.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and "\0" in t for t in texts):
            raise ConfigError(f"config key {key!r}: {value!r} holds a NUL character; remove it")
    if cfg.optim.rollout_old_logprobs and (cfg.rollout.temperature != 1 or cfg.rollout.top_p != 1):
        raise ConfigError(f"config key 'optim.rollout_old_logprobs': the rollout's log-probs are the old policy's "
                          f"only when it samples at temperature 1 and top-p 1 (got rollout.temperature = "
                          f"{_shown(cfg.rollout.temperature)}, rollout.top_p = {_shown(cfg.rollout.top_p)}); set "
                          "optim.rollout_old_logprobs=false")
    _check_remote_urls(cfg.rollout.remote_urls)
    _check_out_dir(cfg.out_dir)
    _check_model_name(cfg.model.name)
    _check_engine(cfg.rollout.engine, cfg.rollout.engine_options)
    check_env_kwargs(cfg.env.id, cfg.env.kwargs)


def _check_engine(name: str, options: dict[str, Any]) -> None:
    """``rollout.engine`` must be a registered rollout engine, and ``rollout.engine_options`` keys it reads."""
    from ..host import get_host
    from ..rollout.engines.factory import check_engine_options

    names = get_host().engines.names()
    if name not in names:
        raise ConfigError(f"config key 'rollout.engine': {name!r} is not one of {', '.join(names)} "
                          "(`abc plugins` lists the engines)")
    check_engine_options(name, options, where="config key 'rollout.engine_options'")


def _shown(value: Any) -> str:
    """``repr(value)``, cut to 40 characters (a 20-digit integer stays whole)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_template(template: str, where: str) -> None:
    """``paper``, ``compact`` or an existing folder holding ``.txt`` templates (a folder without any, ``/etc``,
    would silently fall back to the package's prompts)."""
    if template in ("paper", "compact"):
        return
    folder = Path(template).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"{where}: {template!r} is neither paper, compact nor an existing folder of .txt "
                          "templates")
    try:
        found = any(p.suffix == ".txt" and p.is_file() for p in folder.iterdir())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the folder {template!r} ({exc.strerror or exc})") from None
    if not found:
        raise ConfigError(f"{where}: the folder {template!r} holds no .txt templates; give a folder of "
                          "{family}.txt and {family}_first.txt templates, or paper or compact")


def _check_remote_urls(urls: list[str]) -> None:
    """Each of ``rollout.remote_urls`` must be a server address the remote pool can connect to."""
    from ..rollout.hosting.remote import ws_url

    for url in urls:
        try:
            ws_url(url)
        except ConfigError as exc:
            raise ConfigError(f"config key 'rollout.remote_urls': {exc}") from None


def _check_out_dir(out_dir: str) -> None:
    """``out_dir`` (created later) must lie under a writable folder."""
    path = Path(out_dir).expanduser().absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"config key 'out_dir': {existing} is a file, not a folder; choose another out_dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"config key 'out_dir': {existing} is not writable; choose another out_dir")


def _check_model_name(name: str) -> None:
    """``tiny``/``smollm2``, an existing local folder, or a Hugging Face id (in the cache when offline)."""
    if not name.strip():
        raise ConfigError("config key 'model.name': empty; give tiny, smollm2, a Hugging Face id or a local folder")
    if name in ("tiny", "tiny-vl", "smollm2"):
        return
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not any((folder / f).is_file() for f in ("config.json", "adapter_config.json")):
            raise ConfigError(f"config key 'model.name': the folder {name!r} holds no model (no config.json); "
                              "give a folder saved by save_pretrained, e.g. RUN_DIR/model")
        return
    if name.startswith((".", "/", "~")) or name.endswith("/") or name.count("/") > 1 or "\\" in name:
        raise ConfigError(f"config key 'model.name': the local folder {name!r} does not exist")
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:  # no transformers here: `abc train` says what to install
        return
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ConfigError(f"config key 'model.name': {name!r} is neither tiny, smollm2, a local folder nor a "
                          "Hugging Face id (org/name)") from None
    offline = any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
                  for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if offline:
        cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub")
        if not isinstance(try_to_load_from_cache(name, "config.json", cache_dir=cache), str):
            raise ConfigError(f"config key 'model.name': {name!r} is not in the Hugging Face cache ({cache}) and "
                              "HF_HUB_OFFLINE is set; download it where there is network "
                              f"(`hf download {name}`), or use tiny, smollm2 or a local folder")


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], where: str = "config key 'env.kwargs'") -> None:
    """``env.id`` must be registered, and ``env.kwargs`` must build it (tried only when there are kwargs); errors
    start with ``where`` (``abc rollout`` says ``--set``)."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from ..errors import AbcError

    ensure_gym_ids()
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:  # pragma: no cover - a family's ids are registered above
        raise ConfigError(f"config key 'env.id': Gymnasium has no id {env_id!r} (`abc envs` lists them)") from None
    if not kwargs:
        return
    try:
        creator: Any = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        params = inspect.signature(creator).parameters
    except (ImportError, TypeError, ValueError, AttributeError):
        return  # a missing optional engine is reported when the run builds the env
    record = getattr(creator, "options_type", None)  # an env whose keywords are the fields of an options record
    known: list[str] | None = None
    if isinstance(record, type) and dataclasses.is_dataclass(record):
        known = [f.name for f in dataclasses.fields(record)] + \
            [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    elif not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        known = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    if known is not None:
        for key in kwargs:
            if key not in known and key != "max_episode_steps":
                raise ConfigError(f"{where}: {env_id} has no option {key!r}; its options: "
                                  f"{', '.join(known)}")
    try:
        gym.make(env_id, disable_env_checker=True, **kwargs).close()
    except ImportError:
        return
    except AbcError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except Exception as exc:  # whatever the env's constructor raises on a bad value
        text = str(exc).strip().splitlines()
        raise ConfigError(f"{where}: {env_id} cannot be built with {dict(kwargs)}: "
                          f"{type(exc).__name__}: {text[0] if text else ''}") from None
