"""Trajectories an env failure ended (``error`` set) are left out of their group and get zero credit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.credit import assign
from agentbench_crbc.credit.types import Group, Step, Trajectory
from agentbench_crbc.errors import RecordError

from .toy import toy


def _crashed(rec: dict) -> dict:
    return {**rec, "success": False, "error": "env worker 0 lost: worker process died (exit code -9)"}


@pytest.mark.parametrize("method", ["grpo", "rloo", "gigpo", "crbc"])
def test_errored_records_get_zero_credit_and_do_not_move_the_others(method):
    healthy = toy()
    mixed = [healthy[0], _crashed(healthy[1]), healthy[1], healthy[2], _crashed(healthy[0]), healthy[3]]
    got = assign(method, mixed)
    want = assign(method, healthy)
    assert [a.tolist() for a in got[1::3]] == [[0.0] * 3, [0.0] * 2]
    assert [a.tolist() for a in got[0:1] + got[2:4] + got[5:]] == [a.tolist() for a in want]


def test_groups_with_an_errored_trajectory_are_handled_like_records():
    def traj(actions, success, error=None):
        return Trajectory(tuple(Step(a, a) for a in actions), success, error=error)

    group = Group("g", (traj("ab", True), traj("ac", False, error="hung"), traj("ad", False)))
    got = assign("grpo", [group])
    assert got[1].tolist() == [0.0, 0.0]
    assert np.allclose(got[0], 0.7071, atol=1e-4) and np.allclose(got[2], -0.7071, atol=1e-4)


def test_all_errored_gives_zeros_and_bad_error_field_is_rejected():
    assert [a.tolist() for a in assign("crbc", [_crashed(r) for r in toy()[:2]])] == [[0.0, 0.0], [0.0] * 3]
    with pytest.raises(RecordError, match=r"record 1: 'error' must be a string or null"):
        assign("grpo", [{**toy()[0], "error": 3}])


def test_cli_writes_zero_advantages_for_errored_records(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*toy(), _crashed(toy()[0])]))
    assert main(["credit", "grpo", str(path)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[-1]["advantages"] == [0.0, 0.0] and out[0]["advantages"][0] == pytest.approx(0.866, abs=1e-3)
