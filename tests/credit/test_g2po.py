"""G2PO against credit-methods.md section 4 (toy group), its edge cases, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentbench_crbc import StepBatch
from agentbench_crbc.cli import main
from agentbench_crbc.credit import assign
from agentbench_crbc.plugins.g2po import g2po_terms, group_values

from .toy import toy

LOCAL = [-0.1250, 0.7071, -0.1250, -0.7071, -0.5774, 1.7033, 0.0, 1.1547, -0.6512, -0.8022, -0.5774]
GAIN = [1.2303, 5.25, 1.2303, -1.5833, -3.1667, 5.5053, -5.8583, 6.8333, 0.0, -0.3531, -3.1667]
GLOBAL = [0.1722, 1.1728, 0.1722, -0.5281, -0.9222, 1.2363, -1.5921, 1.5669, -0.1340, -0.2219, -0.9222]
FINAL_CROSS = [1.0917, 2.9243, -0.8232, -2.1056, -2.3699, 3.9841, -0.5477, 3.7660, -1.6555, -1.8944, -2.3699]
EPISODE = np.repeat([0.8660, -0.8660, 0.8660, -0.8660], [2, 3, 3, 3])


def test_toy_values_with_success_reward_10() -> None:
    b = StepBatch.from_records(toy(10.0))
    V, _ = group_values(b, 0.95)
    got = dict(zip(b.state_anchor, V, strict=True))
    assert [got[k] for k in "ABCD"] == pytest.approx([3.5197, 4.75, 3.1667, 9.025], abs=1e-4)


def test_toy_terms() -> None:
    local, gain, glob = g2po_terms(StepBatch.from_records(toy(10.0)))
    np.testing.assert_allclose(local, LOCAL, atol=1e-4)
    np.testing.assert_allclose(gain, GAIN, atol=1e-4)
    np.testing.assert_allclose(glob, GLOBAL, atol=1e-4)


@pytest.mark.parametrize("reward", [None, 10.0])
def test_toy_final_rows(reward: float | None) -> None:
    """Both parts are standardised, so R = 1 (the contract default) and R = 10 (verl-agent) agree."""
    got = np.concatenate(assign("g2po", toy(reward), cross_steps=True))
    np.testing.assert_allclose(got, FINAL_CROSS, atol=1e-4)
    default = np.concatenate(assign("g2po", toy(reward)))
    np.testing.assert_allclose(default, EPISODE + np.add(LOCAL, GLOBAL), atol=1e-4)


def test_all_failure_gives_zero() -> None:
    recs = toy()
    for r in recs:
        r["success"] = False
    assert not np.concatenate(assign("g2po", recs)).any()


def test_all_success_is_not_zero() -> None:
    recs = toy()
    for r in recs:
        r["success"] = True
    assert np.abs(np.concatenate(assign("g2po", recs))).max() > 0.1


def test_invalid_action_is_penalised_in_the_local_term() -> None:
    recs = toy(10.0)
    base = g2po_terms(StepBatch.from_records(recs))[0]
    recs[0]["steps"][0]["valid"] = False  # (A, a1) in t1
    local = g2po_terms(StepBatch.from_records(recs))[0]
    assert local[0] < base[0]


def test_single_row_group_is_finite() -> None:
    out = assign("g2po", [{"group": "g", "steps": [{"anchor": "A", "action": "x"}], "success": True}])
    assert out[0].tolist() == [0.0]


def test_cli_reproduces_toy(tmp_path, capsys) -> None:
    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in toy(10.0)))
    assert main(["credit", "g2po", str(path), "-O", "cross_steps=true"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    np.testing.assert_allclose(np.concatenate([r["advantages"] for r in rows]), FINAL_CROSS, atol=1e-4)
