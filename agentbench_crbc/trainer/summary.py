"""The end of a run: held-out success untrained -> before RL -> after RL per mode, with the paired gain of RL,
saved as ``results.json`` and printed; the learning-curve figure comes from ``metrics``; and the run's first lines
(which environment it trains, and why)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..family import find_family
from ..host import get_host
from ..io import atomic_write_text, read_json
from .config import TrainConfig
from .eval import paired_gain
from .metrics import write_curves
from .presets import PRESETS

__all__ = ["answers_line", "episodes_of", "headline", "precision", "summarize", "summary_lines"]


def episodes_of(run_dir: Path, state: dict[str, Any], tag: str) -> dict[str, list[dict[str, Any]]]:
    """Per-episode outcomes of validation ``tag`` by mode, from its ``eval/update-NNNN.json``."""
    ev = state["evals"].get(tag)
    path = run_dir / "eval" / f"update-{ev['update']:04d}.json" if ev else None
    if path is None or not path.exists():
        return {}
    data = read_json(path, error=ConfigError)
    return {k: v["episodes"] for k, v in data.items() if isinstance(v, dict) and "episodes" in v}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def precision(cfg: TrainConfig, autocast: Any) -> str:
    """Which precision the forwards and backwards ran in, and why (master weights are fp32 either way)."""
    ran = "bf16 autocast" if autocast is not None else "fp32"
    why = {"auto": "model.dtype=auto: " + ("the device computes bf16 natively" if autocast is not None else
                                           "the device lacks native bf16"),
           "bf16": "model.dtype=bf16", "fp32": "model.dtype=fp32"}.get(cfg.model.dtype, cfg.model.dtype)
    return f"{ran} ({why})"


def summarize(cfg: TrainConfig, state: dict[str, Any], run_dir: Path, after: dict[str, Any], seconds: float, *,
              main: bool, say: Callable[[str], None], precision_used: str = "") -> dict[str, Any]:
    """The run's summary (rank 0 also writes ``results.json`` and the learning curves, and prints it); it names the
    precision that ran (``precision_used``, see :func:`precision`)."""
    before = state["evals"].get("before", {})
    untrained = state["evals"].get("untrained", {})
    out: dict[str, Any] = {"run_dir": str(run_dir), "method": cfg.credit.name, "updates": state["update"],
                           "sft_steps": state["sft_step"], "seconds_this_session": round(seconds, 1),
                           "precision": precision_used or None, "modes": {}}
    before_eps = episodes_of(run_dir, state, "before")
    for mode, res in after.items():
        b = before.get(mode, {}).get("success")
        out["modes"][mode] = {"untrained": untrained.get(mode, {}).get("success"), "before": b,
                              "after": res["success"], "n_episodes": res["n_episodes"],
                              "stderr_after": res.get("stderr")}
        if before_eps.get(mode) and res.get("episodes") and state["update"] > 0:
            out["modes"][mode]["gain"] = paired_gain(before_eps[mode], res["episodes"], seed=cfg.seed)
    ref = before.get("reference")
    if ref:
        out["reference"] = ref
    if not main:
        return out
    fig = write_curves(run_dir)
    out["curves"] = str(fig) if fig else None
    atomic_write_text(run_dir / "results.json", json.dumps(out, indent=1))
    for line in summary_lines(cfg, out, precision_used):
        say(line)
    figure = f", {fig.name} (learning curves)" if fig else \
        " (the learning-curve figure needs matplotlib, which the train extra brings: pip install matplotlib)"
    say(f"saved: {run_dir}/results.json, eval/records.jsonl{figure}")
    if cfg.tensorboard and (run_dir / "tensorboard").is_dir():
        say(f"curves: tensorboard --logdir {run_dir / 'tensorboard'}")
    return out


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def summary_lines(cfg: TrainConfig, out: dict[str, Any], precision_used: str = "") -> list[str]:
    """The printed summary of ``out`` (what :func:`summarize` returns): held-out success per validation mode,
    before -> after RL with the paired gain in percentage points and its 95% interval, and the reference
    policies on the same tasks."""
    from .config import family_of

    word = family_of(cfg).task_word
    ev = cfg.eval
    warm = bool(out.get("sft_steps"))
    stages = "untrained -> after the warm start (= before RL) -> after RL" if warm else "before RL -> after RL"
    lines = [f"\nheld-out success on {ev.episodes} {word}s never trained on ({ev.samples} episode"
             f"{'s' if ev.samples != 1 else ''} each when sampling, one greedy): {stages} with "
             f"{cfg.credit.name}{f'; computed in {precision_used}' if precision_used else ''}"]
    for mode, r in out["modes"].items():
        g = r.get("gain")
        gain = "" if not g or g["mean"] is None else \
            (f"  gain of RL {_pts(g['mean'])} points (95% interval {_pts(g['ci95'][0])} .. {_pts(g['ci95'][1])}, "
             f"paired over {g['n_levels']} {word}s)")
        path = f"{_pct(r['untrained'])} -> " if warm else ""
        err = f" (standard error {r['stderr_after']:.1%})" if r.get("stderr_after") is not None else ""
        label = "greedy" if mode == "greedy" else f"T = {mode[1:]}"
        lines.append(f"  {label:>9}: {path}{_pct(r['before'])} -> {_pct(r['after'])}{err}{gain}")
    ref = out.get("reference") or {}
    if ref:
        names = {"random": "uniform random policy", "expert": "the expert (greedy demonstrator)"}
        lines.append("  reference on the same " + f"{word}s: " + ", ".join(
            f"{names.get(k, k)} {v['success']:.1%}" for k, v in ref.items()))
    return lines


#: At most this many other families are named in the hint; `abc plugins` lists the rest.
_OTHERS = 3


def headline(cfg: TrainConfig) -> str:
    """``training abc/SokobanText-v0 (Sokoban: the cpu-demo preset's family; --env alfworld for ALFWorld, ...)``:
    the env id, the family, whether it is the preset's own or was chosen (``--env``, ``env.id``, a config file), and
    how to train another family."""
    found = find_family(cfg.env.name)
    label = found.family.label if found is not None else cfg.env.name
    own = PRESETS[cfg.preset]["env"].get("name") if cfg.preset in PRESETS else None
    if own == cfg.env.name:
        others = [f for f in get_host().families if f.name != cfg.env.name]
        hint = ", ".join(f"--env {f.name} for {f.label}" for f in others[:_OTHERS])
        if len(others) > _OTHERS:
            hint += f" (`abc plugins` lists {len(others) - _OTHERS} more)"
        why = f"the {cfg.preset} preset's family" + (f"; {hint}" if hint else "")
    else:
        own_found = find_family(own) if own else None
        why = f"chosen over the {cfg.preset} preset's {own_found.family.label if own_found else own}"
    return f"training {cfg.env.id} ({label}: {why})"


def answers_line(cfg: TrainConfig) -> str:
    """The run's answer mode, so that neither is chosen silently: constrained to the env's admissible actions
    (``rollout.constrain``) or free text, and how to switch."""
    if cfg.rollout.constrain:
        return ("answers: constrained to the admissible actions (rollout.constrain=true; "
                "--set rollout.constrain=false for free text)")
    return ("answers: free text, an invalid one penalised (rollout.constrain=false; --set rollout.constrain=true "
            "restricts them to the admissible actions where the env lists them)")
