"""The training config as plain data: nested dict, TOML text (written and read) and the resume hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import read_text
from .schema import ENV_PLACEMENT_KEYS

__all__ = ["config_hash", "flatten", "read_toml", "to_dict", "to_toml"]


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict (JSON/TOML-able)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def config_hash(cfg: Any) -> str:
    """12 hex digits identifying the resolved config (without output-only keys)."""
    d = to_dict(cfg)
    for k in ("out_dir", "progress", "tensorboard", "wandb", "wandb_mode", "wandb_project", "exp_name"):
        d.pop(k, None)
    for key in ENV_PLACEMENT_KEYS:
        section, _, leaf = key.partition(".")
        d.get(section, {}).pop(leaf, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
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
                lines += [f"{json.dumps(kk)} = {_toml_value(vv)}" for kk, vv in v["options"].items()]
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
