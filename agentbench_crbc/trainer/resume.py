"""Resuming a run folder: the newest intact checkpoint, and where the KL reference comes back from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .checkpoint import find_checkpoint, set_aside, verify_folder
from .config import TrainConfig
from .distributed import Dist, broadcast_object
from .metrics import MetricsLogger

__all__ = ["find_resume", "reference_source"]


def find_resume(run_dir: Path, dist: Dist, log: MetricsLogger) -> Path | None:
    """The newest intact checkpoint (rank 0 verifies, sets damaged ones aside, and tells the other ranks)."""
    found: list[str] = ["", ""]  # checkpoint path, error
    if dist.main:
        ckpt, damaged = find_checkpoint(run_dir)
        for bad, why in damaged:
            aside = set_aside(bad)
            then = f"resuming from {ckpt.name}" if ckpt is not None else "no intact checkpoint is left"
            print(f"resume: {bad.name} is damaged ({why}); set aside as {aside.name}, {then}", flush=True)
        if ckpt is None and damaged:
            found[1] = (f"--resume: no intact checkpoint in {run_dir / 'checkpoints'}; start a new run "
                        "(the damaged ones are kept as damaged-ckpt-*)")
        elif ckpt is None:
            print(f"resume: no checkpoint in {run_dir} yet; starting from the beginning", flush=True)
            log.rewind(0, sft_step=0, update=0)  # the rows of the lost start are logged again
        found[0] = str(ckpt or "")
    broadcast_object(dist, found)
    if found[1]:
        raise ConfigError(found[1])
    return Path(found[0]) if found[0] else None


def reference_source(cfg: TrainConfig, state: dict[str, Any], run_dir: Path,
                     say: Callable[[str], None]) -> Path | str | None:
    """On resume mid-RL: ``None`` when the saved KL reference is intact (or none is needed), else where to rebuild
    it from: ``"base"`` (the base model, when there was no warm start) or the RL stage's checkpoint 0.

    :raises ConfigError: the reference is damaged and the policy the RL stage started from is gone.
    """
    if state["stage"] != "rl" or state["update"] == 0 or cfg.optim.kl_coef <= 0 or cfg.model.lora:
        return None  # no reference yet (it is the policy now), none needed, or the base with adapters off
    saved = run_dir / "reference"
    try:
        verify_folder(saved)
        if not (saved / "state.pt").is_file():
            raise ConfigError("state.pt is missing")
        return None
    except ConfigError as exc:
        why = f"reference/{exc}" if saved.is_dir() else "reference/ is missing"
    if not state["sft_step"]:
        source: Path | str = "base"
        text = f"the base model {cfg.model.name!r} (no warm start)"
    else:
        ckpt0 = run_dir / "checkpoints" / "ckpt-000000"
        try:
            verify_folder(ckpt0)
            state0 = json.loads((ckpt0 / "state.json").read_text(encoding="utf-8"))
            if (state0.get("stage"), state0.get("update")) != ("rl", 0):
                raise ConfigError("it is not the start of the RL stage")
        except (ConfigError, OSError):
            raise ConfigError(
                f"--resume: {why}, and the policy the RL stage started from (checkpoints/ckpt-000000) is gone; "
                f"put that policy back as {run_dir / 'reference'}, or resume with --set optim.kl_coef=0 "
                "to go on without the KL term") from None
        source, text = ckpt0, "checkpoints/ckpt-000000 (the end of the warm start)"
    say(f"resume: {why}; the KL reference is rebuilt from {text}")
    return source
