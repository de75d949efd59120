"""Run metrics: JSON Lines (always), TensorBoard (when installed), wandb (optional, offline works); each update's
metrics row, the collapse warnings read from it, and the learning-curve figure drawn from ``metrics.jsonl``."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..errors import AbcError
from ..io import atomic_open, json_text, read_json

__all__ = ["CURVES_DPI", "HealthWatch", "MetricsLogger", "read_metrics", "rl_stats", "update_row", "write_curves"]


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
        self._fh.write(json_text(row) + "\n")
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
        self._fh.write(json_text({"stage": "resume", "step": step, "time": round(last, 3),
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


def update_row(groups: Sequence[Any], advantages: Any, counts: Mapping[str, float], **extra: float) -> dict[str, Any]:
    """Success, return, episode length, invalid-action share and advantage mean/std of one update's groups, with
    ``counts`` (from ``build_samples``) and ``extra`` (timings, the PPO update's logs) merged in."""
    a = np.asarray(advantages, dtype=np.float64)
    trajs = [t for g in groups for t in g.trajectories]
    steps = [s for t in trajs for s in t.steps]
    return {"success": float(np.mean([t.success for t in trajs])),
            "return": float(np.mean([t.reward for t in trajs])),
            "episode_len": float(np.mean([len(t.steps) for t in trajs])),
            "invalid": float(np.mean([not s.valid for s in steps])) if steps else 0.0,
            "adv_mean": float(a.mean()) if a.size else 0.0, "adv_std": float(a.std()) if a.size else 0.0,
            **counts, **extra}


@dataclass
class HealthWatch:
    """Watches each update's metrics row and says once, with the update number, when the policy collapses.

    - entropy: the mean entropy of the answers fell below ``entropy_ratio`` of the first update's (and under
      ``entropy_floor`` nats): the policy became (nearly) deterministic, so its groups stop varying and
      group-relative credit goes to zero;
    - invalid answers: at least ``invalid_max`` of the steps did not parse to an admissible action (where the
      first update had fewer): with a saturated softmax on invalid text the gradient vanishes and the run does not
      recover. Constrained decoding (``rollout.constrain``) makes this impossible.

    A warning is a line of text (``say``), not an error; each kind is said once per run.
    """

    say: Callable[[str], None]
    entropy_ratio: float = 0.1
    entropy_floor: float = 0.05
    invalid_max: float = 0.5
    _first: dict[str, float] = field(default_factory=dict)
    _said: set[str] = field(default_factory=set)

    def check(self, update: int, row: Mapping[str, float]) -> list[str]:
        """Look at update ``update``'s row; returns (and says) the warnings it raised."""
        out = []
        ent, inv = row.get("entropy"), row.get("invalid")
        for key, value in (("entropy", ent), ("invalid", inv)):
            if value is not None and math.isfinite(value):
                self._first.setdefault(key, float(value))
        e0 = self._first.get("entropy")
        if ent is not None and e0 is not None and math.isfinite(ent) and "entropy" not in self._said \
                and ent < self.entropy_floor and ent < self.entropy_ratio * e0:
            out.append(f"warning: update {update}: answer entropy fell to {ent:.3f} nats (update 1: {e0:.3f}); the "
                       "policy is collapsing onto one answer: lower optim.lr, set optim.target_kl, or add "
                       "optim.entropy_coef")
            self._said.add("entropy")
        i0 = self._first.get("invalid", 0.0)
        if inv is not None and math.isfinite(inv) and "invalid" not in self._said and inv >= self.invalid_max \
                and inv > i0:
            out.append(f"warning: update {update}: {inv:.0%} of the answers were invalid (update 1: {i0:.0%}); the "
                       "policy is collapsing into unparsable text: lower optim.lr, set optim.target_kl, or use "
                       "rollout.constrain=true where the engine and env allow it")
            self._said.add("invalid")
        for line in out:
            self.say(line)
        return out


#: (panel title, [(metrics key, label)]) of the RL rows; validations go on the success panel.
PANELS = [
    ("success", [("success", "training rollouts (T = 1.0)")]),
    ("KL", [("kl", "to the reference"), ("approx_kl_end", "per update (k3, old -> kept)")]),
    ("credit", [("adv_mean", "advantage mean"), ("adv_std", "advantage std")]),
]


#: Resolution of ``curves.png``: three panels of 3.8 x 2.9 inches at this many dots per inch (about 1,100 x 290
#: pixels, tens of kilobytes); ``savefig.bbox`` is pinned to ``standard`` so that a user's matplotlibrc cannot grow it.
CURVES_DPI = 96

#: How the reference policies of ``eval/reference.json`` are named on the success panel.
REFERENCE_LABELS = {"random": "uniform random policy", "expert": "solver / expert"}


def rl_stats(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """What the summary says about the RL updates of ``rows`` (``metrics.jsonl``), each only when measured (a
    finite value in some update's row): ``approx_kl_end_max`` (the largest KL an update moved the policy, k3 from
    its start to its end) and ``invalid_mean`` / ``invalid_max`` (the share of training answers that were not an
    admissible action, mean and largest over updates)."""
    rl = [r for r in rows if r.get("stage") == "rl"]

    def finite(key: str) -> list[float]:
        return [float(r[key]) for r in rl if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]

    out: dict[str, float] = {}
    if kl := finite("approx_kl_end"):
        out["approx_kl_end_max"] = max(kl)
    if inv := finite("invalid"):
        out["invalid_mean"], out["invalid_max"] = sum(inv) / len(inv), max(inv)
    return out


def _references(run_dir: Path) -> dict[str, float]:
    """Success of the reference policies the run measured (``eval/reference.json``), by name; ``{}`` without."""
    path = run_dir / "eval" / "reference.json"
    try:
        data = read_json(path) if path.is_file() else {}
    except AbcError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v["success"]) for k, v in data.items()
            if isinstance(v, dict) and isinstance(v.get("success"), (int, float)) and math.isfinite(v["success"])}


def write_curves(run_dir: str | Path, name: str = "curves.png") -> Path | None:
    """Draw ``run_dir/metrics.jsonl`` into ``run_dir/curves.png`` (with the reference policies' success as
    horizontal lines when the run measured them); None when matplotlib is missing (the ``[leaderboard]`` extra) or
    the run has no RL update yet. Written to a temp file, then renamed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir)
    rl = [r for r in rows if r.get("stage") == "rl"]
    if not rl:
        return None
    evals = [r for r in rows if r.get("stage") == "eval"]
    refs = _references(run_dir)
    with matplotlib.rc_context({"savefig.bbox": "standard", "figure.dpi": CURVES_DPI}):
        fig, axes = plt.subplots(1, len(PANELS), figsize=(3.8 * len(PANELS), 2.9), constrained_layout=True)
        steps = [r["step"] for r in rl]
        for ax, (title, keys) in zip(axes, PANELS, strict=True):
            for key, label in keys:
                if key in rl[0]:
                    ax.plot(steps, [r.get(key, float("nan")) for r in rl], label=label, lw=1)
            if title == "success":
                for key in sorted({k for r in evals for k in r if k.startswith("val_") and k.endswith("_success")}):
                    pts = [(r["step"], r[key]) for r in evals if key in r]
                    ax.plot(*zip(*pts, strict=True), "o-", label=f"held out, {key[4:-8]}", ms=4)
                for (ref, value), style in zip(refs.items(), (":", "--", "-."), strict=False):
                    ax.axhline(value, ls=style, color="grey", lw=1,
                               label=f"{REFERENCE_LABELS.get(ref, ref)} (held out)")
            ax.set_title(title)
            ax.set_xlabel("RL update")
            ax.legend(fontsize=7, loc="best")
        out, tmp = run_dir / name, run_dir / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=CURVES_DPI)
        plt.close(fig)
    tmp.replace(out)
    return out
