"""The learning benchmark's plan: its modes, the runs (cells) of a mode, their commands and expected wall time."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UnknownNameError
from ..host import get_host

__all__ = ["CONTROL", "CRBC_DEPTHS", "MODEL", "MODES", "RL_IDLE", "RL_SHARED", "SCALE", "WARM", "WARM_SHARED",
           "Cell", "Mode", "command", "comparisons", "default_env", "estimate", "methods", "plan",
           "variants"]

CRBC_DEPTHS = {"crbc_depth0": 0, "crbc_depth1": 1, "crbc_depth3": 3}  # "crbc" itself is the full closure
CONTROL = "imitation"
WARM = "warmstart"
MODEL, SCALE = "tiny-qwen2", "tiny-1M"


def methods() -> tuple[str, ...]:
    """The credit methods the plugin host has registered (built-in and installed), in its order."""
    return tuple(get_host().credit.names())


def variants() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Variant label -> (credit method, overrides): every registered method with its default options, and CRBC at
    closure depths 0, 1 and 3 (when CRBC is registered)."""
    names = methods()
    out: dict[str, tuple[str, tuple[str, ...]]] = {m: (m, ()) for m in names}
    if "crbc" in names:
        out |= {k: ("crbc", (f"credit.options.depth={d}",)) for k, d in CRBC_DEPTHS.items()}
    return out


def comparisons() -> tuple[tuple[str, str], ...]:
    """The summary's paired comparisons ``(a, b)`` (``a - b``)."""
    return (("crbc", "grpo"), ("crbc", "gigpo"), ("crbc", CONTROL), ("grpo", CONTROL), ("gigpo", CONTROL),
            *(("crbc", d) for d in CRBC_DEPTHS))


@dataclass(frozen=True)
class Mode:
    """The budget of one benchmark mode."""

    envs: tuple[str, ...]
    """Env families to run (empty: the family of the ``cpu-demo`` preset, the one the warm start is built for)."""
    seeds: tuple[int, ...]
    variants: tuple[str, ...]
    """RL variants to run (empty: every one of :func:`variants`)."""
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
    "full": Mode(envs=(), seeds=(0, 1, 2), variants=(), warm_steps=1000, updates=120,
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


#: Validation modes the summary does not report, off (they change no training, only the run's time).
_UNREPORTED = ("eval.train_temperature=false", "eval.references=false")


def plan(mode: str, envs: Sequence[str] | None = None, methods: Sequence[str] | None = None,
         seeds: Sequence[int] | None = None, extra: Sequence[str] = ()) -> list[Cell]:
    """The runs in order: per env and seed, the warm start, the RL variants, then the control (which needs their
    wall time). ``methods`` picks variants, ``imitation`` and/or any installed credit method (a third party's
    too: it runs with its default options), run in the order given (the mode's own: its list, else the host's
    order); the warm start is always planned (a rerun reuses a finished one).

    :raises UnknownNameError: a name that is none of these (one line listing them).
    """
    spec = MODES[mode]
    known = variants()
    wanted = list(methods) if methods else [*(spec.variants or known), CONTROL]
    chosen = {**known, **{m: (m, ()) for m in wanted if m not in known and m != CONTROL}}
    installed = get_host().credit.names()
    unknown = [m for m in chosen if m not in known and m not in installed]
    if unknown:
        raise UnknownNameError(f"unknown method(s) {', '.join(unknown)}; choose a variant "
                               f"({', '.join([*known, CONTROL])}) or an installed credit method "
                               f"({', '.join(installed)}; see `abc plugins`)")
    cells = []
    for env in envs or spec.envs or (default_env(),):
        for seed in seeds or spec.seeds:
            # one episode per level: the paired statistics (McNemar, level bootstrap) read one outcome per level
            common = (f"seed={seed}", f"eval.episodes={spec.eval_episodes}", "eval.samples=1", "eval.temperature=0.4",
                      "eval.greedy=true", *_UNREPORTED, "tensorboard=false", "progress=false", "keep_checkpoints=1",
                      "deterministic=true", *extra)  # kernels pinned: the same numbers on another CPU
            cells.append(Cell(env, seed, WARM, "warm", "crbc", (*common, f"sft.steps={spec.warm_steps}",
                                                                 "sft.max_minutes=0", "updates=0")))
            for label in dict.fromkeys(m for m in wanted if m != CONTROL):  # in the order asked for
                credit, opts = chosen[label]
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


def default_env() -> str:
    """The env family of the ``cpu-demo`` preset: what the benchmark runs when no ``--env`` is given."""
    from ..trainer.schema import PRESETS

    return str(PRESETS["cpu-demo"]["env"]["name"])
