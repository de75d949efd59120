"""StepBatch: states are (group, anchor) pairs in first-visit order, built the same from dicts and from Groups."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc import StepBatch
from agentbench_crbc.credit.batch import canonical_anchor
from agentbench_crbc.credit.types import Group, Step, Trajectory

TEXT = st.sampled_from(["A", "B", "a long anchor " * 20])
ANY_JSON = st.one_of(TEXT, st.integers(0, 2), st.lists(st.integers(0, 1), max_size=2))


def record(anchors: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries({
        "group": st.sampled_from(["g1", "g2", "g3"]),
        "steps": st.lists(st.fixed_dictionaries({"anchor": anchors, "action": st.sampled_from(["x", "y", "z"])}),
                          min_size=1, max_size=6),
        "success": st.booleans(),
    })


RECORD = record(ANY_JSON)
# text anchors take the fast path; any number or list sends the whole batch through canonical JSON keys
BATCHES = st.one_of(st.lists(record(TEXT), min_size=1, max_size=8), st.lists(RECORD, min_size=1, max_size=8))


def reference_states(records: list[dict]) -> tuple[list[int], list[int], list[str], list[int]]:
    """States, actions, groups of states and successors the slow way: one dict keyed by (group, JSON anchor)."""
    states: dict[tuple[str, str], int] = {}
    actions: dict[str, int] = {}
    step_state, step_action, state_group, groups = [], [], [], {}
    for rec in records:
        gi = groups.setdefault(rec["group"], len(groups))
        for s in rec["steps"]:
            key = (rec["group"], json.dumps(s["anchor"]))
            if key not in states:
                states[key] = len(states)
                state_group.append(gi)
            step_state.append(states[key])
            step_action.append(actions.setdefault(s["action"], len(actions)))
    return step_state, step_action, list(actions), state_group


@settings(max_examples=200, deadline=None)
@given(BATCHES)
def test_states_match_a_dict_of_group_and_anchor(records: list[dict]) -> None:
    b = StepBatch.from_records(records)
    step_state, step_action, actions, state_group = reference_states(records)
    assert b.step_state.tolist() == step_state
    assert b.step_action.tolist() == step_action and b.actions == actions
    assert b.state_group.tolist() == state_group
    # every state's label is the canonical key of its first visit
    flat = [s["anchor"] for r in records for s in r["steps"]]
    first = {}
    for k, s in enumerate(b.step_state.tolist()):
        first.setdefault(s, k)
    assert b.state_anchor == [canonical_anchor(flat[first[s]]) for s in range(b.n_states)]
    # successors: the next step's state, or a boundary at each trajectory's end
    ends = np.cumsum([len(r["steps"]) for r in records]) - 1
    for k in range(b.n_steps):
        if k in ends:
            rec = records[int(np.searchsorted(ends, k))]
            assert b.step_next[k] == (b.n_states if rec["success"] else b.n_states + 1)
        else:
            assert b.step_next[k] == b.step_state[k + 1]


def test_interleaved_groups_share_states_only_within_a_group() -> None:
    recs = [{"group": "a", "steps": [{"anchor": "s", "action": "x"}, {"anchor": "t", "action": "x"}], "success": True},
            {"group": "b", "steps": [{"anchor": "s", "action": "x"}], "success": False},
            {"group": "a", "steps": [{"anchor": "t", "action": "y"}, {"anchor": "s", "action": "y"}], "success": False}]
    b = StepBatch.from_records(recs)
    assert b.step_state.tolist() == [0, 1, 2, 1, 0]
    assert b.state_group.tolist() == [0, 0, 1] and b.state_anchor == ["s", "t", "s"]


@settings(max_examples=60, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=6))
def test_groups_and_dicts_build_the_same_batch(records: list[dict]) -> None:
    records = [{**r, "steps": [{**s, "anchor": json.dumps(s["anchor"])} for s in r["steps"]]} for r in records]
    order: dict[str, list[dict]] = {}
    for r in records:
        order.setdefault(r["group"], []).append(r)
    grouped = [r for rs in order.values() for r in rs]  # Group objects hold a group's trajectories together
    groups = [Group(task_id=g, trajectories=tuple(
        Trajectory(steps=tuple(Step(anchor=s["anchor"], action=s["action"]) for s in r["steps"]), success=r["success"])
        for r in rs)) for g, rs in order.items()]
    a, b = StepBatch.from_records(grouped), StepBatch.from_groups(groups)
    for name in ("step_state", "step_action", "step_next", "state_group", "traj_group"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.state_anchor == b.state_anchor and a.actions == b.actions


# -- anchors by value (numpy scalars and arrays count as the Python values they hold) ---------------------------------

def _pair(a: object, b: object) -> list[dict]:
    return [{"group": "g", "success": True, "steps": [{"anchor": a, "action": "x"}, {"anchor": "end", "action": "y"}]},
            {"group": "g", "success": False, "steps": [{"anchor": b, "action": "z"}, {"anchor": "end", "action": "y"}]}]


@pytest.mark.parametrize(("a", "b"), [
    (1, np.int64(1)), (np.int32(7), 7), ((1, 2), (np.int64(1), 2)), ([1, [2, 3]], [np.int64(1), np.array([2, 3])]),
    (np.float64(0.5), 0.5), (np.bool_(True), True), (np.str_("room"), "room"), ((np.int64(1), (2, 3)), [1, [2, 3]]),
])
@pytest.mark.parametrize("method", ["gigpo", "crbc"])
def test_anchors_compare_by_value_not_numpy_type(a: object, b: object, method: str) -> None:
    from agentbench_crbc.credit import assign

    want = assign(method, _pair(a, a))  # the same anchor object twice
    got = assign(method, _pair(a, b))   # two spellings of one value
    for x, y in zip(got, want, strict=True):
        np.testing.assert_array_equal(x, y)
    assert StepBatch.from_records(_pair(a, b)).n_states == 2  # {a, "end"}: one state, not two


def test_numpy_anchor_round_trips_through_jsonl_to_the_same_credit() -> None:
    from agentbench_crbc.credit import assign

    records = _pair((np.int64(4), np.int64(5)), (4, 5))
    via_json = [json.loads(json.dumps(r, default=lambda x: x.item())) for r in records]
    for x, y in zip(assign("gigpo", records), assign("gigpo", via_json), strict=True):
        np.testing.assert_array_equal(x, y)


def test_true_and_one_stay_two_anchors_as_in_json() -> None:
    assert StepBatch.from_records(_pair(True, 1)).n_states == 3
