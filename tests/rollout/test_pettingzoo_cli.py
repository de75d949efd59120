"""The PettingZoo view of a group and the ``abc rollout`` command (round trip into ``abc credit``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.envs.sokoban.tasks import plan_subtask

from .toyenv import MakeCorridor


def parallel_api_test():
    pytest.importorskip("pettingzoo")
    with warnings.catch_warnings():  # pettingzoo.test imports its deprecated classic envs
        warnings.simplefilter("ignore", DeprecationWarning)
        from pettingzoo.test import parallel_api_test as test
    return test


@pytest.mark.parametrize("env", ["abc/SokobanText-v0", "toy"])
def test_group_view_passes_parallel_api_test(env):
    from agentbench_crbc.rollout.hosting.pettingzoo import GroupParallelEnv

    kw = {"make_env": MakeCorridor()} if env == "toy" else {}
    penv = GroupParallelEnv(env, 4, **kw)
    parallel_api_test()(penv, num_cycles=30)
    obs, infos = penv.reset(seed=3)
    assert penv.agents == ["rollout_0", "rollout_1", "rollout_2", "rollout_3"]
    assert len({str(o) for o in obs.values()}) == 1  # one task for the whole group
    assert all("anchor" in i for i in infos.values())
    penv.close()


def test_group_view_agents_leave_when_done():
    from agentbench_crbc.rollout.hosting.pettingzoo import GroupParallelEnv

    penv = GroupParallelEnv("toy", 2, make_env=MakeCorridor(length=2))
    penv.reset(seed=0)
    _, rew, term, _, infos = penv.step({"rollout_0": "right", "rollout_1": "stay"})
    _, rew, term, _, infos = penv.step({"rollout_0": "right", "rollout_1": "jump"})
    assert term["rollout_0"] and rew["rollout_0"] == 1.0 and infos["rollout_0"]["success"]
    assert not infos["rollout_1"]["action_valid"]
    assert penv.agents == ["rollout_1"]


def test_abc_rollout_writes_records_abc_credit_accepts(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["rollout", "--env", "sokoban", "--policy", "expert", "--groups", "4", "--group-size", "8",
                 "-o", str(out), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert "success 32/32" in err and "policy calls" in err
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 32 and {r["group"] for r in recs} == {"g0-0", "g1-1", "g2-2", "g3-3"}
    assert all(r["success"] and r["steps"][0]["response"].startswith("<action>") for r in recs)
    assert all(r["subtask"] == plan_subtask(len(r["steps"])) for r in recs)  # the expert's plans are optimal
    credited = tmp_path / "credit.jsonl"
    assert main(["credit", "crbc", str(out), "-o", str(credited)]) == 0
    rows = [json.loads(line) for line in credited.read_text().splitlines()]
    assert [len(r["advantages"]) for r in rows] == [len(r["steps"]) for r in recs]


def test_abc_rollout_bad_input_exits_2(capsys):
    assert main(["rollout", "--env", "sokoban", "--policy", "nope", "--groups", "1"]) == 2
    assert "unknown rollout engine 'nope'; installed: expert, hf, openai, random, scripted" in capsys.readouterr().err
    assert main(["rollout", "--env", "sokobam", "--groups", "1"]) == 2
    assert "unknown environment 'sokobam'; families: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # refused by argparse while parsing, before any env is built
        main(["rollout", "--env", "sokoban", "--groups", "0"])
    assert exc.value.code == 2


def test_abc_rollout_pipe_into_abc_credit(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="error::DeprecationWarning:agentbench_crbc")
    cmd = [sys.executable, "-m", "agentbench_crbc"]
    ro = subprocess.run([*cmd, "rollout", "--env", "sokoban", "--policy", "random", "--groups", "2",
                         "--group-size", "4", "--quiet", "--workers", "0"],
                        capture_output=True, text=True, env=env, timeout=120, check=True)
    cr = subprocess.run([*cmd, "credit", "crbc", "/dev/stdin"], input=ro.stdout, capture_output=True, text=True,
                        env=env, timeout=120)
    assert cr.returncode == 0, cr.stderr
    rows = [json.loads(line) for line in cr.stdout.splitlines()]
    assert len(rows) == 8 and all(len(r["advantages"]) == len(r["steps"]) for r in rows)
    assert all(len(r["steps"]) == 15 or r["success"] for r in rows)
