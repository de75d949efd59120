"""One anchor identity (#31 item 2): the trainer (``compute_advantages`` on the runner's groups) and ``abc credit``
(the same groups written as JSON Lines by ``abc rollout``'s writer) agree on which anchors are one state, so the same
rollouts get the same credit in and out of process."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.cli import main
from agentbench_crbc.credit import StepBatch
from agentbench_crbc.credit.keys import canonical_anchor
from agentbench_crbc.rollout.episodes.base import RolloutGroup, RolloutStep, RolloutTrajectory, record_anchor

#: Values Python's dict treats as one key and JSON writes as two.
PAIRS = [(True, 1), (1.0, 1), (-0.0, 0.0), (np.float64(2.0), 2), (np.False_, 0)]


def _group(a, b, wrap) -> RolloutGroup:
    """Rollouts that pass through anchor ``a`` or ``b`` (recorded as the runner does): merging the two states
    changes crbc's credit, keeping them apart is what JSON says."""
    def step(anchor, action):
        return RolloutStep(anchor=record_anchor(wrap(anchor)), action=action)

    plan = [([a, "m"], ["go", "x"], True), ([a, "m"], ["go", "y"], False), ([b, "m"], ["go", "x"], False),
            ([b, "m"], ["go", "y"], False), ([b, "n"], ["stay", "x"], True)]
    trajs = tuple(RolloutTrajectory(steps=tuple(map(step, anchors, actions)), success=ok)
                  for anchors, actions, ok in plan)
    return RolloutGroup(task_id="g0", trajectories=trajs, env_id="toy", seed=0)


WRAPS = st.sampled_from([lambda x: x, lambda x: (x, 3), lambda x: ("p", (x,))])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.sampled_from(PAIRS), st.booleans(), WRAPS, st.sampled_from(["crbc", "gigpo"]))
def test_trainer_and_abc_credit_give_the_same_credit(tmp_path_factory, pair, swap, wrap, method):
    pytest.importorskip("torch")
    from agentbench_crbc.trainer.update import compute_advantages

    a, b = pair[::-1] if swap else pair
    group = _group(a, b, wrap)
    trainer = compute_advantages([group], method, {})
    path = tmp_path_factory.mktemp("anchors") / "r.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in group.to_records()))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["credit", method, str(path), "-q"]) == 0
    jsonl = np.concatenate([json.loads(line)["advantages"] for line in out.getvalue().splitlines()])
    np.testing.assert_allclose(trainer, jsonl, rtol=0, atol=1e-12)
    assert StepBatch.from_groups([group]).n_states == StepBatch.from_records(group.to_records()).n_states == 4


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_json_distinct_values_are_distinct_anchors(a, b):
    assert canonical_anchor(a) != canonical_anchor(b)
    assert canonical_anchor((a, "x")) != canonical_anchor((b, "x"))
    assert canonical_anchor(np.int64(1)) == canonical_anchor(1)
    assert canonical_anchor((np.int64(2), 3)) == canonical_anchor([2, 3])


#: Anchors JSON (and ``abc credit``) reads as one value, which the trainer once recorded as two ``repr`` texts (#40
#: item 9): dicts in another key order, a list and a tuple, and the same inside a tuple or nested.
SAME = [({"a": 1, "b": 2}, {"b": 2, "a": 1}), ([1, 2], (1, 2)), ({"p": [1, 2]}, {"p": (1, 2)}),
        ([{"x": np.int64(1)}], ({"x": 1},)), (np.array([3, 4]), [3, 4])]


@pytest.mark.parametrize("wrap", [lambda x: x, lambda x: (x, 3)], ids=["bare", "in-a-tuple"])
@pytest.mark.parametrize(("a", "b"), SAME, ids=["dict-order", "list-tuple", "nested", "numpy-in-dict", "array"])
def test_list_and_dict_anchors_are_one_state_in_the_trainer_as_in_abc_credit(tmp_path, a, b, wrap):
    group = _group(a, b, wrap)
    records = group.to_records()
    assert records[0]["steps"][0]["anchor"] == json.loads(json.dumps(records[2]["steps"][0]["anchor"]))
    assert StepBatch.from_groups([group]).n_states == StepBatch.from_records(records).n_states == 3
    # the records hold the JSON values themselves (an object stays an object), so abc credit reads the same states
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert StepBatch.from_records(raw).n_states == 3
    assert all(s["anchor"] in ("m", "n") or not isinstance(s["anchor"], str) for r in raw for s in r["steps"])


def test_a_recorded_dict_anchor_is_read_only_hashable_and_pickles():
    import pickle

    from agentbench_crbc.rollout.episodes.base import AnchorMap

    m = record_anchor({"b": [1, 2], "a": {"c": np.int32(3)}})
    assert isinstance(m, AnchorMap) and m == {"b": (1, 2), "a": {"c": 3}} and type(m["a"]["c"]) is int
    assert hash(m) == hash(record_anchor({"a": {"c": 3}, "b": (1, 2)}))
    with pytest.raises(TypeError):
        m["z"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        m.update(z=1)
    assert pickle.loads(pickle.dumps(m)) == m and type(pickle.loads(pickle.dumps(m))) is AnchorMap
    # what JSON cannot write stays a repr text, as before: the run goes on
    assert isinstance(record_anchor([float("nan")]), str) and isinstance(record_anchor({1: 2, "a": 3}), str)
