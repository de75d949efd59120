"""Group rollouts on the test-double env: active-only calls, rewards, crashes, gates, determinism."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace

import pytest

from agentbench_crbc.host import Host, get_plugin_manager, reset_host
from agentbench_crbc.rollout.engines.baselines import ExpertPolicy, RandomPolicy, ScriptedPolicy
from agentbench_crbc.rollout.episodes.base import EngineCapabilities, SamplingParams, drop_env_failures
from agentbench_crbc.rollout.episodes.parse import INVALID_ACTION
from agentbench_crbc.rollout.episodes.runner import RolloutRunner, RunnerConfig, collect

from .toyenv import MakeCorridor

R, L, S = "<action>right</action>", "<action>left</action>", "<action>stay</action>"


def runner(policy, *, workers=0, G=4, max_steps=10, **kw):
    env_kw = {k: kw.pop(k) for k in ("crash_at", "raise_at", "crash_seed", "length", "nan_at", "admissible") if k in kw}
    return RolloutRunner("toy", policy, config=RunnerConfig(group_size=G, max_steps=max_steps, num_workers=workers,
                                                            make_env=MakeCorridor(**env_kw), **kw))


def test_expert_succeeds_and_records_everything():
    with runner(ExpertPolicy(), workers=2) as r:
        groups = r.collect([0, 1])
    assert [g.seed for g in groups] == [0, 1]
    for g, start in zip(groups, (0, 1), strict=True):
        assert len(g.trajectories) == 4 and not g.gated
        for t in g.trajectories:
            assert t.success and not t.truncated and t.error is None and t.subtask == "walk"
            assert [s.anchor for s in t.steps] == list(range(start, 4))
            assert all(s.action == "right" and s.valid for s in t.steps)
            assert t.reward == pytest.approx(1.0)
    assert r.stats.llm_calls == sum(len(t.steps) for g in groups for t in g.trajectories) == 4 * 4 + 4 * 3


def test_the_engines_record_is_what_asks_for_the_expert_action():
    # no TextPolicy base and no attributes: the capabilities record alone says it acts and needs the expert
    class Reads:
        def __init__(self, caps):
            self.capabilities, self.seen = caps, []

        def act(self, observations, infos, steps, sampling):
            self.seen += ["expert_action" in i for i in infos]
            return [f"<action>{i.get('expert_action', 'stay')}</action>" for i in infos]

    with runner(Reads(EngineCapabilities(acts=True, needs_expert=True)), G=2) as r:
        (g,) = r.collect([0])
    assert all(t.success and len(t.steps) == 4 for t in g.trajectories) and all(r.engine.seen)
    with runner(Reads(EngineCapabilities(acts=True)), G=2, max_steps=3) as r:
        (g,) = r.collect([0])
    assert not any(t.success for t in g.trajectories) and not any(r.engine.seen)


def test_calls_equal_sum_of_lengths_with_uneven_lengths():
    pol = RandomPolicy(seed=3, actions=("left", "right"))
    with runner(pol, G=8, max_steps=30) as r:
        groups = r.collect([0, 2, 4])
    lengths = [len(t.steps) for g in groups for t in g.trajectories]
    assert len(set(lengths)) > 1  # uneven episodes
    assert r.stats.llm_calls == sum(lengths) == r.stats.env_steps
    with runner(pol, G=8, max_steps=30, lockstep=True) as r2:
        groups2 = r2.collect([0, 2, 4])
    assert r2.stats.llm_calls == 8 * 3 * max(len(t.steps) for g in groups2 for t in g.trajectories)
    assert r2.stats.llm_calls > r.stats.llm_calls


def test_invalid_actions_are_penalised_and_never_executed():
    pol = ScriptedPolicy(["<action>jump</action>", "garbage", R, R, R, R])
    with runner(pol, invalid_penalty=0.25) as r:
        (g,) = r.collect([0])
    t = g.trajectories[0]
    assert [s.valid for s in t.steps[:3]] == [False, False, True]
    assert [s.action for s in t.steps[:2]] == [INVALID_ACTION] * 2
    assert [s.reward for s in t.steps[:2]] == [-0.25, -0.25]
    assert [s.anchor for s in t.steps[:3]] == [0, 0, 0]  # nothing moved
    assert t.steps[0].info["parse_reason"] == "not_admissible" and t.steps[1].info["parse_reason"] == "no_tag"
    assert t.success and t.reward == pytest.approx(1.0 - 0.5)
    assert r.stats.invalid_actions == 2 * 4


def test_max_steps_truncates_as_failure():
    with runner(ScriptedPolicy([S]), max_steps=3) as r:
        (g,) = r.collect([0])
    assert all(len(t.steps) == 3 and t.truncated and not t.success for t in g.trajectories)


@pytest.mark.parametrize("workers", [0, 2])
def test_should_stop_ends_the_rollout_between_steps(workers):
    """A stop flag raised during step 1 (as a Ctrl-C handler would) ends every episode after 2 steps, not 50."""
    flag = {"stop": False}

    def on_step(_runner, t):
        flag["stop"] = t == 1

    with runner(ScriptedPolicy([S]), workers=workers, G=3, max_steps=50) as r:
        groups = r.collect([0, 1], on_step=on_step, should_stop=lambda: flag["stop"])
        assert r.stats.stopped and r.stats.llm_calls == 2 * 6
        trajs = [t for g in groups for t in g.trajectories]
        assert len(trajs) == 6 and all(len(t.steps) == 2 and t.truncated and not t.success for t in trajs)
        flag["stop"] = False  # the next collect runs normally
        (g,) = r.collect([0], should_stop=lambda: flag["stop"])
        assert not r.stats.stopped and all(len(t.steps) == 50 for t in g.trajectories)


@pytest.mark.parametrize("workers", [0, 2])
def test_raising_env_ends_only_its_trajectory(workers, caplog):
    with runner(ExpertPolicy(), workers=workers, raise_at=1, crash_seed=0) as r:
        groups = r.collect([0, 1])
    bad, good = groups
    assert all(t.error and "toy env exploded" in t.error and not t.success and len(t.steps) == 1
               for t in bad.trajectories)
    assert all(t.success and t.error is None for t in good.trajectories)
    assert r.stats.worker_errors == 4
    assert "ended by an env error" in caplog.text


def test_worker_dying_mid_episode_fails_its_trajectories_and_rollout_continues(caplog):
    # the env process exits hard (like a segfault) at step 2 for seed 0; seed 1 lives in other slots
    with runner(ExpertPolicy(), workers=4, crash_at=2, crash_seed=0, G=2) as r:
        groups = r.collect([0, 1])
        assert all(t.error and "died" in t.error and len(t.steps) == 2 and not t.success
                   for t in groups[0].trajectories)
        assert all(t.success for t in groups[1].trajectories)
        again = r.collect([1, 1])  # dead workers restart on the next reset
    assert all(t.success for g in again for t in g.trajectories)
    assert "lost" in caplog.text


def test_killed_worker_yields_failed_trajectory():
    killed = []

    def kill_one(run, t):
        if t == 0:
            pid = run.pool(1).worker_pids()[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    pol = ScriptedPolicy([S, R, R, R, R, R])
    with runner(pol, workers=2, G=4) as r:
        (g,) = r.collect([0], on_step=kill_one)
    assert killed
    dead = [t for t in g.trajectories if t.error]
    alive = [t for t in g.trajectories if not t.error]
    assert len(dead) == 2 and len(alive) == 2  # slots 0 and 2 lived in worker 0
    assert all(not t.success and len(t.steps) == 1 for t in dead)
    assert all(t.success for t in alive)
    recs = g.to_records()
    assert [r_["success"] for r_ in recs].count(False) == 2


def test_seeds_make_rollouts_identical():
    pol = RandomPolicy(seed=7, actions=("left", "right", "stay"))
    a = collect("toy", pol, None, [0, 1], RunnerConfig(group_size=4, sampling=SamplingParams(seed=5), max_steps=8),
                runner=runner(pol, max_steps=8, sampling=SamplingParams(seed=5)))
    b = collect("toy", pol, None, [0, 1], RunnerConfig(group_size=4, sampling=SamplingParams(seed=5), max_steps=8),
                runner=runner(pol, max_steps=8, sampling=SamplingParams(seed=5)))
    c = runner(pol, max_steps=8, sampling=SamplingParams(seed=6)).collect([0, 1])
    key = [[s.action for s in t.steps] for g in a for t in g.trajectories]
    assert key == [[s.action for s in t.steps] for g in b for t in g.trajectories]
    assert key != [[s.action for s in t.steps] for g in c for t in g.trajectories]


def test_group_gate_is_called_and_stops_the_group():
    host = Host(get_plugin_manager(autoload=False))
    reset_host(host)
    try:
        # identical action prefixes (divergence 0) -> the selective-rollout gate fires at K=2
        with runner(ScriptedPolicy([S, S, S, R, R, R, R]), gate="selective_rollout",
                    gate_options={"K": 2}) as r:
            (g,) = r.collect([0])
        assert g.gated
        assert all(len(t.steps) == 2 and t.truncated and not t.success for t in g.trajectories)
    finally:
        reset_host(None)


def test_env_crashing_at_reset_leaves_an_empty_failed_trajectory_without_a_record():
    class BadReset(MakeCorridor):
        def __call__(self):
            raise RuntimeError("no game files")

    with RolloutRunner("toy", ExpertPolicy(), config=RunnerConfig(group_size=2, max_steps=3, num_workers=0,
                                                                  make_env=BadReset())) as r:
        (g,) = r.collect([0])
    assert all(not t.steps and not t.success and "no game files" in t.error for t in g.trajectories)
    assert g.to_records() == []


# -- episodes ended by the env, not the policy ------------------------------------------------------------------


def test_records_carry_error_and_truncated():
    with runner(ExpertPolicy(), G=2, max_steps=2, raise_at=1, crash_seed=0) as r:
        g0, g1 = r.collect([0, 1])
    recs = g0.to_records() + g1.to_records()
    assert [(rec["truncated"], rec["error"] is not None) for rec in recs] == [(False, True)] * 2 + [(True, False)] * 2
    assert "toy env exploded" in recs[0]["error"]


def test_drop_env_failures_leaves_out_errored_trajectories_and_thin_groups():
    with runner(ExpertPolicy(), G=3, max_steps=2, raise_at=1, crash_seed=0) as r:
        broken, healthy = r.collect([0, 1])
    t_ok = healthy.trajectories[0]
    partly = replace(healthy, task_id="partly", trajectories=(t_ok, broken.trajectories[0], t_ok))
    kept, n_traj, n_groups = drop_env_failures([broken, partly, healthy])
    assert [(g.group_id, len(g.trajectories)) for g in kept] == [("partly", 2), (healthy.group_id, 3)]
    assert (n_traj, n_groups) == (4, 1)
    assert kept[1] is healthy
    assert drop_env_failures([partly], min_size=3)[1:] == (1, 1)


def test_non_string_admissible_actions_end_the_episode_not_the_run(caplog):
    with runner(ExpertPolicy(), G=2, admissible=[1, None]) as r:
        (g,) = r.collect([0])
    assert all("admissible_actions" in t.error and not t.steps for t in g.trajectories)
    assert r.stats.worker_errors == 2


def test_nan_reward_flags_the_episode_and_writes_no_nan(caplog):
    with runner(ExpertPolicy(), G=2, max_steps=5, nan_at=1) as r:
        (g,) = r.collect([0])
    assert all("non-finite reward" in t.error and len(t.steps) == 1 for t in g.trajectories)
    text = json.dumps(g.to_records(), allow_nan=False)  # raises on NaN
    assert "NaN" not in text
