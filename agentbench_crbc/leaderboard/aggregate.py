"""Aggregation over seeds: mean +- std (ddof=1) with n, IQM and an rliable-style stratified bootstrap 95% CI.

A board is one (env, model_scale) table of reported rows, or of measured rows of one update budget and one code
revision on one machine (a table never mixes budgets, trainer revisions, or CPU types and kernel ISAs; measured
references without RL updates, such as an imitation control, appear on every RL board of their revision and
machine): one :class:`Entry` per (method, model, source, kind),
one :class:`Cell` per subtask. Measured entries use each group's final update (the largest update number in the
records); the ``all`` column is the run's own ``all`` record when it wrote one, else the episode-weighted mean of
its subtasks. Reported entries show the paper's mean and std as given; they have no per-seed numbers, so no IQM or CI.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import trim_mean

from .records import RunRecord

__all__ = [
    "DDOF",
    "Board",
    "Cell",
    "Curve",
    "Entry",
    "build_boards",
    "env_order",
    "iqm",
    "learning_curves",
    "mean_std",
    "scale_sort_key",
    "stratified_bootstrap_ci",
    "subtask_order",
]



def env_order() -> tuple[str, ...]:
    """Board order: the registered families by :attr:`~agentbench_crbc.family.EnvFamily.board_order`, then name;
    other envs sort after, by name."""
    from ..host import get_host

    return tuple(f.name for f in sorted(get_host().families, key=lambda f: (f.board_order, f.name)))


def subtask_order() -> tuple[str, ...]:
    """Column order for known subtasks: each family's :attr:`~agentbench_crbc.family.EnvFamily.subtasks` in
    board order; others sort after."""
    from ..host import get_host

    fams = sorted(get_host().families, key=lambda f: (f.board_order, f.name))
    return tuple(dict.fromkeys(s for f in fams for s in f.subtasks))


#: The std's degrees-of-freedom correction: sample std over seeds, as numpy's ``std(ddof=1)``.
DDOF = 1


@dataclass(frozen=True, slots=True)
class Cell:
    """One table cell: mean over seeds, sample std (``None`` for one seed or when not reported), seed count."""

    mean: float
    std: float | None
    n: int | None


@dataclass(frozen=True, slots=True)
class Entry:
    """One board row: a method run with one model (measured or reported), per-subtask success and score."""

    method: str
    model: str
    model_scale: str
    source: str
    kind: str
    citation: str | None
    update: int
    success: Mapping[str, Cell]
    score: Mapping[str, Cell]
    iqm: float | None = None
    """IQM of success over (seed, subtask) pairs; measured entries only."""
    ci: tuple[float, float] | None = None
    """95% stratified-bootstrap interval of :attr:`iqm` (subtasks are the strata, seeds are resampled)."""


@dataclass(frozen=True, slots=True)
class Board:
    """The entries of one (env, model_scale) table and its subtask columns (``all`` last); a measured board holds
    the rows of one update budget and one code revision."""

    env: str
    model_scale: str
    subtasks: tuple[str, ...]
    entries: tuple[Entry, ...]
    budget: int | None = None
    """RL updates of every measured run on the board (``None``: reported rows, or measured rows from before
    records carried their budget)."""
    revision: str | None = None
    """The code revision that measured every row (:attr:`RunRecord.revision`); ``None`` as for :attr:`budget`."""
    versions: tuple[str, ...] = ()
    """The package versions that measured or imported the rows."""
    measured: bool = False
    """Whether the board holds measured rows (reported ones are always on boards of their own)."""
    cut: bool = False
    """Whether the board holds runs their time cap cut short (:attr:`RunRecord.cut`; never beside full runs)."""
    machine: str | None = None
    """The CPU model and kernel ISA that measured every row (:attr:`RunRecord.machine`; ``None``: not recorded)."""

    @property
    def section(self) -> str:
        """What measured the board, for its heading: ``60 updates, commit 3a7623c0d1e2, version 0.1.0, on Intel(R)
        Xeon(R) Platinum 8488C, AVX512 kernels`` (``CPU not recorded`` for rows from before records named it)."""
        if not self.measured:
            return "reported"
        done = f"{self.budget} updates" + (" (runs cut by their time cap)" if self.cut else "")
        parts = [done if self.budget is not None else "budget not recorded",
                 (f"commit {self.revision}" if self.revision and not self.revision.startswith("v")
                  else f"release {self.revision}" if self.revision else "revision not recorded")]
        if self.versions:
            parts.append("version " + ", ".join(self.versions))
        parts.append(f"on {self.machine}" if self.machine else "CPU not recorded")
        return ", ".join(parts)

    @property
    def has_score(self) -> bool:
        return any(e.score for e in self.entries)

    def best(self, metric: str, subtask: str) -> float | None:
        """The highest mean in a column (``metric`` is ``success`` or ``score``), ``None`` for an empty column."""
        values = [getattr(e, metric)[subtask].mean for e in self.entries if subtask in getattr(e, metric)]
        return max(values) if values else None


@dataclass(frozen=True, slots=True)
class Curve:
    """Success on ``all`` against update number, over seeds, for one measured (method, model)."""

    method: str
    model: str
    updates: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    n: np.ndarray


def mean_std(values: Sequence[float] | np.ndarray) -> Cell:
    """Mean, sample std (``ddof=1``; ``None`` for a single value) and count.

    >>> mean_std([0.5, 0.7, 0.9])
    Cell(mean=0.7, std=0.2, n=3)
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("mean_std of no values")
    scale = float(np.max(np.abs(x)))
    if scale > 1e150:  # sums of values near 1e308 overflow: compute on x / scale (exact elsewhere, as before)
        y = x / scale
        std = float(np.std(y, ddof=DDOF)) * scale if x.size > 1 else None
        return Cell(mean=float(np.mean(y)) * scale, std=std, n=int(x.size))
    std = float(np.std(x, ddof=DDOF)) if x.size > 1 else None
    return Cell(mean=round(float(np.mean(x)), 12), std=None if std is None else round(std, 12), n=int(x.size))


def iqm(values: np.ndarray | Sequence[float], axis: int | None = None) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle 50% (``scipy.stats.trim_mean(x, 0.25)``, rliable's IQM)."""
    return trim_mean(np.asarray(values, dtype=np.float64), 0.25, axis=axis)


def stratified_bootstrap_ci(tasks: Sequence[np.ndarray | Sequence[float]] | np.ndarray, *,
                            statistic: Callable[..., np.ndarray | float] = iqm, reps: int = 10_000,
                            confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` (default: the IQM) over all runs of all tasks, resampling runs
    within each task: the package's one bootstrap, :func:`agentbench_crbc.bench.stats.stratified_bootstrap_ci`.

    :param tasks: one array of per-run scores per task (tasks may have different run counts), or a
        ``(runs, tasks)`` matrix as rliable takes it.
    :param statistic: called as ``statistic(samples, axis=1)`` on a ``(reps, values)`` array.
    :param seed: the generator seed; the same seed gives the same interval.
    """
    from ..bootstrap import stratified_bootstrap_ci as one

    return one(tasks, statistic=statistic, reps=reps, confidence=confidence, seed=seed)


def scale_sort_key(scale: str) -> tuple[int, float, str]:
    """Order model scales by size (``tiny-1M`` < ``135M`` < ``1.5B`` < ``7B``), unsized labels (``api``) last."""
    m = re.search(r"(\d+(?:\.\d+)?)([KMB])", scale)
    if not m:
        return (1, 0.0, scale)
    return (0, float(m.group(1)) * {"K": 1e3, "M": 1e6, "B": 1e9}[m.group(2)], scale)


def _env_key(name: str, order: Sequence[str] | None = None) -> tuple[int, str]:
    order = env_order() if order is None else order
    return (order.index(name) if name in order else len(order), name)


def _subtask_key(name: str, order: Sequence[str] | None = None) -> tuple[int, int, str]:
    order = subtask_order() if order is None else order
    if name == "all":
        return (2, 0, name)
    if name in order:
        return (0, order.index(name), name)
    return (1, 0, name)


def _weighted(recs: Iterable[RunRecord], metric: str) -> float | None:
    pairs = [(getattr(r, metric), r.n_episodes) for r in recs]
    if not pairs or any(v is None or n is None for v, n in pairs):
        return None
    total = sum(n for _, n in pairs if n is not None)
    mean = sum(v * n for v, n in pairs if v is not None and n is not None) / total
    if not math.isfinite(mean):  # scores near 1e308 overflow the weighted sum: weigh first
        mean = sum(v * (n / total) for v, n in pairs if v is not None and n is not None)
    return mean


def _per_seed(recs: Sequence[RunRecord]) -> dict[tuple[int | None, str | None], dict[str, RunRecord]]:
    """Records by run: ``(seed, run)``, so two runs with one seed (a user's and a shipped one) are two samples."""
    out: dict[tuple[int | None, str | None], dict[str, RunRecord]] = defaultdict(dict)
    for r in recs:
        out[(r.seed, r.run)][r.subtask] = r
    return out


def _seed_value(by_sub: Mapping[str, RunRecord], subtask: str, metric: str) -> float | None:
    if subtask in by_sub:
        return getattr(by_sub[subtask], metric)
    if subtask == "all":
        return _weighted([r for s, r in by_sub.items() if s != "all"], metric)
    return None


def _measured_entry(key: tuple[str, str, str, str, str], recs: Sequence[RunRecord], subtasks: Sequence[str],
                    reps: int, seed: int) -> Entry:
    method, model, scale, source, kind = key
    final = max(r.update for r in recs)
    seeds = _per_seed([r for r in recs if r.update == final])
    cells: dict[str, dict[str, Cell]] = {"success": {}, "score": {}}
    for metric in ("success", "score"):
        for sub in subtasks:
            values = [v for by_sub in seeds.values() if (v := _seed_value(by_sub, sub, metric)) is not None]
            if values:
                cells[metric][sub] = mean_std(values)
    strata = [s for s in subtasks if s != "all"] or ["all"]
    columns = [np.array([v for by_sub in seeds.values() if (v := _seed_value(by_sub, s, "success")) is not None])
               for s in strata]
    pooled = np.concatenate(columns) if columns else np.array([])
    point = ci = None
    if pooled.size:
        point = float(iqm(pooled))
        ci = stratified_bootstrap_ci(columns, reps=reps, seed=seed)
    return Entry(method=method, model=model, model_scale=scale, source=source, kind=kind, citation=None,
                 update=final, success=cells["success"], score=cells["score"], iqm=point, ci=ci)


def _reported_entry(key: tuple[str, str, str, str, str], recs: Sequence[RunRecord]) -> Entry:
    method, model, scale, source, kind = key
    final = max(r.update for r in recs)
    success: dict[str, Cell] = {}
    score: dict[str, Cell] = {}
    for r in recs:
        if r.update != final:
            continue
        if r.success is not None:
            success[r.subtask] = Cell(r.success, r.success_std, r.n_seeds)
        if r.score is not None:
            score[r.subtask] = Cell(r.score, r.score_std, r.n_seeds)
    citations = sorted({r.citation for r in recs if r.citation})
    return Entry(method=method, model=model, model_scale=scale, source=source, kind=kind,
                 citation="; ".join(citations) or None, update=final, success=success, score=score)


def _select(records: Iterable[RunRecord], env: str | None, model_scale: str | None,
            methods: Sequence[str] | None, source: str | None) -> list[RunRecord]:
    wanted = {m.lower() for m in methods} if methods else None
    return [r for r in records
            if (env is None or r.env == env.lower())
            and (model_scale is None or r.model_scale.lower() == model_scale.lower())
            and (wanted is None or r.method.lower() in wanted)
            and (source is None or r.source == source)]


def build_boards(records: Iterable[RunRecord], *, env: str | None = None, model_scale: str | None = None,
                 methods: Sequence[str] | None = None, source: str | None = None, reps: int = 10_000,
                 seed: int = 0) -> list[Board]:
    """One :class:`Board` per (env, model_scale) among the selected records, envs by name, scales by size.

    Entries keep the order of their first record (reported rows first when the reported table was imported first).
    :param reps: bootstrap replicates for the IQM interval; :param seed: its generator seed.
    """
    selected = _select(records, env, model_scale, methods, source)
    BoardKey = tuple[str, str, bool, "int | None", "str | None", bool, "str | None"]
    groups: dict[BoardKey, dict[tuple[str, str, str, str, str], list[RunRecord]]] = defaultdict(dict)
    for r in selected:
        measured = r.source == "measured"
        budget = r.budget if measured and r.kind == "rl" else None
        board = (r.env, r.model_scale, measured, budget, r.revision if measured else None, measured and r.cut,
                 r.machine if measured else None)
        groups[board].setdefault((r.method, r.model, r.model_scale, r.source, r.kind), []).append(r)
    # measured references without RL updates (imitation, prompting) join every RL board of their code revision
    # measured on the same machine
    for key in [k for k in groups if k[2] and k[3] is None]:
        hosts = [k for k in groups if k[:3] == key[:3] and k[4] == key[4] and k[6] == key[6] and k[3] is not None
                 and not k[5]]
        if hosts and all(e[4] != "rl" for e in groups[key]):
            refs = groups.pop(key)
            for h in hosts:
                groups[h].update(refs)
    boards = []
    envs, subs = env_order(), subtask_order()

    def order(k: BoardKey) -> tuple:
        return (_env_key(k[0], envs), scale_sort_key(k[1]), k[2], -1 if k[3] is None else k[3], k[4] or "", k[5],
                k[6] or "")

    for key in sorted(groups, key=order):
        env_name, scale, measured, budget, revision, cut, machine = key
        entries_recs = groups[key]
        subtasks = {r.subtask for recs in entries_recs.values() for r in recs}
        if measured:
            subtasks.add("all")
        ordered = tuple(sorted(subtasks, key=lambda t: _subtask_key(t, subs)))
        entries = tuple(_measured_entry(k, recs, ordered, reps, seed) if measured
                        else _reported_entry(k, recs) for k, recs in entries_recs.items())
        versions = tuple(sorted({r.package_version for recs in entries_recs.values() for r in recs}))
        boards.append(Board(env=env_name, model_scale=scale, subtasks=ordered, entries=entries, budget=budget,
                            revision=revision, versions=versions, measured=measured, cut=cut, machine=machine))
    return boards


def learning_curves(records: Iterable[RunRecord], *, env: str, model_scale: str | None = None,
                    methods: Sequence[str] | None = None) -> dict[str, list[Curve]]:
    """Measured success on ``all`` per update (mean, std, n over seeds), keyed by model scale.

    Only (method, model) pairs evaluated at two or more update numbers give a curve.
    """
    selected = _select(records, env, model_scale, methods, "measured")
    groups: dict[tuple[str, str, str], list[RunRecord]] = defaultdict(list)
    for r in selected:
        groups[(r.model_scale, r.method, r.model)].append(r)
    out: dict[str, list[Curve]] = defaultdict(list)
    for (scale, method, model), recs in groups.items():
        by_update: dict[int, list[RunRecord]] = defaultdict(list)
        for r in recs:
            by_update[r.update].append(r)
        if len(by_update) < 2:
            continue
        updates, means, stds, ns = [], [], [], []
        for u in sorted(by_update):
            values = [v for by_sub in _per_seed(by_update[u]).values()
                      if (v := _seed_value(by_sub, "all", "success")) is not None]
            if not values:
                continue
            cell = mean_std(values)
            updates.append(u)
            means.append(cell.mean)
            stds.append(cell.std or 0.0)
            ns.append(cell.n)
        if len(updates) >= 2:
            out[scale].append(Curve(method=method, model=model, updates=np.array(updates), mean=np.array(means),
                                    std=np.array(stds), n=np.array(ns)))
    return dict(sorted(out.items(), key=lambda kv: scale_sort_key(kv[0])))
