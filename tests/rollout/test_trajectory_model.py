"""One trajectory model: the runner emits the credit layer's types, anchors canonical once, records at the edge."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from agentbench_crbc.credit import assign, assign_batch
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.types import Group, Step, Trajectory
from agentbench_crbc.rollout.engines.baselines import RandomPolicy
from agentbench_crbc.rollout.episodes.base import (
    RolloutGroup,
    RolloutStep,
    RolloutTrajectory,
    _json_anchor,
    record_anchor,
)
from agentbench_crbc.rollout.episodes.runner import RolloutRunner, RunnerConfig

from .toyenv import MakeCorridor


@pytest.fixture(scope="module")
def sokoban_groups():
    with RolloutRunner("abc/SokobanText-v0", RandomPolicy(seed=1, invalid_rate=0.1),
        config=RunnerConfig(group_size=4, max_steps=8, num_workers=0)) as r:
        return r.collect([0, 1, 2])


def test_the_runner_emits_the_credit_layers_types(sokoban_groups):
    g = sokoban_groups[0]
    t = g.trajectories[0]
    s = t.steps[0]
    assert isinstance(g, Group) and isinstance(t, Trajectory) and isinstance(s, Step)
    assert (type(g), type(t), type(s)) == (RolloutGroup, RolloutTrajectory, RolloutStep)
    assert g.group_id == g.task_id == "g0-0" and g.env_id == "abc/SokobanText-v0" and g.seed == 0
    assert t.outcome == t.reward and isinstance(t.truncated, bool)
    for obj, name in ((g, "gated"), (g, "task_id"), (t, "truncated"), (t, "success"), (s, "anchor"),
                      (s, "response_ids")):
        assert not hasattr(obj, "__dict__")  # slotted
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)


def test_sokoban_anchors_are_recorded_as_tuples_once(sokoban_groups):
    anchors = [s.anchor for g in sokoban_groups for t in g.trajectories for s in t.steps]
    assert all(type(a) is tuple and type(a[1]) is tuple for a in anchors)
    assert all(record_anchor(a) == a for a in anchors)  # already canonical: recording again changes nothing


def test_record_anchor_writes_the_records_the_json_pass_wrote():
    raw = ["text", 3, 2.5, True, None, (1, (2, 3)), [1, 2], {"b": 1}, (1, [2]), np.int64(4), frozenset({1})]
    for a in raw:
        canon = record_anchor(a)
        hash(canon)
        assert _json_anchor(canon) == _json_anchor(a)
        assert json.loads(json.dumps(_json_anchor(canon))) == _json_anchor(a)


def test_from_groups_sees_the_batch_from_records_saw(sokoban_groups):
    # one anchor identity (#31 item 2): tuples go through the same canonical form in both, since hashing them as
    # they are would make (1,) and (True,) one state in process and two in JSON Lines
    recs = [r for g in sokoban_groups for r in g.to_records()]
    old = StepBatch.from_records(recs)
    new = StepBatch.from_groups(sokoban_groups)
    for name in ("traj_group", "traj_len", "traj_success", "traj_outcome", "step_state", "step_action",
                 "step_next", "step_reward", "step_valid"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name), err_msg=name)
    assert new.group_ids == old.group_ids and new.actions == old.actions and new.n_states == old.n_states
    for method in ("crbc", "grpo", "gigpo"):
        np.testing.assert_array_equal(assign_batch(method, new), assign_batch(method, old))


def test_groups_go_to_assign_as_they_are_and_errors_get_zero_credit():
    with RolloutRunner("toy", RandomPolicy(seed=2, actions=("left", "right", "stay")),
                       config=RunnerConfig(group_size=3, max_steps=6, num_workers=0,
                                           make_env=MakeCorridor(raise_at=2, crash_seed=1))) as r:
        groups = r.collect([0, 1])
    assert any(t.error for t in groups[1].trajectories)
    by_groups = assign("grpo", groups)
    by_records = assign("grpo", [rec for g in groups for rec in g.to_records()])
    assert [a.tolist() for a in by_groups] == [a.tolist() for a in by_records]


def test_extra_fields_are_keyword_only():
    s = RolloutStep("a", "up", 1.0, True, prompt_ids=(1,), response_ids=(2,))
    assert (s.anchor, s.action, s.reward, s.valid, s.prompt_ids, s.response_ids) == ("a", "up", 1.0, True, (1,), (2,))
    with pytest.raises(TypeError):
        RolloutStep((1,), (2,), (), "a", "up", "text", True, 0.0)  # the old positional order fails loudly
    t = RolloutTrajectory((s,), True, 1.0, truncated=True)
    g = RolloutGroup("g0-0", (t,), env_id="toy", seed=0)
    assert g.to_records()[0]["truncated"] is True and g.to_records()[0]["group"] == "g0-0"


def test_numpy_anchors_are_recorded_by_value() -> None:
    import numpy as np

    from agentbench_crbc.credit import canonical_anchor
    from agentbench_crbc.rollout.episodes.base import record_anchor

    assert record_anchor(np.int64(3)) == 3 and type(record_anchor(np.int64(3))) is int
    assert record_anchor((np.int64(1), (np.int32(2), 3))) == (1, (2, 3))
    assert record_anchor(np.array([[1, 2], [3, 4]])) == ((1, 2), (3, 4))
    assert record_anchor(np.bool_(True)) is True and record_anchor(np.str_("room")) == "room"
    # in process and after the JSONL boundary the anchor is one value
    assert canonical_anchor(record_anchor(np.array([1, 2]))) == canonical_anchor([1, 2])
