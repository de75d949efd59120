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

__all__ = ["config_hash", "flatten", "read_toml", "to_dict", "to_toml"]


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict (JSON/TOML-able)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def config_hash(cfg: Any) -> str:
    """12 hex digits identifying the resolved config (without output-only keys)."""
    d = to_dict(cfg)
    for k in ("out_dir", "progress", "tensorboard", "wandb", "wandb_mode", "wandb_project", "exp_name"):
        d.pop(k, None)
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
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r}: not valid TOML ({exc})") from None


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{dotted key: value}`` of a nested config dict (``options``/``kwargs``/``env_kwargs`` tables stay whole)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("options", "kwargs", "env_kwargs"):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out
