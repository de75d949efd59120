"""The run folder: its name ``{env}__{method}__{model}__{seed}__{ts}``, its one-writer lock, the saved config and the
metrics logger."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import atomic_write_text
from .config import TrainConfig, to_dict, to_toml
from .metrics import MetricsLogger

__all__ = ["LOCK_NAME", "lock_run_folder", "make_run_dir", "open_metrics", "write_config"]

#: The lock file a run folder's one writer holds (``abc train``, ``--resume``, ``abc eval --run``).
LOCK_NAME = ".abc.lock"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.rstrip("/").split("/")[-1]).strip("-") or "model"


def make_run_dir(cfg: TrainConfig) -> Path:
    """``{out_dir}/{env}__{method}__{model}__{seed}__{timestamp}`` (created)."""
    ts = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{cfg.env.name}__{cfg.credit.name}__{_slug(cfg.model.name)}__{cfg.seed}__{ts}"
    if Path(name).name != name or os.sep in name or (os.altsep and os.altsep in name):  # never outside out_dir
        raise ConfigError(f"run folder name {name[:80]!r} is not one folder name; env.name and credit.name must be "
                          "identifiers (letters, digits and '_')")
    base = Path(cfg.out_dir) / name
    base.parent.mkdir(parents=True, exist_ok=True)
    path, k = base, 1
    while True:  # mkdir claims the name: runs started in the same second in parallel (abc bench) get -2, -3...
        try:
            path.mkdir()
            return path
        except FileExistsError:
            k += 1
            path = base.with_name(f"{base.name}-{k}")


def lock_run_folder(run_dir: str | Path, command: str = "abc train") -> Any:
    """Take the run folder's one-writer lock (a :class:`filelock.FileLock`, held until released or the process
    ends); a folder another process holds is refused with one line and nothing written."""
    from filelock import FileLock, Timeout

    lock = FileLock(Path(run_dir) / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(f"{run_dir}: another `abc` process is writing this run folder; wait for it to finish (or "
                          f"stop it) before `{command}` uses the folder") from None
    except OSError as exc:
        raise ConfigError(f"{run_dir}: cannot lock the run folder ({exc.strerror or exc}); give a folder you may "
                          "write") from None
    return lock


def write_config(run_dir: Path, cfg: TrainConfig) -> None:
    """``config.toml`` (what ``--resume`` and ``abc eval --run`` read) and ``config.json``."""
    atomic_write_text(run_dir / "config.toml", to_toml(cfg))
    atomic_write_text(run_dir / "config.json", json.dumps(to_dict(cfg), indent=1))


def open_metrics(cfg: TrainConfig, run_dir: Path, *, enabled: bool) -> MetricsLogger:
    """The run's metrics logger: ``metrics.jsonl``, and TensorBoard / W&B as the config asks."""
    return MetricsLogger(run_dir, config=to_dict(cfg), tensorboard=cfg.tensorboard, wandb=cfg.wandb,
                         wandb_mode=cfg.wandb_mode, wandb_project=cfg.wandb_project,
                         run_name=cfg.exp_name or run_dir.name, enabled=enabled)
