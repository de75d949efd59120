"""The run folder: its name ``{env}__{method}__{model}__{seed}__{ts}``, the saved config and the metrics logger."""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path

from ..io import atomic_write_text
from .config import TrainConfig, to_dict, to_toml
from .metrics import MetricsLogger

__all__ = ["make_run_dir", "open_metrics", "write_config"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.rstrip("/").split("/")[-1]).strip("-") or "model"


def make_run_dir(cfg: TrainConfig) -> Path:
    """``{out_dir}/{env}__{method}__{model}__{seed}__{timestamp}`` (created)."""
    ts = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(cfg.out_dir) / f"{cfg.env.name}__{cfg.credit.name}__{_slug(cfg.model.name)}__{cfg.seed}__{ts}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    path.mkdir(parents=True)
    return path


def write_config(run_dir: Path, cfg: TrainConfig) -> None:
    """``config.toml`` (what ``--resume`` and ``abc eval --run`` read) and ``config.json``."""
    atomic_write_text(run_dir / "config.toml", to_toml(cfg))
    atomic_write_text(run_dir / "config.json", json.dumps(to_dict(cfg), indent=1))


def open_metrics(cfg: TrainConfig, run_dir: Path, *, enabled: bool) -> MetricsLogger:
    """The run's metrics logger: ``metrics.jsonl``, and TensorBoard / W&B as the config asks."""
    return MetricsLogger(run_dir, config=to_dict(cfg), tensorboard=cfg.tensorboard, wandb=cfg.wandb,
                         wandb_mode=cfg.wandb_mode, wandb_project=cfg.wandb_project,
                         run_name=cfg.exp_name or run_dir.name, enabled=enabled)
