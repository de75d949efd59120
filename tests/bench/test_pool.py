"""``abc bench`` cells in parallel: on a process pool by default, as Ray tasks with ``--ray-address``; each row is
written as its cell ends, so a rerun after a raised cell or a killed worker runs only what did not finish."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import pytest

from agentbench_crbc.bench import learning
from agentbench_crbc.bench.pool import ProcessRunner, default_workers, open_runner
from agentbench_crbc.cli import main as abc_main
from agentbench_crbc.leaderboard.records import read_records

RL_SECONDS = {"grpo": 60.0, "gigpo": 120.0, "crbc": 90.0}  # median 90 s: the control imitates for 1.5 min


def fake_work(cell, out, warm_dir, minutes, updates):
    """A cell in a pool worker without training: it checks what the scheduler promised and logs the call."""
    flags = out / "flags"
    with (out / "calls.txt").open("a") as fh:
        fh.write(f"{cell.label}\n")
    if (flags / f"raise-{cell.label}").exists():
        raise ValueError(f"{cell.label} failed on purpose")
    if (flags / f"kill-{cell.label}").exists():
        os._exit(9)  # the worker process dies without a word, as when it is killed
    if cell.kind != "warm":
        assert (warm_dir / "model").is_dir(), "an RL run or the control started before its warm start ended"
    if cell.kind == "control":
        assert minutes == pytest.approx(1.5), minutes
    run_dir = out / f"run-{cell.label}"
    # exist_ok: a cell running beside a killed one loses its result with the broken pool although its folder may
    # be written; the rerun redoes it into the same folder (a real run makes a fresh timestamped one)
    (run_dir / "model").mkdir(parents=True, exist_ok=True)
    facts = {"evals": {}, "episodes": {}, "train_success": [], "rl_seconds": RL_SECONDS.get(cell.label, 0.0),
             "rl_samples": 0, "sft_steps": 0, "sft_samples": 0}
    return {"run_dir": str(run_dir), "seconds": 0.1, "facts": facts, "records": []}


def _calls(out: Path) -> list[str]:
    return (out / "calls.txt").read_text().split() if (out / "calls.txt").exists() else []


def _labels(out: Path) -> list[str]:
    return [json.loads(ln)["label"] for ln in (out / "bench.jsonl").read_text().splitlines()]


def _execute(out: Path, workers: int = 2) -> list[dict]:
    cells = learning.plan("quick")  # warmstart, grpo, gigpo, crbc, imitation
    runner = ProcessRunner(workers)
    try:
        return learning.execute("quick", cells, out, out / "records.jsonl", runner=runner, work=fake_work)
    finally:
        runner.close()


def test_the_pool_respects_dependencies_and_a_rerun_runs_only_what_raised(tmp_path) -> None:
    (tmp_path / "flags").mkdir()
    (tmp_path / "flags" / "raise-crbc").touch()
    with pytest.raises(learning.CellsFailed, match=r"^2 run\(s\) did not finish: sokoban seed 0 crbc \(ValueError: "
                       r"crbc failed on purpose\); sokoban seed 0 imitation \(an RL run of its seed did not finish"):
        _execute(tmp_path)
    assert sorted(_labels(tmp_path)) == ["gigpo", "grpo", "warmstart"]  # each row written as its cell ended
    assert sorted(_calls(tmp_path)) == ["crbc", "gigpo", "grpo", "warmstart"]  # the control never started
    (tmp_path / "flags" / "raise-crbc").unlink()
    (tmp_path / "calls.txt").unlink()
    rows = _execute(tmp_path)
    assert _calls(tmp_path) == ["crbc", "imitation"]  # the finished runs and the warm start are not redone
    labels = [r["label"] for r in rows]  # written as they ended: grpo and gigpo ran side by side, in either order
    assert labels[0] == "warmstart" and sorted(labels[1:3]) == ["gigpo", "grpo"] and labels[3:] == ["crbc", "imitation"]
    assert rows[-1]["control_minutes"] == pytest.approx(1.5)
    assert _execute(tmp_path) == rows and _calls(tmp_path) == ["crbc", "imitation"]  # all done: nothing runs


def test_a_killed_worker_loses_its_cell_and_a_rerun_redoes_only_the_unfinished(tmp_path) -> None:
    (tmp_path / "flags").mkdir()
    (tmp_path / "flags" / "kill-gigpo").touch()
    with pytest.raises(learning.CellsFailed, match=r"sokoban seed 0 gigpo \(its worker process died \(killed, or "
                       r"out of memory\)\).*run the same command again to run only the rest$"):
        _execute(tmp_path)
    first = _labels(tmp_path)
    assert "warmstart" in first and "gigpo" not in first and "imitation" not in first
    (tmp_path / "flags" / "kill-gigpo").unlink()
    (tmp_path / "calls.txt").unlink()
    rows = _execute(tmp_path)
    assert sorted(_calls(tmp_path)) == sorted({"warmstart", "grpo", "gigpo", "crbc", "imitation"} - set(first))
    assert sorted(r["label"] for r in rows) == ["crbc", "gigpo", "grpo", "imitation", "warmstart"]


def test_workers_default_to_the_cores_and_are_checked(capsys) -> None:
    assert default_workers() == len(os.sched_getaffinity(0))
    runner = open_runner()
    try:
        assert runner.workers == default_workers() and "one torch thread each" in runner.describe()
    finally:
        runner.close()
    with pytest.raises(SystemExit) as exc:
        abc_main(["bench", "--workers", "0", "--dry-run"])
    assert exc.value.code == 2 and "--workers" in capsys.readouterr().err


def test_a_bad_ray_address_is_one_line_and_a_nonzero_exit(tmp_path, capsys) -> None:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: pip install 'agentbench-crbc[ray]'")
    code = abc_main(["bench", "--ray-address", "127.0.0.1:1", "--out", str(tmp_path / "out"),
                     "--records", str(tmp_path / "r.jsonl"), "--render", str(tmp_path / "board")])
    err = capsys.readouterr().err
    assert code != 0
    assert err.strip().splitlines() == [
        "abc bench: error: cannot reach a Ray cluster at '127.0.0.1:1': nothing answers at 127.0.0.1:1 (Connection "
        "refused); start one with `ray start --head` and give `auto`, `ray://HEAD:10001` or HEAD:6379"]
    assert not (tmp_path / "out" / "bench.jsonl").exists()


# the short-run settings of docs/training.md ("A short run"): a cell takes seconds
SHORT = ["sft.batch_size=8", "sft.pool=64", "sft.warmup=1", "rollout.max_response_tokens=5", "env.max_steps=4",
         "optim.micro_batch=64", "eval.greedy=false"]
WALL = {"run_dir", "command", "seconds", "rl_seconds", "control_minutes"}  # where and how long: not the result


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a loaded 2-core machine: the pool half alone took 7 min
def test_a_two_cell_grid_gives_identical_rows_on_the_pool_and_on_local_ray(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch", reason="trains a tiny model: needs the train extra")
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: pip install 'agentbench-crbc[ray]'")
    tiny = dataclasses.replace(learning.MODES["quick"], variants=("grpo",), warm_steps=2, updates=1, groups=2,
                               group_size=2, eval_episodes=4)
    monkeypatch.setitem(learning.MODES, "tiny", tiny)  # the driver plans; workers get the cells' overrides
    rows = {}
    for name, flags in (("pool", ["--workers", "2"]), ("ray", ["--ray-address", "local", "--workers", "2"])):
        out = tmp_path / name
        argv = ["--mode", "tiny", "--method", "grpo", "--out", str(out), "--records", str(out / "records.jsonl"),
                "--render", str(out / "board"), *flags, *(x for kv in SHORT for x in ("--set", kv))]
        assert learning.main(argv) == 0
        rows[name] = [{k: v for k, v in r.items() if k not in WALL}
                      for r in map(json.loads, (out / "bench.jsonl").read_text().splitlines())]
        assert [r["label"] for r in rows[name]] == ["warmstart", "grpo"]
        # the RL run's records (updates 0 and 1) were added to the store by the driver as the cell ended
        recs = read_records(out / "records.jsonl")
        assert rows[name][1]["records_added"] == len(recs) > 0 and {r.update for r in recs} == {0, 1}
    assert rows["pool"] == rows["ray"]
    assert rows["pool"][1]["evals"]["1"]["t0.4"] is not None and len(rows["pool"][1]["train_success"]) == 1


def test_runs_started_together_get_a_run_folder_each(tmp_path, monkeypatch) -> None:
    # crbc and crbc_depth1 of one seed share out_dir, env, credit and seed: started in the same second in two
    # workers, both saw the name free (exists()) before either made it (mkdir): the second failed
    from types import SimpleNamespace

    from agentbench_crbc.trainer.run import make_run_dir

    cfg = SimpleNamespace(out_dir=str(tmp_path / "runs"), env=SimpleNamespace(name="sokoban"),
                          credit=SimpleNamespace(name="crbc"), model=SimpleNamespace(name="tiny"), seed=0)
    monkeypatch.setattr(Path, "exists", lambda self: False)  # every check comes before the other's mkdir
    made = [make_run_dir(cfg) for _ in range(3)]  # type: ignore[arg-type]
    assert len(set(made)) == 3 and all(p.is_dir() for p in made)


def stubborn(seconds: float) -> int:
    """A cell that ignores SIGTERM (what a worker busy in C code, or a handler that only flags, looks like)."""
    import os
    import signal
    import time

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(seconds)
    return os.getpid()


@pytest.mark.slow
def test_an_interrupted_pool_stops_its_workers_within_the_grace_even_one_that_ignores_sigterm(monkeypatch) -> None:
    """#51 item 5: an interrupted driver (Ctrl-C, or SIGTERM through interrupt_on_sigterm) does not wait for its
    cells: close(abort=True) sends SIGTERM, kills what is left after the grace, and leaves no worker running."""
    import time

    from agentbench_crbc.bench import pool

    monkeypatch.setattr(pool, "STOP_GRACE_S", 2.0)
    runner = ProcessRunner(1)
    fut = runner.submit(stubborn, 300)
    deadline = time.monotonic() + 120
    procs = []
    while not procs or not all(p.is_alive() for p in procs):  # the spawned worker is up
        procs = list((runner._pool._processes or {}).values())
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(3)  # the cell is running (and ignores SIGTERM)
    t0 = time.monotonic()
    runner.close(abort=True)
    assert time.monotonic() - t0 < 15
    assert not any(p.is_alive() for p in procs) and fut.done()


def test_sigterm_inside_interrupt_on_sigterm_is_a_keyboard_interrupt() -> None:
    import os
    import signal

    from agentbench_crbc.bench.pool import interrupt_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), interrupt_on_sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs at the next bytecode boundary
            pass
    assert signal.getsignal(signal.SIGTERM) is before
