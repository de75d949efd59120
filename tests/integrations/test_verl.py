"""The verl adapter on stand-in ``DataProto`` objects (torch only, no verl): both layouts, options, a third party."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc import hookimpl
from agentbench_crbc.credit import assign
from agentbench_crbc.errors import OptionError, RecordError
from agentbench_crbc.host import Host, get_plugin_manager, reset_host
from agentbench_crbc.integrations.verl import (
    compute_advantage,
    estimator_names,
    method_of,
    read_records,
    with_step_credit,
)

torch = pytest.importorskip("torch", reason="the verl adapter writes torch tensors: pip install -e '.[train]'")


class Proto:
    """What the adapter reads of verl's ``DataProto``: ``batch`` (tensors by key) and ``non_tensor_batch``."""

    def __init__(self, tensors: dict, non_tensors: dict) -> None:
        self.batch = dict(tensors)
        self.non_tensor_batch = {k: _objects(v) for k, v in non_tensors.items()}


def _objects(values: list) -> np.ndarray:
    col = np.empty(len(values), dtype=object)
    col[:] = values
    return col


def _t(rows: list[list[float]], dtype=torch.float64) -> torch.Tensor:
    return torch.tensor(rows, dtype=dtype)


def turns_batch() -> Proto:
    """One group, two trajectories. Row 0: turn [1, 2], observation [7], turn [3]; a reward of 0.5 on the
    observation token counts to turn 0, 1.0 on turn 1 (return 1.5). Row 1: one turn [1, 2], return 0."""
    prompts = _t([[5, 6], [5, 6]], torch.long)
    responses = _t([[1, 2, 7, 3], [1, 2, 0, 0]], torch.long)
    return Proto({"prompts": prompts, "responses": responses,
                  "attention_mask": _t([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], torch.long),
                  "response_mask": _t([[1, 1, 0, 1], [1, 1, 0, 0]], torch.long),
                  "token_level_rewards": _t([[0, 0, 0.5, 1.0], [0, 0, 0, 0]])},
                 {"uid": ["g", "g"]})


def test_turns_layout_reads_turn_rewards_anchors_and_actions() -> None:
    read = read_records(turns_batch())
    assert read.layout == "turns"
    a, b = read.records
    assert [s["reward"] for s in a["steps"]] == [0.5, 1.0] and a["reward"] == 1.5 and a["success"] is True
    assert [s["reward"] for s in b["steps"]] == [0.0] and b["success"] is False  # default: return > 0
    assert a["steps"][0]["anchor"] == b["steps"][0]["anchor"] != a["steps"][1]["anchor"]  # the prompt, then [7]
    assert a["steps"][0]["action"] == b["steps"][0]["action"] != a["steps"][1]["action"]
    assert read.step_row.tolist() == [0, 0, 1] and read.step_turn.tolist() == [0, 1, 0]


def test_turns_layout_writes_each_turns_credit_on_its_tokens() -> None:
    data = compute_advantage(turns_batch(), "abc_grpo", options=["norm=none"])  # A = R - mean: +-0.75
    assert data.batch["advantages"].tolist() == [[0.75, 0.75, 0.0, 0.75], [-0.75, -0.75, 0.0, 0.0]]
    assert torch.equal(data.batch["returns"], data.batch["advantages"])
    assert data.batch["advantages"].dtype == torch.float64


def test_float32_rewards_give_float32_advantages_on_their_device() -> None:
    data = turns_batch()
    data.batch["token_level_rewards"] = data.batch["token_level_rewards"].float()
    compute_advantage(data, "grpo", options={"norm": "none"})
    assert data.batch["advantages"].dtype == torch.float32


def steps_batch(order: list[int]) -> Proto:
    """verl-agent rows: trajectory A (2 steps: anchor s0 then s1, rewards 0 and 1, return 1), trajectory B (1 step
    at s0, return 0), one group; the rows in ``order``."""
    rows = [("A", 0, "s0", 0.0, 1.0, [4]), ("A", 1, "s1", 1.0, 1.0, [5]), ("B", 0, "s0", 0.0, 0.0, [6])]
    rows = [rows[i] for i in order]
    return Proto({"responses": _t([r[5] + [0] for r in rows], torch.long),
                  "response_mask": _t([[1, 0]] * 3, torch.long),
                  "token_level_rewards": _t([[r[4], 0.0] for r in rows])},
                 {"uid": ["g"] * 3, "traj_uid": [r[0] for r in rows], "step": [r[1] for r in rows],
                  "anchor_obs": [r[2] for r in rows], "rewards": [r[3] for r in rows]})


def test_steps_layout_matches_the_records_it_reads() -> None:
    read = read_records(steps_batch([0, 1, 2]))
    assert read.layout == "steps"
    assert [(r["reward"], r["success"], [s["anchor"] for s in r["steps"]]) for r in read.records] == [
        (1.0, True, ["s0", "s1"]), (0.0, False, ["s0"])]
    data = compute_advantage(steps_batch([0, 1, 2]), "gigpo")
    want = np.concatenate(assign("gigpo", list(read.records)))
    assert data.batch["advantages"][:, 0].tolist() == want.tolist()
    assert data.batch["advantages"][:, 1].tolist() == [0.0] * 3


def test_step_key_orders_rows_that_balance_batch_shuffled() -> None:
    ordered = compute_advantage(steps_batch([0, 1, 2]), "crbc").batch["advantages"]
    shuffled = compute_advantage(steps_batch([1, 2, 0]), "crbc", step_key="step").batch["advantages"]
    assert shuffled.tolist() == ordered[[1, 2, 0]].tolist()
    as_rows = read_records(steps_batch([1, 2, 0])).records[0]["steps"]  # without step_key: s1 before s0
    by_key = read_records(steps_batch([1, 2, 0]), step_key="step").records[0]["steps"]
    assert [s["anchor"] for s in as_rows] == ["s1", "s0"] and [s["anchor"] for s in by_key] == ["s0", "s1"]


def test_anchor_key_and_anchor_function() -> None:
    data = steps_batch([0, 1, 2])
    data.non_tensor_batch["state"] = _objects([[0, 1], [1, 1], [0, 1]])  # a family's info["anchor"], JSON-like
    by_key = read_records(data, anchor="state").records
    assert [s["anchor"] for s in by_key[0]["steps"]] == [[0, 1], [1, 1]]
    by_fn = read_records(data, anchor=lambda obs: obs.upper()).records
    assert [s["anchor"] for s in by_fn[0]["steps"]] == ["S0", "S1"]


def test_with_step_credit_routes_abc_estimators_and_passes_the_rest() -> None:
    calls = []

    def verl_compute_advantage(data, adv_estimator, gamma=1.0, config=None):
        calls.append(adv_estimator)
        return "verl's own"

    compute = with_step_credit(verl_compute_advantage)
    assert compute(turns_batch(), adv_estimator="grpo", config={}) == "verl's own" and calls == ["grpo"]
    data = compute(turns_batch(), "abc_grpo", config={"abc_options": {"norm": "none"}})
    assert data.batch["advantages"][0, 0].item() == 0.75 and calls == ["grpo"]
    with pytest.raises(OptionError, match="nrom"):
        compute(turns_batch(), adv_estimator="abc_grpo", config={"abc_options": {"nrom": "none"}})


def test_method_of() -> None:
    assert method_of("abc_crbc") == "crbc" and method_of("grpo") is None and method_of(None) is None


def test_bad_batches_say_what_is_missing() -> None:
    data = turns_batch()
    del data.non_tensor_batch["uid"]
    with pytest.raises(RecordError, match="no 'uid'"):
        read_records(data)
    data = turns_batch()
    data.batch["response_mask"] = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(RecordError, match="row 0 has no response token"):
        read_records(data)
    with pytest.raises(OptionError, match="layout='rows'"):
        read_records(turns_batch(), layout="rows")
    data = turns_batch()
    data.non_tensor_batch["anchors"] = _objects([["a"], ["b"]])
    with pytest.raises(RecordError, match="row 0 has 2 turns but"):
        read_records(data, anchor="anchors")


def _step_index(group, *, scale: float = 1.0):
    """A third party's method: credit = scale * (step index)."""
    return [scale * np.arange(len(t.steps), dtype=float) for t in group.trajectories]


class _FakePlugin:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add("stepindex", _step_index)


@pytest.fixture
def third_party():
    pm = get_plugin_manager()
    pm.register(_FakePlugin(), name="abc-credit-stepindex")
    host = Host(pm)
    reset_host(host)
    yield host
    reset_host(None)


def test_a_third_party_method_is_a_verl_estimator_with_no_extra_code(third_party) -> None:
    assert "abc_stepindex" in estimator_names() and "abc_crbc" in estimator_names()
    compute = with_step_credit(lambda *a, **k: pytest.fail("verl's own estimator was called"))
    data = compute(turns_batch(), adv_estimator="abc_stepindex", config={"abc_options": ["scale=2"]})
    assert data.batch["advantages"].tolist() == [[0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]]
