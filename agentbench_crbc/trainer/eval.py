"""Validation on held-out tasks (temperature 0.4 as the paper, and greedy) written as leaderboard records, and the
end of a run: the paired gain of RL per mode in ``results.json`` and the printed summary."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..family import ensure_gym_ids, find_family, is_heldout
from ..host import get_host
from ..io import atomic_write_text, json_text, read_json, read_text, text_lines
from ..rollout.episodes.base import SamplingParams
from .config import TrainConfig, config_hash, family_of
from .metrics import write_curves
from .rollouts import Rollouts
from .schema import PRESETS
from .validations import BEFORE, UNTRAINED, Validation

if TYPE_CHECKING:
    from .resume import RunState

__all__ = [
    "answers_line", "builtin_params", "engine_params", "episodes_of", "eval_modes", "evaluate", "headline",
    "heldout_by_construction", "model_label", "model_params", "model_scale", "paired_gain", "precision",
    "reference_points", "summarize", "summary_lines", "training_seeds", "validate", "validation_kwargs",
    "validation_seeds", "write_eval"
]


#: (env id, kwargs, seed) -> whether the seed's task is held out (a pure function of its arguments, memoised)
_SPLIT_CACHE: dict[tuple[str, str, int], bool] = {}


def validation_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """The ``gymnasium.make`` kwargs of validation envs: ``env.kwargs`` with the family's ``heldout_kwargs`` laid
    over them (ALFWorld's ``valid_unseen`` split, WebShop's test goals; a ``None`` value drops the key)."""
    merged = {**cfg.env.kwargs, **family_of(cfg).heldout_kwargs}
    return {k: v for k, v in merged.items() if v is not None}


def heldout_by_construction(cfg: TrainConfig) -> bool:
    """Whether no validation task can be a training task: the family splits by task key (Sokoban levels up to
    symmetry), or validates on its held-out pool (``heldout_kwargs``) with ``env.kwargs`` leaving the keys that
    pick the pool to the family."""
    fam = family_of(cfg)
    if fam.task_key is not None:
        return True
    return bool(fam.heldout_kwargs) and not set(fam.heldout_kwargs) & set(cfg.env.kwargs)


def _heldout_of(cfg: TrainConfig, kwargs: dict[str, Any], seed: int, env_cache: dict[str, Any]) -> bool:
    """Whether ``seed``'s task (an env made with ``kwargs``) is in the held-out part (by the family's task key)."""
    env_id = cfg.env.id
    key = (env_id, json_text(kwargs, sort_keys=True), seed)
    if key not in _SPLIT_CACHE:
        import gymnasium as gym

        task_key = family_of(cfg).load("task_key")
        if key[:2] not in env_cache:
            ensure_gym_ids()
            env_cache[key[:2]] = gym.make(env_id, **kwargs)
        env = env_cache[key[:2]]
        env.reset(seed=seed)
        _SPLIT_CACHE[key] = is_heldout(task_key(env))
    return _SPLIT_CACHE[key]


def _has_task_keys(cfg: TrainConfig) -> bool:
    return family_of(cfg).task_key is not None


def validation_seeds(cfg: TrainConfig, n: int) -> list[int]:
    """``n`` validation seeds from ``env.val_seed_offset`` on, played in envs made with :func:`validation_kwargs`;
    where the env has task keys (Sokoban levels up to symmetry) only seeds whose task is in the held-out part, so
    no validation level was trained on (families with a held-out pool hold out by construction instead)."""
    start = cfg.env.val_seed_offset
    if not _has_task_keys(cfg):
        return list(range(start, start + n))
    out: list[int] = []
    cache: dict[Any, Any] = {}
    kwargs = validation_kwargs(cfg)
    s = start
    while len(out) < n:
        if _heldout_of(cfg, kwargs, s, cache):
            out.append(s)
        s += 1
    return out


def training_seeds(cfg: TrainConfig, rng: np.random.Generator, n: int) -> list[int]:
    """``n`` training task seeds below ``env.val_seed_offset``, skipping held-out tasks."""
    out: list[int] = []
    cache: dict[Any, Any] = {}
    while len(out) < n:
        s = int(rng.integers(0, cfg.env.val_seed_offset))
        if not _has_task_keys(cfg) or not _heldout_of(cfg, dict(cfg.env.kwargs), s, cache):
            out.append(s)
    return out


def evaluate(engine: Any, builder: Any, cfg: TrainConfig, seeds: list[int], *, temperature: float,
             seed: int = 0, batch: int = 64, samples: int = 1, progress: str | None = None,
             rollouts: Rollouts | None = None) -> dict[str, Any]:
    """``samples`` episodes per seed at ``temperature`` (0 = greedy: one): success, score (mean return), per
    subtask, and ``episodes``: each episode's seed, success, return, length, invalid steps and subtask (for paired
    comparisons of two models on the same levels, see :func:`paired_gain`).

    :param progress: a label for a progress bar over the seeds (its postfix shows the step), or ``None``.
    :param rollouts: the runners to use (a trainer passes its own); ``None``: fresh ones, closed at the end.
    """
    from tqdm.auto import tqdm

    if rollouts is None:
        with Rollouts(cfg) as own:
            return evaluate(engine, builder, cfg, seeds, temperature=temperature, seed=seed, batch=batch,
                            samples=samples, progress=progress, rollouts=own)
    k = 1 if temperature <= 0 else max(samples, 1)
    steps = cfg.env.max_steps
    per_call = max(batch // k, 1)
    trajs, episodes = [], []
    bar = tqdm(total=len(seeds), desc=progress, disable=progress is None, dynamic_ncols=True,
               unit=family_of(cfg).task_word)
    for i in range(0, len(seeds), per_call):
        sampling = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=cfg.rollout.max_response_tokens,
                                  seed=seed + i)
        groups = rollouts.collect(engine, builder, seeds[i:i + per_call], group_size=k, sampling=sampling,
                                  prefix="val", env_kwargs=validation_kwargs(cfg),
                                  on_step=lambda _r, t: bar.set_postfix(step=f"{t + 1}/{steps}"))
        bar.update(len(groups))
        for g in groups:
            for t in g.trajectories:
                trajs.append(t)
                episodes.append({"seed": int(g.seed), "success": bool(t.success), "reward": float(t.reward),
                                 "steps": len(t.steps), "invalid": sum(not s.valid for s in t.steps),
                                 "subtask": t.subtask})
    bar.close()
    succ = np.array([t.success for t in trajs], dtype=float)
    by: dict[str, list[Any]] = defaultdict(list)
    for t in trajs:
        by[t.subtask or "all"].append(t)
    subtasks = {k: {"success": float(np.mean([t.success for t in v])), "score": float(np.mean([t.reward for t in v])),
                    "n_episodes": len(v)} for k, v in sorted(by.items())}
    n = len(trajs)
    return {"success": float(succ.mean()) if n else 0.0,
            "stderr": float(math.sqrt(succ.mean() * (1 - succ.mean()) / n)) if n else 0.0,
            "score": float(np.mean([t.reward for t in trajs])) if n else 0.0,
            "invalid": float(np.mean([not s.valid for t in trajs for s in t.steps])) if n else 0.0,
            "n_episodes": n, "temperature": temperature, "subtasks": subtasks, "episodes": episodes}


def eval_modes(cfg: TrainConfig) -> list[tuple[str, float]]:
    """The validation modes ``(name, temperature)``: ``eval.temperature`` first (the paper's 0.4: its results are the
    leaderboard's), the training temperature when it differs (``eval.train_temperature``), then greedy."""
    def name(t: float) -> str:
        return f"t{t:g}"

    modes = [(name(cfg.eval.temperature), cfg.eval.temperature)]
    t_train = cfg.rollout.temperature
    if cfg.eval.train_temperature and t_train > 0 and name(t_train) != modes[0][0]:
        modes.append((name(t_train), t_train))
    if cfg.eval.greedy:
        modes.append(("greedy", 0.0))
    return modes


def reference_points(cfg: TrainConfig, builder: Any, rollouts: Rollouts, seeds: list[int]) -> dict[str, Any]:
    """The held-out ``seeds`` played by the reference policies: ``random`` (uniform over the admissible actions,
    ``eval.samples`` episodes a task) and ``expert`` (the family's expert, one episode: it is deterministic), when
    the family has one. Same levels, same step limit as the model's validation."""
    from ..rollout.engines.factory import EngineRequest, build_engine

    out: dict[str, Any] = {}
    refs = [("random", 1.0, cfg.eval.samples)]
    if family_of(cfg).expert is not None:
        refs.append(("expert", 0.0, 1))
    for name, temp, k in refs:
        engine = build_engine(name, EngineRequest(seed=cfg.seed, env_id=cfg.env.id))
        out[name] = evaluate(engine, builder, cfg, seeds, temperature=temp, seed=cfg.seed + 20_000, samples=k,
                             rollouts=rollouts)
    return out


def validate(cfg: TrainConfig, engine: Any, builder: Any, rollouts: Rollouts, *, run_dir: Path, update: int,
             tag: str, record: bool, log: Any, say: Callable[[str], None]) -> tuple[dict[str, Any], Validation]:
    """One validation of a run (rank 0): every mode (:func:`eval_modes`) on the held-out seeds, leaderboard records
    (when ``record``), a metrics row and a printed line; returns the results and the aggregates the trainer state
    keeps (per-episode outcomes go to ``eval/update-NNNN.json`` only). The validation before RL also plays the
    reference policies (``eval.references``, :func:`reference_points`) into ``eval/reference.json``."""
    seeds = validation_seeds(cfg, cfg.eval.episodes)
    res: dict[str, Any] = {}
    for name, temp in eval_modes(cfg):
        t0 = time.perf_counter()
        r = evaluate(engine, builder, cfg, seeds, temperature=temp, seed=cfg.seed + 10_000, samples=cfg.eval.samples,
                     progress=f"validation {tag} {name}" if cfg.progress else None, rollouts=rollouts)
        r["seconds"] = round(time.perf_counter() - t0, 2)
        res[name] = r
    modes = {k: {kk: vv for kk, vv in v.items() if kk != "episodes"} for k, v in res.items()}
    reference = None
    if record:
        write_eval(run_dir, cfg, update, res, kind="sft" if tag == BEFORE and cfg.sft.steps else "rl",
                   n_params=engine_params(engine))
    line = "  ".join(f"{k}: {v['success']:.1%} (n={v['n_episodes']})" for k, v in res.items())
    say(f"validation [{tag}, update {update}]  {line}")
    if tag == BEFORE and cfg.eval.references:
        refs = reference_points(cfg, builder, rollouts, seeds)
        (run_dir / "eval").mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "eval" / "reference.json", json_text(refs, indent=1))
        reference = {k: {"success": v["success"], "n_episodes": v["n_episodes"], "stderr": v["stderr"]}
                     for k, v in refs.items()}
        say("reference policies on the same tasks  " + "  ".join(
            f"{k}: {v['success']:.1%} (n={v['n_episodes']})" for k, v in refs.items()))
    log.log(update, {f"val_{k}_success": v["success"] for k, v in res.items()}, stage="eval")
    return res, Validation(update, modes, reference)


def paired_gain(before: list[dict[str, Any]], after: list[dict[str, Any]], *, reps: int = 10_000,
                seed: int = 0) -> dict[str, Any]:
    """Success after minus before, paired level by level: per level (``seed`` of the episodes) the mean success of
    its episodes, the mean of the differences over the levels both evaluated, and a 95% percentile bootstrap
    interval over levels (fractions). ``{"mean", "ci95": [lo, hi], "n_levels"}``."""
    from ..leaderboard.aggregate import stratified_bootstrap_ci

    def per_level(eps: list[dict[str, Any]]) -> dict[int, float]:
        by: dict[int, list[float]] = defaultdict(list)
        for e in eps:
            by[int(e["seed"])].append(float(e["success"]))
        return {s: float(np.mean(v)) for s, v in by.items()}

    b, a = per_level(before), per_level(after)
    levels = sorted(set(a) & set(b))
    if not levels:
        return {"mean": None, "ci95": [None, None], "n_levels": 0}
    d = np.array([a[s] - b[s] for s in levels])
    lo, hi = stratified_bootstrap_ci([d], statistic=np.mean, reps=reps, seed=seed)
    return {"mean": float(d.mean()), "ci95": [float(lo), float(hi)], "n_levels": len(levels)}


def model_label(name: str, _depth: int = 0) -> str:
    """The leaderboard ``model`` of a model name, hub id or local folder.

    A run's ``model`` folder (its ``config.toml`` beside it) is labelled by the run's base model, so a model trained
    from ``tiny`` is ``tiny-qwen2`` and one from ``Qwen/Qwen2.5-1.5B-Instruct`` is ``Qwen2.5-1.5B-Instruct``; other
    folders with a generic name (``model``, ``final``, ``checkpoint-*``) get their parent's name in front.
    """
    from .config import read_toml

    path = Path(name)
    if path.is_dir() and (path.parent / "config.toml").exists() and _depth < 8:
        try:
            base = read_toml(path.parent / "config.toml")["model"]["name"]
        except (ConfigError, KeyError, TypeError):
            base = None
        if isinstance(base, str) and base and Path(base).resolve() != path.resolve():
            return model_label(base, _depth + 1)
    last = name.rstrip("/").split("/")[-1]
    if last == "tiny":
        return "tiny-qwen2"
    if path.is_dir() and (last in ("model", "final", "hf", "merged") or last.startswith("checkpoint")):
        return f"{path.resolve().parent.name}/{last}"
    return last


def model_scale(name: str, n_params: int | None = None) -> str:
    """A leaderboard scale label: ``1.5B`` from the name where it says so, else from the parameter count."""
    import re

    m = re.search(r"(\d+(?:\.\d+)?)([BbMm])(?![a-z])", name.split("/")[-1])
    if m:
        return m.group(1) + m.group(2).upper()
    if n_params:
        return f"tiny-{max(1, round(n_params / 1e6))}M" if n_params < 1e8 else f"{n_params / 1e9:.1f}B"
    return "unknown"


def model_params(model: Any) -> int | None:
    """The parameter count of a torch model (``None`` for anything without ``parameters()``), so a run from a model
    folder is labelled by its size."""
    params = getattr(model, "parameters", None)
    return sum(p.numel() for p in params()) if callable(params) else None


def engine_params(engine: Any) -> int | None:
    """The parameter count of the model an engine generates with (its record's ``model``: the hf engine's);
    ``None`` when the engine holds no torch model (vLLM, the baselines)."""
    return model_params(engine.capabilities.model)


def builtin_params(cfg: TrainConfig) -> int | None:
    """The parameter count of the built-in ``tiny`` model at the config's width and depth, without building it, so
    its scale label says its size (``tiny-1M`` by default, ``tiny-4M`` at 256 x 6); ``None`` for any other model."""
    from .memory import builtin_architecture

    arch = builtin_architecture(cfg.model) if cfg.model.name == "tiny" else None
    return arch.params if arch is not None else None


def write_eval(run_dir: str | Path, cfg: TrainConfig, update: int, results: dict[str, dict[str, Any]], *,
               kind: str = "rl", n_params: int | None = None, method: str | None = None,
               folder: str | Path | None = None) -> list[dict[str, Any]]:
    """Append leaderboard records (one per subtask and ``all``, for the temperature-0.4 results) to
    ``eval/records.jsonl`` and the full results to ``eval/update-{update}.json``; returns the records.

    :param folder: write there instead of ``run_dir/eval`` (``abc eval --run`` keeps the run's own results).
    """
    from ..leaderboard.records import RunRecord, env_name
    from .kernels import machine_label

    run_dir = Path(run_dir).resolve()
    machine = machine_label()
    main_mode = next(iter(results))
    res = results[main_mode]
    model = model_label(cfg.model.name)
    scale = model_scale(model, n_params or builtin_params(cfg))
    h = config_hash(cfg)
    budget = cfg.updates if kind == "rl" else None  # an imitation or prompted model had no RL updates

    def row(subtask: str, r: dict[str, Any]) -> RunRecord:
        return RunRecord.measured(env=env_name(cfg.env.name), subtask=subtask, model=model, model_scale=scale,
                                  method=method or cfg.credit.name, seed=cfg.seed, update=update,
                                  success=r["success"], score=r["score"], n_episodes=r["n_episodes"],
                                  config_hash=h, kind=kind, run=run_dir.name, budget=budget, machine=machine)

    subtasks = res["subtasks"]
    rows = [row("all", res), *(row(sub, r) for sub, r in subtasks.items() if sub != "all" and len(subtasks) > 1)]
    out = Path(folder) if folder is not None else run_dir / "eval"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "records.jsonl"
    keep = [ln for ln in (text_lines(read_text(path, error=ConfigError)) if path.exists() else [])
            if ln.strip() and _row_update(ln, path) != update]
    atomic_write_text(path, "\n".join([*keep, *(json_text(r.to_dict()) for r in rows)]) + "\n")
    atomic_write_text(out / f"update-{update:04d}.json", json_text({"update": update, **results}, indent=1))
    return [r.to_dict() for r in rows]


def _row_update(line: str, path: Path) -> Any:
    """The ``update`` of one row of ``eval/records.jsonl``; a damaged row is one line naming the file."""
    from .cut import record_row

    return record_row(line, path).get("update")


def episodes_of(run_dir: Path, state: RunState, tag: str) -> dict[str, list[dict[str, Any]]]:
    """Per-episode outcomes of validation ``tag`` by mode, from its ``eval/update-NNNN.json``."""
    ev = state.evals.get(tag)
    path = run_dir / "eval" / f"update-{ev.update:04d}.json" if ev is not None else None
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


def summarize(cfg: TrainConfig, state: RunState, run_dir: Path, after: dict[str, Any], seconds: float, *,
              main: bool, say: Callable[[str], None], precision_used: str = "",
              kernels: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's summary (rank 0 also writes ``results.json`` and the learning curves, and prints it); it names the
    precision that ran (``precision_used``, see :func:`precision`) and the kernels (``kernels``, see
    :func:`~agentbench_crbc.trainer.kernels.kernel_info`)."""
    from .cut import cut_lines, mark_records
    from .metrics import read_metrics, rl_stats

    cut = cfg.updates > 0 and state.stage == "rl" and state.update < cfg.updates  # only the time cap ends it so
    out: dict[str, Any] = {"run_dir": str(run_dir), "method": cfg.credit.name, "updates": state.update,
                           "updates_planned": cfg.updates, "cut": cut,
                           "sft_steps": state.sft_step, "seconds_this_session": round(seconds, 1),
                           "precision": precision_used or None, "modes": {}}
    before_eps = episodes_of(run_dir, state, BEFORE)
    for mode, res in after.items():
        b = state.evals.success(BEFORE, mode)
        out["modes"][mode] = {"untrained": state.evals.success(UNTRAINED, mode), "before": b,
                              "after": res["success"], "n_episodes": res["n_episodes"],
                              "stderr_after": res.get("stderr")}
        if before_eps.get(mode) and res.get("episodes") and state.update > 0:
            out["modes"][mode]["gain"] = paired_gain(before_eps[mode], res["episodes"], seed=cfg.seed)
    ref = state.evals.before.reference if state.evals.before is not None else None
    if ref:
        out["reference"] = {k: dict(v) for k, v in ref.items()}
    if kernels is not None:
        out["kernels"] = kernels
    if not main:
        return out
    out["training"] = rl_stats(read_metrics(run_dir))
    if cfg.updates > 0:  # a cut run's records carry the updates it did; a finished resume gets its budget back
        mark_records(run_dir, budget=state.update if cut else cfg.updates, cut=cut)
    fig = write_curves(run_dir)
    out["curves"] = str(fig) if fig else None
    atomic_write_text(run_dir / "results.json", json_text(out, indent=1))
    for line in summary_lines(cfg, out, precision_used):
        say(line)
    figure = f", {fig.name} (learning curves)" if fig else \
        " (the learning-curve figure needs matplotlib, which the train extra brings: pip install matplotlib)"
    say(f"saved: {run_dir}/results.json, eval/records.jsonl{figure}")
    if cfg.tensorboard and (run_dir / "tensorboard").is_dir():
        say(f"curves: tensorboard --logdir {run_dir / 'tensorboard'}")
    if cut:
        for line in cut_lines(done=state.update, planned=cfg.updates, minutes=cfg.max_minutes, run_dir=run_dir):
            say(line)
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
    split = ", ".join(f"{k}={v}" for k, v in validation_kwargs(cfg).items() if k in family_of(cfg).heldout_kwargs)
    where = (f"never trained on{f' ({split})' if split else ''}" if heldout_by_construction(cfg) else
             f"from seed {cfg.env.val_seed_offset} on, not checked against the training {word}s")
    lines = [f"\nheld-out success on {ev.episodes} {word}s {where} ({ev.samples} episode"
             f"{'s' if ev.samples != 1 else ''} each when sampling{', one greedy' if ev.greedy else ''}): "
             f"{stages} with "
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
    lines.extend(_training_lines(out))
    return lines


def _training_lines(out: dict[str, Any]) -> list[str]:
    """The RL updates' own numbers the README's table lists (largest approx_kl_end, invalid answers), each only
    when the run measured it, and how many updates ran of the planned ones."""
    stats, parts = out.get("training") or {}, []
    if "approx_kl_end_max" in stats:
        parts.append(f"largest approx_kl_end of an update {stats['approx_kl_end_max']:.3f}")
    if "invalid_mean" in stats:
        parts.append(f"invalid answers {stats['invalid_mean']:.1%} of training answers (largest update "
                     f"{stats['invalid_max']:.1%})")
    planned = out.get("updates_planned")
    done = out.get("updates")
    ran = f"{done} of {planned} updates" if planned is not None else f"{done} updates"
    return [f"  RL: {ran}" + (": " + "; ".join(parts) if parts else "")] if done else []


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
