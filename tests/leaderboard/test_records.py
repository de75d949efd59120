"""RunRecord schema, the JSONL store (round trip, duplicates, malformed lines, atomic writes) and the paper import."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

import pytest

from agentbench_crbc.errors import RecordError
from agentbench_crbc.leaderboard import records as records_mod
from agentbench_crbc.leaderboard.records import RunRecord, add_records, env_name, read_records, write_records
from agentbench_crbc.leaderboard.reported import CRBC_PAPER_CITATION, model_scale, read_reported_csv

from .helpers import PAPER_CSV, rec, two_method_run


@pytest.mark.parametrize("name", ["records", "reported", "aggregate", "report"])
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(f"agentbench_crbc.leaderboard.{name}")
    # ruff's RUF022 order (isort style): CONSTANTS, then Classes, then functions, each alphabetical
    assert list(mod.__all__) == sorted(mod.__all__, key=lambda s: (not s.isupper(), not s[0].isupper(), s))
    for attr in mod.__all__:
        assert getattr(mod, attr) is not None


def test_round_trip_records_file_records(tmp_path: Path) -> None:
    recs = two_method_run() + read_reported_csv(PAPER_CSV, date="2026-11-29")
    path = tmp_path / "records.jsonl"
    write_records(path, recs)
    back = read_records(path)
    assert back == recs
    lines = path.read_text().splitlines()
    assert len(lines) == len(recs)
    assert all(list(json.loads(line)) == [f.name for f in dataclasses.fields(RunRecord)] for line in lines)


def test_record_is_frozen_and_keyed() -> None:
    r = rec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.success = 1.0  # type: ignore[misc]
    assert r.key == ("alfworld", "all", "tiny-qwen2", "tiny-1M", "crbc", 0, 10, None)


@pytest.mark.parametrize(("change", "message"), [
    ({"success": 1.5}, "success must be a fraction in [0, 1]"),
    ({"success": float("nan")}, "success must be a finite number"),
    ({"seed": True}, "seed must be an integer"),
    ({"seed": None}, "a measured record needs seed"),
    ({"n_episodes": 0}, "n_episodes must be an integer >= 1"),
    ({"config_hash": None}, "a measured record needs config_hash"),
    ({"update": -1}, "update must be an integer >= 0"),
    ({"env": "abc/ALFWorld-v0"}, "must be a short lowercase name"),
    ({"source": "guessed"}, "source 'guessed' must be one of measured, reported"),
    ({"date": "29/11/2026"}, "must be ISO 8601"),
    ({"success_std": 0.1}, "success_std is for reported aggregates"),
    ({"method": ""}, "field 'method' must be a non-empty string"),
    ({"source": "reported", "seed": None}, "a reported record needs a citation"),
])
def test_schema_refuses_bad_values(change: dict, message: str) -> None:
    data = rec().to_dict() | change
    with pytest.raises(RecordError, match=message.replace("[", r"\[").replace("]", r"\]")):
        RunRecord.from_dict(data, "x.jsonl:3")


def test_from_dict_names_unknown_and_missing_fields() -> None:
    data = rec().to_dict()
    with pytest.raises(RecordError, match=r"^x:7: unknown field\(s\) sucess; allowed: env, "):
        RunRecord.from_dict(data | {"sucess": 1.0}, "x:7")
    del data["model_scale"]
    with pytest.raises(RecordError, match=r"^x:7: missing field\(s\) model_scale"):
        RunRecord.from_dict(data, "x:7")


def test_measured_constructor_stamps_version_and_date() -> None:
    from agentbench_crbc import __version__

    r = RunRecord.measured(env="sokoban", subtask="all", model="m", model_scale="tiny-1M", method="grpo", seed=1,
                           update=3, success=0.25, n_episodes=8, config_hash="h")
    assert r.package_version == __version__ and r.source == "measured" and len(r.date) == 10


def test_env_name_from_gym_ids() -> None:
    assert env_name("abc/ALFWorld-v0") == "alfworld"
    assert env_name("abc/Sokoban-6x6-v0") == "sokoban"
    assert env_name("webshop") == "webshop"
    with pytest.raises(RecordError):
        env_name("???")


def test_store_refuses_duplicate_lines_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    line = json.dumps(rec().to_dict())
    path.write_text(f"{line}\n\n{json.dumps(rec(seed=1).to_dict())}\n{line}\n")
    with pytest.raises(RecordError, match=rf"^{path}:4: duplicate record .* already at line 1"):
        read_records(path)


def test_store_names_file_and_line_of_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(rec().to_dict()) + "\n{not json\n")
    with pytest.raises(RecordError, match=rf"^{path}:2: not valid JSON"):
        read_records(path)
    path.write_text(json.dumps(rec().to_dict()).replace("0.5", "NaN") + "\n")
    with pytest.raises(RecordError, match=rf"^{path}:1: field 'success' holds NaN, which is not a finite number"):
        read_records(path)


def test_add_records_refuses_duplicates_and_leaves_store_unchanged(tmp_path: Path) -> None:
    store = tmp_path / "records.jsonl"
    assert add_records(store, [rec(seed=0), rec(seed=1)]) == 2
    before = store.read_bytes()
    run = tmp_path / "eval.jsonl"
    run.write_text(json.dumps(rec(seed=2).to_dict()) + "\n" + json.dumps(rec(seed=1).to_dict()) + "\n")
    with pytest.raises(RecordError, match=rf"^{run}:2: duplicate record .* already in {store}:2; it was added"):
        add_records(store, run)
    assert store.read_bytes() == before
    assert add_records(store, run, replace=True) == 2
    assert [r.seed for r in read_records(store)] == [0, 1, 2]


def test_atomic_write_leaves_old_file_intact_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "records.jsonl"
    write_records(store, [rec(seed=0)])
    before = store.read_bytes()
    calls = {"n": 0}
    real_dumps = json.dumps

    def failing_dumps(*args: object, **kwargs: object) -> str:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real_dumps(*args, **kwargs)

    monkeypatch.setattr(records_mod.json, "dumps", failing_dumps)
    with pytest.raises(OSError, match="disk full"):
        write_records(store, [rec(seed=0), rec(seed=1), rec(seed=2)])
    assert calls["n"] == 2  # it failed half way through the new content
    assert store.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl"]  # no temp file left behind


def test_reported_csv_import_rows_marked_reported() -> None:
    recs = read_reported_csv(PAPER_CSV)
    # 198 data lines: 147 ALFWorld success rows, 21 WebShop and 4 Sokoban (score + success merged), 1 Sokoban prompt
    assert len(recs) == 147 + 21 + 5 == 173
    assert {r.source for r in recs} == {"reported"}
    assert {r.citation for r in recs} == {CRBC_PAPER_CITATION}
    assert all(r.seed is None and r.n_episodes is None and r.config_hash is None for r in recs)
    crbc = {(r.env, r.model_scale, r.subtask): r for r in recs if r.method == "crbc"}
    web = crbc[("webshop", "1.5B", "all")]
    assert (web.score, web.success, web.score_std, web.success_std, web.n_seeds) == (90.11, 0.8151, 1.24, 0.0074, 3)
    assert web.update == 150 and web.kind == "rl"
    assert crbc[("sokoban", "3B", "all")].model == "Qwen2.5-VL-3B-Instruct"
    gpt = [r for r in recs if r.method == "gpt-4o"]
    assert {r.model_scale for r in gpt} == {"api"} and {r.update for r in gpt} == {0}
    assert len({r.key for r in recs}) == len(recs)


@pytest.mark.parametrize(("model", "scale"), [("Qwen2.5-1.5B-Instruct", "1.5B"), ("Qwen2.5-7B-Instruct", "7B"),
                                              ("Qwen2.5-VL-3B-Instruct", "3B"), ("SmolLM2-135M-Instruct", "135M"),
                                              ("gpt-4o", "api"), ("gemini-2.5-pro", "api")])
def test_model_scale_labels(model: str, scale: str) -> None:
    assert model_scale(model) == scale


def test_reported_csv_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "r.csv"
    bad.write_text("# comment\nenv,model,type,method,subtask,metric,mean,std,seeds\n"
                   "alfworld,m-1B,rl,CRBC,pick,success_pct,50,,\nalfworld,m-1B,rl,CRBC,pick,accuracy,50,,\n")
    with pytest.raises(RecordError, match=rf"^{bad}:4: metric 'accuracy' must be success_pct or score"):
        read_reported_csv(bad)
    bad.write_text("env,model,type,method,subtask,metric,mean,std,seeds\nalfworld,m-1B,rl,CRBC,pick,success_pct,"
                   "150,,\n")
    with pytest.raises(RecordError, match=rf"^{bad}:2: success must be a fraction"):
        read_reported_csv(bad)
