"""A run its time cap stopped: the summary's last lines say so, results.json carries updates done vs planned and
``cut``, eval/records.jsonl carries the updates done, and the leaderboard keeps it apart from full runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.leaderboard.aggregate import build_boards
from agentbench_crbc.leaderboard.records import RunRecord, read_records
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.cut import mark_records
from agentbench_crbc.trainer.eval import summarize
from agentbench_crbc.trainer.resume import RunState
from agentbench_crbc.trainer.validations import Validation, Validations


def _record(update: int, budget: int | None, kind: str = "rl", run: str = "r0", method: str = "crbc",
            seed: int = 0) -> RunRecord:
    return RunRecord.measured(env="sokoban", subtask="all", model="tiny", model_scale="tiny-1M", method=method,
                              seed=seed, update=update, success=0.5, n_episodes=8, config_hash="h", kind=kind,
                              run=run, budget=budget, revision="aaa", date="2026-12-05")


def _run(tmp_path: Path, updates_done: int, planned: int) -> tuple[Path, dict, list[str]]:
    cfg = load_config(overrides=[f"updates={planned}", "max_minutes=30", f"out_dir={tmp_path}"])
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "records.jsonl").write_text(
        "".join(json.dumps(_record(u, planned).to_dict()) + "\n" for u in (0, updates_done)))
    (run / "metrics.jsonl").write_text("".join(json.dumps(
        {"stage": "rl", "step": u, "success": 0.5, "kl": 0.01, "approx_kl_end": 0.01 * u, "invalid": 0.1 * u,
         "adv_mean": 0.0, "adv_std": 1.0}) + "\n" for u in range(1, updates_done + 1)))
    before = Validation(0, {"t0.4": {"success": 0.25}})
    state = RunState(stage="rl", update=updates_done, evals=Validations({"before": before}))
    said: list[str] = []
    out = summarize(cfg, state, run, {"t0.4": {"success": 0.5, "n_episodes": 8, "stderr": 0.1}}, 1.0, main=True,
                    say=said.append)
    return run, out, said


def test_a_cut_run_says_so_last_and_its_records_carry_the_updates_done(tmp_path: Path) -> None:
    run, out, said = _run(tmp_path, updates_done=7, planned=60)
    assert (out["updates"], out["updates_planned"], out["cut"]) == (7, 60, True)
    assert json.loads((run / "results.json").read_text())["cut"] is True
    assert said[-2].startswith("CUT SHORT: the time cap (max_minutes=30) stopped RL after update 7 of 60")
    assert said[-1] == f"  finish it with `abc train --resume {run} --set max_minutes=0`; on a busy machine see " \
                       "README.md (the CPU default)"
    rows = read_records(run / "eval" / "records.jsonl")
    assert [(r.update, r.budget, r.cut) for r in rows] == [(0, 7, True), (7, 7, True)]
    # the README table's training numbers, measured here: largest approx_kl_end 0.07, invalid mean 0.4, max 0.7
    assert "  RL: 7 of 60 updates: largest approx_kl_end of an update 0.070; invalid answers 40.0% of training " \
           "answers (largest update 70.0%)" in said


def test_a_full_run_is_not_cut_and_a_finished_resume_gets_its_budget_back(tmp_path: Path) -> None:
    run, out, said = _run(tmp_path, updates_done=3, planned=3)
    assert (out["updates"], out["updates_planned"], out["cut"]) == (3, 3, False)
    assert not any("CUT" in line for line in said)
    path = run / "eval" / "records.jsonl"
    path.write_text("".join(json.dumps({**r.to_dict(), "budget": 1, "cut": True}) + "\n"
                            for r in read_records(path)))  # as a cut session left them
    assert mark_records(run, budget=3, cut=False) == 2
    assert [(r.budget, r.cut) for r in read_records(path)] == [(3, False), (3, False)]


def test_unmeasured_training_numbers_are_not_printed(tmp_path: Path) -> None:
    from agentbench_crbc.trainer.metrics import rl_stats

    assert rl_stats([{"stage": "rl", "step": 1, "approx_kl_end": float("nan")}, {"stage": "eval"}]) == {}


def test_boards_never_put_a_cut_run_beside_full_runs() -> None:
    import dataclasses

    full = [_record(7, 7, seed=s, run=f"f{s}") for s in range(2)]
    cut = [dataclasses.replace(_record(7, 7, seed=s, run=f"c{s}", method="grpo"), cut=True) for s in range(2)]
    boards = build_boards(full + cut)
    assert sorted((b.cut, tuple(e.method for e in b.entries)) for b in boards) == [(False, ("crbc",)),
                                                                                 (True, ("grpo",))]
    assert [b.section for b in boards if b.cut] == ["7 updates (runs cut by their time cap), commit aaa, version "
                                                    f"{cut[0].package_version}, CPU not recorded"]
    with pytest.raises(Exception, match="cut must be true or false"):
        dataclasses.replace(full[0], cut=1)


def test_leaderboard_add_refuses_a_cut_run_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _, _ = _run(tmp_path, updates_done=2, planned=60)
    store = tmp_path / "store.jsonl"
    assert main(["leaderboard", "add", str(run), "--records", str(store)]) == 2
    err = capsys.readouterr().err
    assert "was cut by its time cap after 2 updates" in err and "--allow-cut" in err and not store.exists()
    assert main(["leaderboard", "add", str(run), "--records", str(store), "--allow-cut"]) == 0
    assert "(cut by its time cap: a board of its own, marked)" in capsys.readouterr().out
    assert all(r.cut for r in read_records(store))


@pytest.mark.slow
def test_a_tiny_time_cap_cuts_a_real_run(tmp_path: Path) -> None:
    """``abc train`` with a cap that fires after the first update: the loop stops, the summary ends saying so."""
    from ._util import run_abc, set_args

    r = run_abc(["train", "--credit", "grpo", *set_args(["updates=50", "max_minutes=0.0001", "sft.steps=0",
                                                         "rollout.groups=1",
                                                         "rollout.group_size=2", "eval.episodes=2", "eval.samples=1",
                                                         "eval.greedy=false", "eval.train_temperature=false",
                                                         "eval.references=false", "progress=false",
                                                         "tensorboard=false", f"out_dir={tmp_path}"])],
                cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert "OpenMP waiting: passive" in lines[2]
    m = re.match(r"CUT SHORT: the time cap \(max_minutes=0.0001\) stopped RL after update (\d+) of 50;", lines[-2])
    assert m is not None, lines[-3:]
    done = int(m.group(1))  # the cap is checked before each update: 0 or 1 here, never all 50
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    results = json.loads((run / "results.json").read_text())
    assert (results["updates"], results["updates_planned"], results["cut"]) == (done, 50, True) and done < 50
    assert {(x.budget, x.cut) for x in read_records(run / "eval" / "records.jsonl") if x.kind == "rl"} == \
        {(done, True)}
