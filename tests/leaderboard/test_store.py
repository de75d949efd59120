"""``abc leaderboard`` outside a checkout (#24 newcomer item): the paper's reported rows ship with the package and a
user's own records live in ``$XDG_DATA_HOME/agentbench-crbc/records.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

from agentbench_crbc.cli import main
from agentbench_crbc.leaderboard.records import read_records, write_records
from agentbench_crbc.leaderboard.store import REPORTED_DATA, user_store

from .helpers import rec

CHECKOUT = Path(__file__).resolve().parents[2] / "leaderboards" / "records.jsonl"


def test_show_works_from_any_folder_with_the_shipped_reported_rows(elsewhere, capsys):
    assert main(["leaderboard", "show", "--env", "alfworld", "--reps", "200"]) == 0
    out = capsys.readouterr().out
    assert "gpt-4o" in out and "reported, not measured here" in out
    assert not (elsewhere / "data").exists()  # showing writes nothing


def test_add_outside_a_checkout_goes_to_the_user_store_and_show_includes_it(elsewhere, capsys):
    run = elsewhere / "run"
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "records.jsonl").write_text(json.dumps(rec(method="mine", env="alfworld").to_dict()) + "\n")
    assert main(["leaderboard", "add", str(run)]) == 0
    store = elsewhere / "data" / "agentbench-crbc" / "records.jsonl"
    assert user_store() == store and f"to {store}" in capsys.readouterr().out
    assert [r.method for r in read_records(store)] == ["mine"]
    assert main(["leaderboard", "show", "--env", "alfworld", "--reps", "200"]) == 0
    out = capsys.readouterr().out
    assert "mine" in out and "gpt-4o" in out


def test_user_store_falls_back_to_local_share(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert user_store() == tmp_path / ".local" / "share" / "agentbench-crbc" / "records.jsonl"


def test_the_shipped_rows_are_the_reported_rows_of_the_checkout_store():
    shipped = read_records(REPORTED_DATA)
    committed = [r for r in read_records(CHECKOUT) if r.source == "reported"]
    assert len(shipped) == 173 and shipped == committed


def test_a_user_row_never_silently_replaces_a_shipped_paper_row(elsewhere, capsys):
    # #31 item 7: a user-store row of a shipped row's key replaced the paper's numbers without a word
    import dataclasses

    shipped = read_records(REPORTED_DATA)[0]
    store = elsewhere / "data" / "agentbench-crbc" / "records.jsonl"
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps(shipped.to_dict()) + "\n")  # the same row (import-reported): fine
    assert main(["leaderboard", "show", "--reps", "200"]) == 0
    capsys.readouterr()
    forged = dataclasses.replace(shipped, success=min(1.0, (shipped.success or 0) + 0.3))
    store.write_text(json.dumps(forged.to_dict()) + "\n")
    assert main(["leaderboard", "show", "--reps", "200"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "shipped reported row" in line and str(store) in line


def test_add_in_a_checkout_leaves_the_committed_store_alone(elsewhere, capsys):
    committed = elsewhere / "cwd" / "leaderboards" / "records.jsonl"
    write_records(committed, [rec(method="paper", env="alfworld", seed=s) for s in range(3)])
    before = committed.read_bytes()
    run = elsewhere / "run"
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "records.jsonl").write_text(json.dumps(rec(method="mine", env="alfworld").to_dict()) + "\n")
    assert main(["leaderboard", "add", str(run)]) == 0
    assert committed.read_bytes() == before and f"to {user_store()}" in capsys.readouterr().out
    assert main(["leaderboard", "show", "--env", "alfworld", "--reps", "200"]) == 0
    out = capsys.readouterr().out
    assert "mine" in out and "paper" in out  # the board reads the committed rows with the user's on top
    assert main(["leaderboard", "add", str(run), "--records", str(committed)]) == 0  # asked by name: written
    assert {r.method for r in read_records(committed)} == {"paper", "mine"}
