"""Run metrics: JSON Lines (always), TensorBoard (when installed), wandb (optional, offline works)."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, cast

from ..io import atomic_open

__all__ = ["MetricsLogger", "read_metrics"]


class MetricsLogger:
    """Append one JSON object per logged step to ``metrics.jsonl``; mirror scalars to TensorBoard and wandb.

    :param run_dir: the run folder.
    :param config: the resolved config dict (wandb gets it, plus ``env_id``, ``exp_name`` and ``seed`` at top
        level: the keys openrlbenchmark filters on).
    """

    def __init__(self, run_dir: str | Path, *, config: dict[str, Any] | None = None, tensorboard: bool = True,
                 wandb: bool = False, wandb_mode: str = "offline", wandb_project: str = "agentbench-crbc",
                 run_name: str = "", enabled: bool = True) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.enabled = enabled
        self._tb: Any = None
        self._wandb: Any = None
        self._t0 = time.time()  # a resume moves it back by the time already logged (note_resume)
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # pragma: no cover - tensorboard is in the [train] extra
                pass
            else:
                self._tb = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))
        if wandb:
            try:
                import wandb as _wandb
            except ImportError:
                from ..errors import ConfigError

                raise ConfigError("config key 'wandb': wandb is not installed; pip install "
                                  "'agentbench-crbc[wandb]', or set wandb=false") from None
            cfg = dict(config or {})
            env = cfg.get("env", {})
            cfg.update({"env_id": env.get("id") or env.get("name"), "exp_name": cfg.get("exp_name") or run_name,
                        "seed": cfg.get("seed", 0)})
            os.environ.setdefault("WANDB_MODE", wandb_mode)
            self._wandb = _wandb.init(project=wandb_project, name=run_name, config=cfg, mode=cast(Any, wandb_mode),
                                      dir=str(run_dir), sync_tensorboard=False)

    def log(self, step: int, values: dict[str, Any], *, stage: str = "rl") -> None:
        """Record ``values`` at ``step`` (non-finite numbers become null in JSON)."""
        if not self.enabled:
            return
        row = {"stage": stage, "step": step, "time": round(time.time() - self._t0, 3)}
        for k, v in values.items():
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            row[k] = v
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        scalars = {f"{stage}/{k}": float(v) for k, v in values.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        if self._tb is not None:
            for k, v in scalars.items():
                self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log({**scalars, "global_step": step})

    def rewind(self, size: int | None, *, sft_step: int, update: int) -> int:
        """Cut ``metrics.jsonl`` back to what a checkpoint had seen, so a resumed run does not log the updates it
        redoes twice; return the number of rows dropped.

        :param size: the file's size when the checkpoint was saved (its manifest's ``metrics_bytes``). Checkpoints
            without it keep the rows up to their step: ``sft`` rows up to ``sft_step``, ``rl`` and ``eval`` rows
            up to ``update``. A torn last line (a kill mid-write) goes either way.
        """
        if not self.enabled or not self.path.exists():
            return 0
        self._fh.flush()
        data = self.path.read_bytes()
        if size is not None and size <= len(data):
            kept = data[:size]
        else:
            limit = {"sft": sft_step, "rl": update, "eval": update, "resume": update}
            lines = []
            for line in data.splitlines(keepends=True):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # torn line
                if row.get("step", 0) <= limit.get(row.get("stage"), math.inf):
                    lines.append(line if line.endswith(b"\n") else line + b"\n")
            kept = b"".join(lines)
        if kept != data:
            self._fh.close()
            with atomic_open(self.path, "wb") as fh:
                fh.write(kept)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        return len(data.splitlines()) - len(kept.splitlines())

    def note_resume(self, step: int, *, checkpoint: str) -> None:
        """A resume: the ``time`` field goes on from the last logged row (monotonic across resumes), and a row
        ``{"stage": "resume", "step": step, "checkpoint": ...}`` says where the run continued from."""
        if not self.enabled:
            return
        last = 0.0
        for row in read_metrics(self.path.parent):
            t = row.get("time")
            if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
                last = max(last, float(t))
        self._t0 = time.time() - last
        self._fh.write(json.dumps({"stage": "resume", "step": step, "time": round(last, 3),
                                   "checkpoint": checkpoint}) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Flush and close every sink."""
        if not self.enabled:
            return
        self._fh.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of a run's ``metrics.jsonl`` (``[]`` when it has none): the one reader of the file (the run's
    summary and resume, ``curves.png``, ``abc bench``). Lines split on ``"\n"`` only (:func:`~agentbench_crbc.io.
    text_lines`); a torn line (a kill mid-write) and blank lines are skipped.

    :raises ConfigError: the file exists but cannot be read as UTF-8 text (one line naming it).
    """
    from ..errors import ConfigError
    from ..io import read_text, text_lines

    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in text_lines(read_text(path, error=ConfigError)):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line (a kill mid-write)
        if isinstance(row, dict):
            rows.append(row)
    return rows
