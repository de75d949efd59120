"""The learning benchmark's scheduler: runs each cell on a worker as soon as what it needs has finished, records it."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pkgutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AbcError, ConfigError, UnknownNameError
from ..host import get_host
from ..io import json_text, read_json, read_text, text_lines
from .plan import CONTROL, MODEL, MODES, SCALE, WARM, Cell, command, variants

if TYPE_CHECKING:
    from .pool import Runner

__all__ = ["CellsFailed", "cell_config", "execute", "import_tree", "preload", "read_jsonl", "run_cell", "work_cell"]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
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


def run_cell(cell: Cell, out: Path, *, warm_dir: Path | None, minutes: float | None,
             share_before: bool = True) -> Path:
    """Train one cell in this process (the trainer's public ``load_config`` and ``train``); returns its run folder.

    ``share_before``: an RL cell takes its validation before RL from its seed's warm start (:func:`_warm_before`)
    instead of computing it again; the side-by-side run in ``tests/bench/test_shared_before.py`` (slow) shows it
    changes no number (facts, records and weights equal)."""
    from ..trainer.loop import train

    get_host().register_gym_ids()
    cfg = cell_config(cell, out, warm_dir, minutes)
    before = _warm_before(cfg, warm_dir) if share_before and cell.kind == "rl" and warm_dir is not None else None
    if before is None:
        return Path(train(cfg)["run_dir"])
    return Path(_train_with_before(cfg, before)["run_dir"])


def cell_config(cell: Cell, out: Path, warm_dir: Path | None, minutes: float | None) -> Any:
    """The resolved trainer config of a cell (its run folder under ``out/ENV/seedN``)."""
    from ..trainer.config import load_config

    overrides = [*cell.overrides, f"out_dir={out / cell.env / f'seed{cell.seed}'}"]
    if minutes is not None:
        overrides.append(f"sft.max_minutes={minutes:.4f}")
    model = str(warm_dir / "model") if warm_dir is not None else None
    cfg = load_config(env=cell.env, credit=cell.credit, model=model, overrides=overrides)
    if cell.kind == "control":
        cfg.exp_name = f"{cell.env}__{CONTROL}"
    return cfg


def _warm_before(cfg: Any, warm_dir: Path) -> dict[str, Any] | None:
    """The warm start's validation (its ``eval/update-0000.json``) when it is the one this RL run would compute
    before RL: the same model (the warm start's), levels, episodes, sampling seed and modes (the cells of a seed
    share every eval override); ``None`` otherwise."""
    from ..trainer.config import to_dict
    from ..trainer.eval import eval_modes

    path = warm_dir / "eval" / "update-0000.json"
    if not path.is_file():
        return None
    warm, mine = read_json(warm_dir / "config.json", error=ConfigError), to_dict(cfg)
    if any(_without(warm.get(k), skip) != _without(mine.get(k), skip) for k, skip in _SAME_BEFORE.items()):
        return None
    res = {k: v for k, v in read_json(path, error=ConfigError).items() if k != "update"}
    return res if list(res) == [name for name, _ in eval_modes(cfg)] else None


#: The config a validation before RL depends on, per section, less the keys that only RL or the model's source use.
_SAME_BEFORE: dict[str, tuple[str, ...]] = {"seed": (), "env": (), "eval": ("every",), "device": (),
                                            "rollout": ("groups", "group_size"), "model": ("name",)}


def _without(section: Any, skip: Sequence[str]) -> Any:
    return {k: v for k, v in section.items() if k not in skip} if isinstance(section, dict) else section


def _train_with_before(cfg: Any, res: dict[str, Any]) -> dict[str, Any]:
    """``train(cfg)`` with the validation before RL given: written to the run folder (records, ``eval/update-0000
    .json``, the metrics row) and kept in the run state as the trainer's own, which then skips computing it."""
    from ..trainer.eval import engine_params, write_eval
    from ..trainer.loop import Trainer
    from ..trainer.validations import BEFORE, Validation

    trainer = Trainer(cfg)
    try:
        write_eval(trainer.run_dir, cfg, 0, res, kind="rl", n_params=engine_params(trainer.engine))
        trainer.state.evals[BEFORE] = Validation(0, {k: {kk: vv for kk, vv in v.items() if kk != "episodes"}
                                                     for k, v in res.items()})
        trainer.log.log(0, {f"val_{k}_success": v["success"] for k, v in res.items()}, stage="eval")
        return trainer.run()
    finally:
        if trainer.lock is not None:
            trainer.lock.release()


#: Imported with every submodule before the first run: other people editing the source tree mid-benchmark cannot
#: break a long run (a module needing an extra that is not installed is skipped; a run never imports it).
_PRELOAD_PACKAGES = ("agentbench_crbc.trainer", "agentbench_crbc.rollout", "agentbench_crbc.leaderboard")
_PRELOAD = ("matplotlib.figure", "pandas", "scipy.stats", "tqdm.auto", "transformers", "safetensors.torch")
#: The fields of an environment family that name modules a run imports (``"module:attr"``).
_FAMILY_REFS = ("expert", "task_key", "imitation")


def import_tree(package: str) -> None:
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
        import_tree(package)
    for env in envs:
        try:
            family = host.family(env)
        except UnknownNameError:  # not a registered family: the trainer reports it at its first run
            continue
        for spec in family.ids:
            importlib.import_module(spec.entry_point.partition(":")[0])
        for attr in _FAMILY_REFS:
            family.load(attr)
    for m in {c for c, _ in variants().values()}:
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
    done = {(r["env"], r["seed"], r["label"]): r for r in read_jsonl(log_path) if r["mode"] == mode}
    todo = list({_key(c): c for c in cells if _key(c) not in done}.values())
    if not todo:
        return [r for r in read_jsonl(log_path) if r["mode"] == mode]
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
    except KeyboardInterrupt:  # stop the running cells rather than wait for them
        if own:
            runner.close(abort=True)
        raise
    finally:
        if own:
            runner.close()
    if failed:
        raise CellsFailed(f"{len(failed)} run(s) did not finish: "
                          + "; ".join(f"{e} seed {s} {lab} ({why})" for (e, s, lab), why in failed.items())
                          + f"; the finished ones are in {log_path}: run the same command again to run only the rest")
    return [r for r in read_jsonl(log_path) if r["mode"] == mode]


