"""``abc bench``: the CPU learning benchmark; one imitation warm start per seed, every credit method from it.

    abc bench --mode quick --dry-run        # print the plan (and the equivalent abc commands)
    abc bench --mode quick                  # grpo/gigpo/crbc from the default's random start + control (seed 0)
    abc bench --mode full --env sokoban     # 3 seeds x 10 variants + control
    abc bench --mode full --workers 3       # on 3 local worker processes (default: one per core)
    abc bench --mode full --ray-address auto   # each run a Ray task of one CPU on the running cluster
    python -m agentbench_crbc.bench.learning ...   # the same (and python benchmarks/learning.py in a checkout)

Protocol (the same for every method; ``MODES`` holds the numbers). Per (env, seed):

1. **Warm start** (``abc sft``): the trainer's imitation stage on the expert's actions, a fixed number of steps
   (not minutes, so a loaded machine gives the same model, only later; quick mode: 0 steps, the seed's random
   initialisation, as the default trains). Saved once as ``RUN_DIR/model``.
2. **One RL run per variant** from that same model (``abc train --model WARM/model --set sft.steps=0``): the same
   updates x groups x G, the same training levels and sampling seeds (the run seed fixes them), no time limit.
   Variants: grpo, rloo, gigpo, graphgpo, g2po, gated_bepo, crbc (full closure) and crbc at depth 0, 1, 3.
3. **Control** ``imitation``: the warm start continues imitation (``abc sft --model WARM/model``) for the median
   wall time of that seed's RL stages. It answers "is RL with credit method X better than just more imitation?".

Every run validates on the same held-out levels (split by canonical form: no validation level, up to the 8
symmetries, was trained on) at temperature 0.4 (recorded on the leaderboard) and greedy (in the summary).
Runs are independent but for the order above: they run side by side on a pool of worker processes (one torch
thread each) or as Ray tasks (:mod:`agentbench_crbc.bench.pool`), each as soon as what it needs has finished.
Records are relabelled (method = variant, model ``tiny-qwen2``, scale ``tiny-1M``) and added to the store, and the
run's row appended to ``OUT/bench.jsonl``, by the driver as each run ends; a rerun skips runs already there, so a
benchmark can be split over sessions, and a run that raised or lost its worker is the only one a rerun does.
The summary compares methods with paired statistics over seeds (same warm start per seed): mean difference,
t interval and paired t-test, and a seeded percentile bootstrap interval.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import pkgutil
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AbcError, ConfigError, UnknownNameError
from ..host import get_host
from ..io import json_text, read_json, read_text, text_lines

if TYPE_CHECKING:
    from .pool import Runner

__all__ = ["CONTROL", "MODES", "RL_IDLE", "RL_SHARED", "WARM_SHARED", "Cell", "CellsFailed", "Mode", "Paired",
           "PairedLevels", "Timing", "add_arguments", "command", "estimate", "execute", "main", "paired_levels",
           "paired_stats", "plan", "preload", "run", "run_cell", "summarise", "summary_markdown", "work_cell"]

METHODS = ("grpo", "rloo", "gigpo", "graphgpo", "g2po", "gated_bepo", "crbc")
CRBC_DEPTHS = {"crbc_depth0": 0, "crbc_depth1": 1, "crbc_depth3": 3}  # "crbc" itself is the full closure
CONTROL = "imitation"
WARM = "warmstart"
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {m: (m, ()) for m in METHODS} | {
    k: ("crbc", (f"credit.options.depth={d}",)) for k, d in CRBC_DEPTHS.items()}
COMPARISONS = (("crbc", "grpo"), ("crbc", "gigpo"), ("crbc", CONTROL), ("grpo", CONTROL), ("gigpo", CONTROL),
               *(("crbc", d) for d in CRBC_DEPTHS))
MODEL, SCALE = "tiny-qwen2", "tiny-1M"


@dataclass(frozen=True)
class Mode:
    """The budget of one benchmark mode."""

    envs: tuple[str, ...]
    """Env families to run (empty: the family of the ``cpu-demo`` preset, the one the warm start is built for)."""
    seeds: tuple[int, ...]
    variants: tuple[str, ...]
    warm_steps: int
    """Imitation steps of the shared warm start (batch 64)."""
    updates: int
    """RL updates per variant."""
    groups: int
    group_size: int
    eval_episodes: int
    eval_every: int
    """Held-out validation every this many updates (0: before and after only)."""
    store: str
    """Default leaderboard store (quick mode keeps its records out of the committed one)."""
    render: str


MODES: dict[str, Mode] = {
    # the default's own budget (60 updates from a random start, no warm start); `--seed 0 --seed 1` for two seeds
    "quick": Mode(envs=(), seeds=(0,), variants=("grpo", "gigpo", "crbc"), warm_steps=0, updates=60,
                  groups=8, group_size=8, eval_episodes=64, eval_every=0, store="runs/bench/quick/records.jsonl",
                  render="runs/bench/quick/board"),
    "full": Mode(envs=(), seeds=(0, 1, 2), variants=tuple(VARIANTS), warm_steps=1000, updates=120,
                 groups=8, group_size=8, eval_episodes=128, eval_every=40, store="leaderboards/records.jsonl",
                 render="leaderboards"),
}


@dataclass(frozen=True)
class Cell:
    """One run of the grid: the warm start, an RL variant, or the imitation control."""

    env: str
    seed: int
    label: str
    kind: str
    """``warm``, ``rl`` or ``control``."""
    credit: str
    overrides: tuple[str, ...]


def plan(mode: str, envs: Sequence[str] | None = None, methods: Sequence[str] | None = None,
         seeds: Sequence[int] | None = None, extra: Sequence[str] = ()) -> list[Cell]:
    """The runs in order: per env and seed, the warm start, the RL variants, then the control (which needs their
    wall time). ``methods`` picks variants, ``imitation`` and/or any installed credit method (a third party's
    too: it runs with its default options); the warm start is always planned (a rerun reuses a finished one).

    :raises UnknownNameError: a name that is none of these (one line listing them).
    """
    spec = MODES[mode]
    wanted = list(methods) if methods else [*spec.variants, CONTROL]
    variants = {**VARIANTS, **{m: (m, ()) for m in wanted if m not in VARIANTS and m != CONTROL}}
    installed = get_host().credit.names()
    unknown = [m for m in variants if m not in VARIANTS and m not in installed]
    if unknown:
        raise UnknownNameError(f"unknown method(s) {', '.join(unknown)}; choose a variant "
                               f"({', '.join([*VARIANTS, CONTROL])}) or an installed credit method "
                               f"({', '.join(installed)}; see `abc plugins`)")
    cells = []
    for env in envs or spec.envs or (default_env(),):
        for seed in seeds or spec.seeds:
            # one episode per level: the paired statistics (McNemar, level bootstrap) read one outcome per level
            common = (f"seed={seed}", f"eval.episodes={spec.eval_episodes}", "eval.samples=1", "eval.temperature=0.4",
                      "eval.greedy=true", "tensorboard=false", "progress=false", "keep_checkpoints=1", *extra)
            cells.append(Cell(env, seed, WARM, "warm", "crbc", (*common, f"sft.steps={spec.warm_steps}",
                                                                 "sft.max_minutes=0", "updates=0")))
            for label in (m for m in variants if m in wanted):
                credit, opts = variants[label]
                cells.append(Cell(env, seed, label, "rl", credit, (
                    *common, "sft.steps=0", f"updates={spec.updates}", "max_minutes=0",
                    f"rollout.groups={spec.groups}", f"rollout.group_size={spec.group_size}",
                    f"eval.every={spec.eval_every}", f"checkpoint_every={max(spec.updates, 1)}", *opts)))
            if CONTROL in wanted:
                cells.append(Cell(env, seed, CONTROL, "control", "crbc",
                                  (*common, "sft.steps=1000000", "updates=0")))
    return cells


@dataclass(frozen=True)
class Timing:
    """One measured run that ``--dry-run``'s time estimate scales from: a stage's wall seconds for so many units
    (RL updates or imitation steps), with the command, the CPU and its load, and the torch threads it ran with."""

    what: str
    machine: str
    """The CPU and its load while it ran."""
    threads: int
    seconds: float
    units: int
    """RL updates (of 8 groups x G = 8, the default's) or imitation steps (batch 64) in ``seconds``."""
    whole_seconds: float | None = None
    """The whole command's wall time, when measured (its excess over ``seconds`` is setup and validation)."""


#: The default's RL stage on a nearly idle CPU (README.md's table; bench runs use the default's threads = 0, so 2).
RL_IDLE = Timing(what="abc train --credit crbc, seed 0, commit 3a7623c",
                 machine="a 2-core AMD EPYC with AVX-512, nearly idle, other processes at the lowest priority",
                 threads=2, seconds=380.0, units=60, whole_seconds=460.0)
#: The slowest of seven seeds of the default run two at a time, one torch thread each (docs/training.md, "Threads").
RL_SHARED = Timing(what="the default's seeds 0-6, --set threads=1: RL 600-924 s",
                   machine="the same CPU shared by two runs", threads=1, seconds=924.0, units=60)
#: The slower of two 600-step warm starts run at once, one per core (docs/training.md, the candidate preset).
WARM_SHARED = Timing(what="a 600-step warm start, seeds 0 and 1: 241 s and 389 s",
                     machine="the same CPU shared by two runs", threads=1, seconds=389.0, units=600)


def _clock(seconds: float) -> str:
    """``7 min 40 s``, ``1 h 8 min``."""
    s = round(seconds)
    if s >= 600:
        return f"{s // 3600} h {round(s % 3600 / 60)} min" if s >= 3600 else f"{round(s / 60)} min"
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def _last_override(cell: Cell, key: str) -> int:
    """The value a cell's ``--set key=N`` overrides give ``key`` (the last one wins, as in the trainer)."""
    values = [o.partition("=")[2] for o in cell.overrides if o.partition("=")[0] == key]
    return int(values[-1]) if values else 0


def _cell_seconds(cell: Cell, rl_updates: int, rl: Timing, warm: Timing) -> float:
    """A cell's expected wall seconds: its stage scaled from the measured one, plus the measured setup and
    validation (``RL_IDLE``'s whole command less its RL stage; a bench run validates fewer levels, so at most)."""
    overhead = (RL_IDLE.whole_seconds or RL_IDLE.seconds) - RL_IDLE.seconds
    if cell.kind == "rl":
        return rl.seconds * _last_override(cell, "updates") / rl.units + overhead
    if cell.kind == "control":  # imitates for the median RL stage of its seed
        return rl.seconds * rl_updates / rl.units + overhead
    return warm.seconds * _last_override(cell, "sft.steps") / warm.units + overhead


def estimate(cells: Sequence[Cell]) -> str:
    """The expected wall time of a fresh run of the plan, per run and in all, scaled from the measured runs
    ``RL_IDLE`` (nearly idle) and ``RL_SHARED`` / ``WARM_SHARED`` (cores shared by two runs): three lines, the
    measurement with its CPU, load and threads, the time per run, the total."""
    rl_updates = sorted({_last_override(c, "updates") for c in cells if c.kind == "rl"})
    median = rl_updates[len(rl_updates) // 2] if rl_updates else RL_IDLE.units
    idle = [_cell_seconds(c, median, RL_IDLE, WARM_SHARED) for c in cells]
    shared = [_cell_seconds(c, median, RL_SHARED, WARM_SHARED) for c in cells]
    per = []
    for u in rl_updates:
        cell = next(c for c in cells if c.kind == "rl" and _last_override(c, "updates") == u)
        per.append(f"RL run of {u} updates {_clock(_cell_seconds(cell, median, RL_IDLE, WARM_SHARED))} (shared: "
                   f"{_clock(_cell_seconds(cell, median, RL_SHARED, WARM_SHARED))})")
    for kind, name in (("control", "control"), ("warm", "warm start")):
        for c in cells:
            if c.kind == kind:
                steps = "" if kind == "control" else f" of {_last_override(c, 'sft.steps')} steps"
                per.append(f"{name}{steps} {_clock(_cell_seconds(c, median, RL_IDLE, WARM_SHARED))} (shared: "
                           f"{_clock(_cell_seconds(c, median, RL_SHARED, WARM_SHARED))})")
                break
    counts = ", ".join(f"{sum(c.kind == k for c in cells)} {n}" for k, n in (
        ("rl", "RL runs"), ("control", "controls"), ("warm", "warm starts")))
    whole = _clock(RL_IDLE.whole_seconds or RL_IDLE.seconds)
    return (f"time measured (other CPUs differ): RL {RL_IDLE.seconds:.0f} s per {RL_IDLE.units} updates at "
            f"{RL_IDLE.threads} torch threads on {RL_IDLE.machine} ({RL_IDLE.what}: {whole} in all); on "
            f"{RL_SHARED.machine} at {RL_SHARED.threads} thread each: RL up to {RL_SHARED.seconds:.0f} s per "
            f"{RL_SHARED.units} updates ({RL_SHARED.what}), imitation {WARM_SHARED.seconds:.0f} s per "
            f"{WARM_SHARED.units} steps ({WARM_SHARED.what}; used for the idle estimate too)\n"
            f"time per run: {'; '.join(per) or 'nothing to run'}\n"
            f"total: about {_clock(sum(idle))} on that idle CPU, {_clock(sum(shared))} shared, for {counts}; "
            "a rerun skips finished runs")


def command(cell: Cell, warm_model: str = "WARM/model", minutes: float | None = None) -> str:
    """The equivalent ``abc`` command line of a cell."""
    q = shlex.quote  # names and values are shown as a shell reads them (a credit name is a plugin's choice)
    sets = " ".join(f"--set {q(o)}" for o in cell.overrides)
    if cell.kind == "warm":
        return f"abc sft --env {q(cell.env)} {sets}"
    if cell.kind == "rl":
        return f"abc train --env {q(cell.env)} --credit {q(cell.credit)} --model {q(warm_model)} {sets}"
    limit = f"{minutes:.2f}" if minutes is not None else "<median RL minutes>"
    return f"abc sft --env {q(cell.env)} --model {q(warm_model)} {sets} --set sft.max_minutes={limit}"


# -- statistics -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Paired:
    """``a - b`` paired by seed: mean, t interval, paired t-test and a percentile bootstrap interval."""

    n: int
    diffs: tuple[float, ...]
    mean: float
    sd: float | None
    t_ci: tuple[float, float] | None
    boot_ci: tuple[float, float]
    t: float | None
    p: float | None
    wins: int
    """Seeds where ``a`` is higher."""
    losses: int

    @property
    def significant(self) -> bool:
        """Two-sided paired t-test at the 5% level (needs 2+ seeds and some spread)."""
        return self.p is not None and self.p < 0.05


def paired_stats(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, reps: int = 10_000,
                 seed: int = 0) -> Paired:
    """Paired comparison of per-seed values ``a[i]`` and ``b[i]`` (same seed, same warm start).

    The bootstrap resamples seeds with replacement (``reps`` replicates, seeded): with 3 seeds it can only take
    10 distinct values, so it is too narrow; the t interval and the p-value are the ones to read.
    """
    import numpy as np
    from scipy import stats

    from ..leaderboard.aggregate import stratified_bootstrap_ci

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"paired_stats needs two equally long non-empty sequences, got {x.shape} and {y.shape}")
    d = x - y
    n, mean = int(d.size), float(d.mean())
    boot = stratified_bootstrap_ci([d], statistic=np.mean, reps=reps, confidence=confidence, seed=seed)
    sd = float(d.std(ddof=1)) if n > 1 else None
    t = p = t_ci = None
    if sd is not None and sd > 1e-12:  # identical differences (up to rounding): no t-test
        res = stats.ttest_rel(x, y)
        t, p = float(res.statistic), float(res.pvalue)
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
        t_ci = (mean - half, mean + half)
    return Paired(n=n, diffs=tuple(float(v) for v in d), mean=mean, sd=sd, t_ci=t_ci, boot_ci=boot, t=t, p=p,
                  wins=int((d > 0).sum()), losses=int((d < 0).sum()))


@dataclass(frozen=True)
class PairedLevels:
    """``a - b`` paired by (seed, held-out level): both variants played the same levels from the same warm start."""

    n_seeds: int
    n_levels: int
    mean: float
    boot_ci: tuple[float, float]
    """Two-stage bootstrap: seeds with replacement, then levels with replacement within each seed."""
    a_only: int
    """Pairs that ``a`` solved and ``b`` did not."""
    b_only: int
    p: float
    """Exact McNemar test on the discordant pairs (treats pairs as independent; the interval does not)."""

    @property
    def significant(self) -> bool:
        """The bootstrap interval (which respects the clustering by seed) excludes 0."""
        return not self.boot_ci[0] <= 0.0 <= self.boot_ci[1]


def paired_levels(a: Mapping[Any, Mapping[str, int]], b: Mapping[Any, Mapping[str, int]], *,
                  confidence: float = 0.95, reps: int = 10_000, seed: int = 0) -> PairedLevels:
    """Compare per-level outcomes ``a[seed][level]`` and ``b[seed][level]`` (0/1) on the seeds and levels both have.

    Resolves smaller gaps than :func:`paired_stats` on per-seed means: with 3 seeds x 64 levels the paired outcomes
    cancel level difficulty, which dominates the per-seed spread.
    """
    import numpy as np
    from scipy import stats

    seeds = sorted(set(a) & set(b), key=str)
    levels = sorted(set.intersection(*(set(a[s]) & set(b[s]) for s in seeds)), key=str) if seeds else []
    if not levels:
        raise ValueError("paired_levels needs at least one seed and level that both sides played")
    x = np.array([[a[s][lv] for lv in levels] for s in seeds], dtype=float)
    y = np.array([[b[s][lv] for lv in levels] for s in seeds], dtype=float)
    d = x - y
    rng = np.random.default_rng(seed)
    n_s, n_l = d.shape
    pick_s = rng.integers(0, n_s, size=(reps, n_s))
    pick_l = rng.integers(0, n_l, size=(reps, n_s, n_l))
    boot = d[pick_s[:, :, None], pick_l].mean(axis=(1, 2))
    lo, hi = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    a_only, b_only = int((d > 0).sum()), int((d < 0).sum())
    p = float(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue) if a_only + b_only else 1.0
    return PairedLevels(n_seeds=n_s, n_levels=n_l, mean=float(d.mean()), boot_ci=(float(lo), float(hi)),
                        a_only=a_only, b_only=b_only, p=p)


# -- running --------------------------------------------------------------------------------------------------------
def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The benchmark's own JSON Lines log (``bench.jsonl``, a cell log); ``[]`` when missing."""
    if not path.exists():
        return []
    return [json.loads(ln) for ln in text_lines(read_text(path, error=ConfigError)) if ln.strip()]


def _run_facts(run_dir: Path) -> dict[str, Any]:
    """Held-out success per update and decoding (and per held-out level), training success per update, RL seconds,
    samples trained on."""
    evals: dict[str, dict[str, float]] = {}
    episodes: dict[str, dict[str, dict[str, int]]] = {}  # update -> decoding -> held-out level seed -> 0/1
    for f in sorted((run_dir / "eval").glob("update-*.json")):
        d = read_json(f, error=ConfigError)
        modes = {k: v for k, v in d.items() if isinstance(v, dict) and "success" in v}
        evals[str(d["update"])] = {k: v["success"] for k, v in modes.items()}
        episodes[str(d["update"])] = {k: {str(e["seed"]): int(e["success"]) for e in v["episodes"]}
                                      for k, v in modes.items() if v.get("episodes")}
    from ..trainer.metrics import read_metrics

    rows = read_metrics(run_dir)
    rl = [r for r in rows if r.get("stage") == "rl"]
    sft = [r for r in rows if r.get("stage") == "sft"]
    cfg = read_json(run_dir / "config.json", error=ConfigError)
    n_traj = cfg["rollout"]["groups"] * cfg["rollout"]["group_size"]
    return {"evals": evals, "episodes": episodes, "train_success": [r["success"] for r in rl],
            "rl_seconds": round(sum(r["time_update"] for r in rl), 1),
            "rl_samples": round(sum(r["episode_len"] * n_traj for r in rl)),
            "sft_steps": max((r["step"] for r in sft), default=0),
            "sft_samples": max((r["step"] for r in sft), default=0) * cfg["sft"]["batch_size"]}


def _cell_records(cell: Cell, run_dir: Path, *, updates: int, warm_dir: Path | None) -> list[Any]:
    """The cell's held-out records relabelled for the board (the control's also carry the warm start's)."""
    from ..leaderboard.records import read_records

    recs = read_records(run_dir / "eval" / "records.jsonl")
    out = [dataclasses.replace(r, method=cell.label, model=MODEL, model_scale=SCALE) for r in recs]
    if cell.kind == "control":  # its only evaluation follows the continued imitation: the RL budget's point
        out = [dataclasses.replace(r, update=updates, kind="sft") for r in out]
        assert warm_dir is not None
        out += [dataclasses.replace(r, method=CONTROL, model=MODEL, model_scale=SCALE, kind="sft")
                for r in read_records(warm_dir / "eval" / "records.jsonl")]
    return out


def run_cell(cell: Cell, out: Path, *, warm_dir: Path | None, minutes: float | None) -> Path:
    """Train one cell in this process (the trainer's public ``load_config`` and ``train``); returns its run folder."""
    from ..trainer.config import load_config
    from ..trainer.loop import train

    get_host().register_gym_ids()
    overrides = [*cell.overrides, f"out_dir={out / cell.env / f'seed{cell.seed}'}"]
    if minutes is not None:
        overrides.append(f"sft.max_minutes={minutes:.4f}")
    model = str(warm_dir / "model") if warm_dir is not None else None
    cfg = load_config(env=cell.env, credit=cell.credit, model=model, overrides=overrides)
    if cell.kind == "control":
        cfg.exp_name = f"{cell.env}__{CONTROL}"
    return Path(train(cfg)["run_dir"])


#: Imported with every submodule before the first run: other people editing the source tree mid-benchmark cannot
#: break a long run (a module needing an extra that is not installed is skipped; a run never imports it).
_PRELOAD_PACKAGES = ("agentbench_crbc.trainer", "agentbench_crbc.rollout", "agentbench_crbc.leaderboard")
_PRELOAD = ("matplotlib.figure", "pandas", "scipy.stats", "tqdm.auto", "transformers", "safetensors.torch")
#: The fields of an environment family that name modules a run imports (``"module:attr"``).
_FAMILY_REFS = ("expert", "task_key", "imitation")


def _import_tree(package: str) -> None:
    pkg = importlib.import_module(package)
    for info in pkgutil.walk_packages(pkg.__path__, f"{package}."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional engine's dependency (vllm, openai, pettingzoo) is not installed
            continue


def preload(envs: Sequence[str] = ()) -> None:
    """Import everything a run needs now: the trainer, rollout and leaderboard modules, the modules of each
    environment family in ``envs`` (found through the plugin host), and the credit plugins."""
    host = get_host()
    host.register_gym_ids()
    for name in _PRELOAD:
        importlib.import_module(name)
    for package in _PRELOAD_PACKAGES:
        _import_tree(package)
    for env in envs:
        try:
            family = host.family(env)
        except UnknownNameError:  # not a registered family: the trainer reports it at its first run
            continue
        for spec in family.ids:
            importlib.import_module(spec.entry_point.partition(":")[0])
        for attr in _FAMILY_REFS:
            family.load(attr)
    for m in {c for c, _ in VARIANTS.values()}:
        host.credit_method(m)


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2


_WORKER_READY: set[str] = set()  # the env families this worker process has preloaded


def _worker_setup(env: str) -> None:
    """Once per worker process and family: one torch thread, no progress bars, everything a run imports."""
    if env in _WORKER_READY:
        return
    from .pool import worker_env

    worker_env()
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()  # "Writing model shards" bars at every checkpoint
    preload([env])
    _WORKER_READY.add(env)


def work_cell(cell: Cell, out: Path, warm_dir: Path | None, minutes: float | None, updates: int) -> dict[str, Any]:
    """One cell in a worker (a pool process or a Ray task): train it; its run folder, seconds, facts and relabelled
    records (added to the store by the driver, so workers never write it)."""
    _worker_setup(cell.env)
    t0 = time.perf_counter()
    run_dir = run_cell(cell, out, warm_dir=warm_dir, minutes=minutes)
    records = [] if cell.kind == "warm" else _cell_records(cell, run_dir, updates=updates, warm_dir=warm_dir)
    return {"run_dir": str(run_dir), "seconds": round(time.perf_counter() - t0, 1), "facts": _run_facts(run_dir),
            "records": records}


class CellsFailed(AbcError):
    """Runs that raised, lost their worker, or needed one that did (the finished ones are in ``bench.jsonl``)."""


Key = tuple[str, int, str]


def _key(cell: Cell) -> Key:
    return (cell.env, cell.seed, cell.label)


def _state(cell: Cell, done: Mapping[Key, Any], waiting: Sequence[Cell], failed: Mapping[Key, str]) -> str:
    """``ready``, ``wait`` (a run it needs is planned or running) or why it cannot run in this invocation."""
    if cell.kind == "warm":
        return "ready"
    warm = (cell.env, cell.seed, WARM)
    if warm in failed:
        return "its warm start did not finish"
    if warm not in done:
        return "wait" if any(_key(c) == warm for c in waiting) else "no warm start planned (it always is)"
    if cell.kind == "control":
        if any(c.kind == "rl" and (c.env, c.seed) == (cell.env, cell.seed) for c in waiting):
            return "wait"
        if any(k[:2] == (cell.env, cell.seed) and k[2] != WARM for k in failed):
            return "an RL run of its seed did not finish (their median wall time sets the control's)"
    return "ready"


def _reason(exc: BaseException) -> str:
    """One line: why a cell did not finish."""
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, BrokenProcessPool):
        return "its worker process died (killed, or out of memory)"
    exc = getattr(exc, "cause", None) or exc  # a Ray task's error wraps the cell's own
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _relative(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it (as the run folders of a relative OUT)."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _append(path: Path, row: dict[str, Any]) -> None:
    """Append one row to ``bench.jsonl`` under its lock (another ``abc bench`` on the same folder waits)."""
    from filelock import FileLock

    with FileLock(f"{path}.lock"), path.open("a", encoding="utf-8") as fh:
        fh.write(json_text(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def execute(mode: str, cells: Sequence[Cell], out: Path, store: Path, *, replace: bool = False,
            runner: Runner | None = None, work: Callable[..., dict[str, Any]] = work_cell) -> list[dict]:
    """Run the cells not yet in ``out/bench.jsonl`` on ``runner`` (default: a process pool, one worker per core),
    each as soon as what it needs has finished: the RL runs and the control of a seed after its warm start (run once
    and reused), the control after the seed's RL runs (it imitates for their median wall time). Each cell's row is
    appended to ``bench.jsonl`` and its records added to ``store`` the moment it ends, by this process.
    ``work(cell, out, warm_dir, minutes, updates)`` runs one cell in a worker (:func:`work_cell`).

    :raises CellsFailed: after every cell that could run has ended, naming those that did not (a rerun runs only
        them; the finished ones are skipped).
    """
    from concurrent.futures import FIRST_COMPLETED, wait

    from ..leaderboard.records import add_records
    from .pool import open_runner

    log_path = out / "bench.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    done = {(r["env"], r["seed"], r["label"]): r for r in _read_jsonl(log_path) if r["mode"] == mode}
    todo = list({_key(c): c for c in cells if _key(c) not in done}.values())
    if not todo:
        return [r for r in _read_jsonl(log_path) if r["mode"] == mode]
    spec, total = MODES[mode], len(cells)
    own = runner is None
    runner = runner if runner is not None else open_runner()
    print(f"{len(todo)} of {total} runs to do, on {runner.describe()}", file=sys.stderr, flush=True)
    running: dict[Any, tuple[Cell, Path | None, float | None]] = {}
    failed: dict[Key, str] = {}

    def fail(cell: Cell, why: str) -> None:
        failed[_key(cell)] = why
        print(f"failed: {cell.env} seed {cell.seed} {cell.label}: {why}", file=sys.stderr, flush=True)

    try:
        while todo or running:
            for cell in list(todo):
                state = _state(cell, done, [*todo, *(c for c, _, _ in running.values())], failed)
                if state == "wait":
                    continue
                todo.remove(cell)
                if state != "ready":
                    fail(cell, state)
                    continue
                warm_dir = Path(done[(cell.env, cell.seed, WARM)]["run_dir"]) if cell.kind != "warm" else None
                minutes = None
                if cell.kind == "control":
                    rl = [r["rl_seconds"] for k, r in done.items() if k[:2] == _key(cell)[:2] and r["kind"] == "rl"]
                    minutes = (_median(rl) if rl else spec.updates * 10.0) / 60
                try:  # absolute paths: a Ray worker need not share this process's working directory
                    fut = runner.submit(work, cell, out.resolve(), warm_dir and warm_dir.resolve(), minutes,
                                        spec.updates)
                except Exception as exc:  # a broken pool takes no more work
                    fail(cell, _reason(exc))
                    continue
                running[fut] = (cell, warm_dir, minutes)
                print(f"start: {cell.env} seed {cell.seed} {cell.label}{f' ({minutes:.2f} min)' if minutes else ''}",
                      file=sys.stderr, flush=True)
            if not running:
                for cell in todo:  # nothing is left running that they could wait on
                    fail(cell, "what it needs did not finish")
                break
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                cell, warm_dir, minutes = running.pop(fut)
                try:
                    res = fut.result()
                except Exception as exc:
                    if not isinstance(exc, AbcError) and exc.__cause__ is not None:  # the worker's traceback
                        print(exc.__cause__, file=sys.stderr)
                    fail(cell, _reason(exc))
                    continue
                run_dir = _relative(Path(res["run_dir"]))
                n = add_records(store, res["records"], replace=replace,
                                origin=f"{run_dir} eval record") if res["records"] else 0
                row = {"mode": mode, "env": cell.env, "seed": cell.seed, "label": cell.label, "kind": cell.kind,
                       "run_dir": str(run_dir), "seconds": res["seconds"], "control_minutes": minutes,
                       "records_added": n,
                       "command": command(cell, str(warm_dir / "model") if warm_dir else "", minutes),
                       **res["facts"]}
                _append(log_path, row)
                done[_key(cell)] = row
                print(f"[{sum(_key(c) in done for c in cells)}/{total}] done: {cell.env} seed {cell.seed} "
                      f"{cell.label} ({res['seconds']:.0f} s)", file=sys.stderr, flush=True)
    finally:
        if own:
            runner.close()
    if failed:
        raise CellsFailed(f"{len(failed)} run(s) did not finish: "
                          + "; ".join(f"{e} seed {s} {lab} ({why})" for (e, s, lab), why in failed.items())
                          + f"; the finished ones are in {log_path}: run the same command again to run only the rest")
    return [r for r in _read_jsonl(log_path) if r["mode"] == mode]


# -- summary --------------------------------------------------------------------------------------------------------
def _final_update(row: dict[str, Any], updates: int) -> str:
    """The validation a run is judged by: update 0 for the warm start and the imitation control, else the last."""
    return "0" if row["kind"] in ("control", "warm") else str(updates)


def _final(row: dict[str, Any], decoding: str, updates: int) -> float | None:
    return row["evals"].get(_final_update(row, updates), {}).get(decoding)


def _final_levels(row: dict[str, Any], decoding: str, updates: int) -> dict[str, int] | None:
    return row.get("episodes", {}).get(_final_update(row, updates), {}).get(decoding)


def default_env() -> str:
    """The env family of the ``cpu-demo`` preset: what the benchmark runs when no ``--env`` is given."""
    from ..trainer.schema import PRESETS

    return str(PRESETS["cpu-demo"]["env"]["name"])


def summarise(rows: Sequence[dict[str, Any]], updates: int, env: str | None = None) -> dict[str, Any]:
    """Per variant: held-out success (t0.4, greedy) after the budget, per seed; paired comparisons over seeds
    (``env``: the rows of this family; default :func:`default_env`)."""
    env = env or default_env()
    by: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r["env"] == env:
            by[r["label"]][r["seed"]] = r
    table: dict[str, Any] = {}
    others = sorted(set(by) - {WARM, CONTROL, *VARIANTS})  # installed methods run by name (--method NAME)
    for label in [WARM, *VARIANTS, *others, CONTROL]:
        if label not in by:
            continue
        per_seed = {}
        for seed, r in sorted(by[label].items()):
            vals = {dec: _final(r, dec, updates) for dec in ("t0.4", "greedy")}
            vals["train_success_mean"] = (sum(r["train_success"]) / len(r["train_success"])
                                          if r["train_success"] else None)
            vals["seconds"] = r["rl_seconds"] if r["kind"] == "rl" else r["seconds"]
            vals["samples"] = r["rl_samples"] if r["kind"] == "rl" else r["sft_samples"]
            per_seed[seed] = vals
        table[label] = per_seed
    pairs = [*COMPARISONS, *((v, CONTROL) for v in others), *((v, WARM) for v in [*VARIANTS, *others, CONTROL])]
    comps = []
    for a, b in pairs:
        if a not in table or b not in table:
            continue
        for metric in ("t0.4", "greedy", "train_success_mean"):
            seeds = [s for s in table[a] if s in table[b] and table[a][s].get(metric) is not None
                     and table[b][s].get(metric) is not None]
            if not seeds or (metric == "train_success_mean" and WARM in (a, b)):
                continue
            ps = paired_stats([table[a][s][metric] for s in seeds], [table[b][s][metric] for s in seeds])
            comps.append({"a": a, "b": b, "metric": metric, "seeds": seeds, **dataclasses.asdict(ps),
                          "significant": ps.significant})
    level_comps = []
    for a, b in pairs:
        for metric in ("t0.4", "greedy"):
            per = {lab: {s: lv for s, r in by.get(lab, {}).items() if (lv := _final_levels(r, metric, updates))}
                   for lab in (a, b)}
            if not set(per[a]) & set(per[b]):
                continue
            try:
                pl = paired_levels(per[a], per[b])
            except ValueError:
                continue
            level_comps.append({"a": a, "b": b, "metric": metric, **dataclasses.asdict(pl),
                                "significant": pl.significant})
    return {"env": env, "updates": updates, "table": table, "comparisons": comps, "level_comparisons": level_comps}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as markdown tables (success in percent)."""
    import numpy as np

    lines = [f"Held-out success (%) after {summary['updates']} updates, per seed (mean ± std over seeds); "
             "`imitation` = the warm start continued for the RL stage's median wall time; `warmstart` = the shared "
             "starting point; train = mean training-rollout success over the RL updates (T=1.0). Seconds: the RL "
             "stage (RL variants) or the whole run; samples: env steps trained on (RL) or examples (imitation).",
             "",
             "| variant | seeds | T=0.4 | greedy | train | per seed T=0.4 | seconds / samples trained on |",
             "|---|---|---|---|---|---|---|"]
    for label, per in summary["table"].items():
        def agg(metric: str, per: dict = per) -> str:
            v = [x[metric] for x in per.values() if x.get(metric) is not None]
            if not v:
                return "n/a"
            return f"{100 * np.mean(v):.1f}" + (f" ± {100 * np.std(v, ddof=1):.1f}" if len(v) > 1 else "")
        seeds = ", ".join(_pct(x["t0.4"]) for x in per.values())
        cost = ", ".join(f"{x['seconds']:.0f}/{x['samples']}" for x in per.values())
        lines.append(f"| {label} | {len(per)} | {agg('t0.4')} | {agg('greedy')} | {agg('train_success_mean')} | "
                     f"{seeds} | {cost} |")
    lines += ["", "Paired differences a − b over seeds (points): mean, 95% t interval, paired t-test p, 95% "
              "bootstrap interval over seeds, wins/losses.", "",
              "| a − b | metric | n | mean | 95% t CI | p | bootstrap CI | W/L | significant (5%) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in summary["comparisons"]:
        tci = "n/a" if c["t_ci"] is None else f"[{100 * c['t_ci'][0]:+.1f}, {100 * c['t_ci'][1]:+.1f}]"
        p = "n/a" if c["p"] is None else f"{c['p']:.3f}"
        lines.append(f"| {c['a']} − {c['b']} | {c['metric']} | {c['n']} | {100 * c['mean']:+.1f} | {tci} | {p} | "
                     f"[{100 * c['boot_ci'][0]:+.1f}, {100 * c['boot_ci'][1]:+.1f}] | {c['wins']}/{c['losses']} | "
                     f"{'yes' if c['significant'] else 'no'} |")
    if summary.get("level_comparisons"):
        lines += ["", "Paired by held-out level (seed x level; same levels, same warm start): mean difference "
                  "(points), 95% two-stage bootstrap interval (seeds, then levels), levels only a / only b solved, "
                  "exact McNemar p.", "",
                  "| a − b | metric | seeds x levels | mean | bootstrap CI | a only / b only | McNemar p | "
                  "significant (5%) |", "|---|---|---|---|---|---|---|---|"]
        for c in summary["level_comparisons"]:
            lines.append(f"| {c['a']} − {c['b']} | {c['metric']} | {c['n_seeds']} x {c['n_levels']} | "
                         f"{100 * c['mean']:+.1f} | [{100 * c['boot_ci'][0]:+.1f}, {100 * c['boot_ci'][1]:+.1f}] | "
                         f"{c['a_only']} / {c['b_only']} | {c['p']:.3f} | {'yes' if c['significant'] else 'no'} |")
    return "\n".join(lines) + "\n"


def train_curves_figure(rows: Sequence[dict[str, Any]], env: str, path: Path) -> Path:
    """Training-rollout success per update (mean over seeds) per RL variant."""
    import numpy as np
    from matplotlib.figure import Figure

    from ..io import atomic_open

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    by: dict[str, list[list[float]]] = defaultdict(list)
    for r in rows:
        if r["env"] == env and r["kind"] == "rl" and r["train_success"]:
            by[r["label"]].append(r["train_success"])
    for label, curves in by.items():
        n = min(len(c) for c in curves)
        m = 100 * np.mean([c[:n] for c in curves], axis=0)
        ax.plot(np.arange(1, n + 1), m, marker="o", markersize=2, label=f"{label} (n={len(curves)})")
    ax.set_xlabel("update")
    ax.set_ylabel("training success % (T=1.0, 64 rollouts)")
    ax.set_title(f"{env} · {SCALE}: training success per update (mean over seeds)")
    ax.legend(fontsize=7, frameon=False, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", metadata={"Software": None})
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``abc bench`` as a program of its own (``python -m agentbench_crbc.bench.learning``)."""
    p = argparse.ArgumentParser(prog="abc bench", description=(__doc__ or "").split("\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv), argv)


def _family_name(text: str) -> str:
    """``--env NAME``: a registered environment family, checked against the plugin host when the flag is given
    (so that building the parser builds no host). While the host knows no family at all, any name passes and the
    trainer reports it at the first run."""
    try:
        names = get_host().families.names()
    except AbcError as exc:  # a broken plugin set: the command reports it when it builds the host again
        raise argparse.ArgumentTypeError(str(exc)) from None
    if names and text not in names:
        raise argparse.ArgumentTypeError(f"unknown env family {text!r}; installed: {', '.join(names)} "
                                         "(see `abc plugins`)")
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``abc bench`` and ``python -m agentbench_crbc.bench.learning``."""
    p.add_argument("--mode", choices=tuple(MODES), default="quick")
    p.add_argument("--env", action="append", type=_family_name, metavar="FAMILY",
                   help="only these registered environment families (repeatable; default: the mode's)")
    p.add_argument("--method", action="append", help=f"only these variants (repeatable): {', '.join(VARIANTS)}, "
                   f"{CONTROL}, or any installed credit method (`abc plugins`; run with its default options)")
    from ..argtypes import bounded_int

    p.add_argument("--seed", action="append", type=bounded_int(0, 2**32 - 1), help="only these seeds (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra trainer overrides")
    p.add_argument("--out", type=Path, help="run folders and bench.jsonl (default runs/bench/MODE)")
    p.add_argument("--records", type=Path, help="leaderboard store (default: the mode's)")
    p.add_argument("--render", type=Path, help="render the board and the summary here (default: the mode's)")
    p.add_argument("--replace", action="store_true", help="overwrite records of an earlier benchmark run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--summary-only", action="store_true", help="only re-summarise and render what bench.jsonl has")
    from .pool import default_workers

    cores = default_workers()
    p.add_argument("--workers", type=bounded_int(1, 4096), metavar="N",
                   help=f"cells run at once in local worker processes, one torch thread each (default: the {cores} "
                   "core(s) this process may use); with --ray-address local: the CPUs of the local cluster")
    p.add_argument("--ray-address", metavar="ADDR", help="run each cell as a Ray task of one CPU instead: auto (the "
                   "running cluster), ray://HEAD:10001, HEAD:6379, or local (start a cluster of --workers CPUs "
                   "here); needs the ray extra, and OUT on a filesystem every node shares")
    p.add_argument("--ray-retries", type=bounded_int(0, 100), default=2, metavar="N",
                   help="times Ray reruns a task whose worker or node died (default 2; a cell that raises is not "
                   "retried)")


def check_cells(cells: Sequence[Cell]) -> None:
    """Resolve each kind of cell's config here, before any folder or worker: a bad ``--set`` (``optim.lr=abc``,
    ``noequals``, a value out of bounds) is one ConfigError naming the key, not a failure inside every worker."""
    from ..trainer.config import load_config

    seen: set[tuple[str, str, str]] = set()
    for c in cells:
        if (c.env, c.kind, c.label) in seen:
            continue
        seen.add((c.env, c.kind, c.label))
        load_config(env=c.env, credit=c.credit, overrides=c.overrides)


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Plan, run, record, summarise, render."""
    spec = MODES[args.mode]
    cells = plan(args.mode, args.env, args.method, args.seed, args.set)
    if not args.summary_only:
        check_cells(cells)
    out = args.out or Path("runs") / "bench" / args.mode
    store = args.records or Path(spec.store)
    render_dir = args.render or Path(spec.render)
    if args.dry_run:
        for c in cells:
            print(f"{c.env:8} seed={c.seed} {c.label:12} {command(c)}")
        print(f"{len(cells)} runs ({sum(c.kind == 'rl' for c in cells)} RL, "
              f"{sum(c.kind == 'warm' for c in cells)} warm starts, {sum(c.kind == 'control' for c in cells)} "
              f"controls); records -> {store}; board -> {render_dir}")
        print(estimate(cells))
        return 0
    _import_tree("agentbench_crbc.leaderboard")  # the driver only records and renders; workers train
    failure: CellsFailed | None = None
    if args.summary_only:
        rows = _read_jsonl(out / "bench.jsonl")
    else:
        from ..extras import require, require_env
        from .pool import open_runner

        require("torch", "transformers")  # checked here: a worker without them would fail every cell one by one
        for fam in sorted({c.env for c in cells}):
            require_env(fam)
        runner = open_runner(args.workers, args.ray_address, args.ray_retries)
        try:
            rows = execute(args.mode, cells, out, store, replace=args.replace, runner=runner)
        except CellsFailed as exc:  # render what finished, then say what did not
            failure, rows = exc, _read_jsonl(out / "bench.jsonl")
        finally:
            runner.close()
    rows = [r for r in rows if r["mode"] == args.mode]
    from ..io import atomic_write_text
    from ..leaderboard.records import read_records
    from ..leaderboard.report import render

    line = "abc bench " + " ".join(sys.argv[1:] if argv is None else argv)
    render(read_records(store), render_dir, command=line)
    for env in sorted({r["env"] for r in rows}):
        summary = summarise(rows, spec.updates, env)
        learn = render_dir / "learning"
        atomic_write_text(learn / f"{env}_summary.json", json_text(summary, indent=1))
        md = f"# Learning benchmark: {env}, {SCALE}\n\nMade by `{line}`.\n\n{summary_markdown(summary)}"
        atomic_write_text(learn / f"{env}_summary.md", md)
        train_curves_figure(rows, env, learn / f"{env}_train_curves.png")
        print(md)
    if failure is not None:
        raise failure
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
