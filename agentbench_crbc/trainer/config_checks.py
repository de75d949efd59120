"""Validation of a resolved training config: field bounds and choices from the schema's metadata, then the
checks that look outside the config (output folder, model name, env id and kwargs, rollout engine)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..family import ensure_gym_ids
from ..rollout.episodes.runner import MAX_ENV_COPIES
from .config_io import flatten, to_dict
from .presets import PRESETS
from .schema import TrainConfig, leaf_fields

__all__ = ["check_env_kwargs", "validate"]

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
            raise ConfigError(f"config key {key!r}: must be {_bound_text(bound)}, got {value!r}")
    if cfg.rollout.groups * cfg.rollout.group_size > MAX_ENV_COPIES:
        raise ConfigError(f"config keys 'rollout.groups' x 'rollout.group_size': {cfg.rollout.groups} x "
                          f"{cfg.rollout.group_size} = {cfg.rollout.groups * cfg.rollout.group_size} env copies per "
                          f"update; at most {MAX_ENV_COPIES} (lower one of them)")
    for key, value in flat.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and "\0" in t for t in texts):
            raise ConfigError(f"config key {key!r}: {value!r} holds a NUL character; remove it")
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
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        known = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
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
