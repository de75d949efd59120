"""GraphGPO against credit-methods.md section 3 (toy group), its distance rules, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentbench_crbc import OptionError, StepBatch
from agentbench_crbc.cli import main
from agentbench_crbc.credit import assign
from agentbench_crbc.plugins.graphgpo import distance_to_success, graph_returns

from .toy import toy

# rows: t1.1 t1.2 | t2.1 t2.2 t2.3 | t3.1 t3.2 t3.3 | t4.1 t4.2 t4.3
STEP = [0.7303, 0.7071, 0.7303, -0.7071, -0.5774, -1.0954, 0.0, 1.1547, -1.0954, 0.7303, -0.5774]
FINAL_CROSS = [1.7748, 1.7516, -0.1401, -1.5775, -1.4477, -0.0510, 1.0445, 2.1992, -1.9658, -0.1401, -1.4477]
EPISODE = np.repeat([0.8660, -0.8660, 0.8660, -0.8660], [2, 3, 3, 3])


def flat(out: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(out)


def test_toy_distances_and_returns() -> None:
    b = StepBatch.from_records(toy())
    # successor d: B=1, z+=0 | B=1, C=1, fail=3 | D=2, C=1, z+=0 | A=2, C=1, fail=3
    np.testing.assert_array_equal(distance_to_success(b), [1, 0, 1, 1, 3, 2, 1, 0, 2, 1, 3])
    np.testing.assert_allclose(graph_returns(b.__class__.from_records(toy(10.0)), 0.1),
                               [1, 10, 1, 1, 0.01, 0.1, 1, 10, 0.1, 1, 0.01], atol=1e-12)


def test_toy_cross_steps_rows() -> None:
    np.testing.assert_allclose(flat(assign("graphgpo", toy(), cross_steps=True)), FINAL_CROSS, atol=1e-4)


def test_toy_default_episode_part() -> None:
    got = flat(assign("graphgpo", toy()))
    np.testing.assert_allclose(got, EPISODE + np.asarray(STEP), atol=1e-4)
    np.testing.assert_allclose(flat(assign("graphgpo", toy(), traj_weight=0.0)), STEP, atol=1e-4)


def test_omega_constant_factor_cancels_under_std_norm() -> None:
    """Scaling every R^G by a constant (the paper's omega^(d+1) vs the recipe's omega^d) changes nothing."""
    a = flat(assign("graphgpo", toy(), traj_weight=0.0))
    b = flat(assign("graphgpo", toy(10.0), traj_weight=0.0))
    np.testing.assert_allclose(a, b, atol=1e-4)  # up to the 1e-6 added to each std


def test_no_success_gives_no_graph_term() -> None:
    recs = toy()
    for r in recs:
        r["success"] = False
    assert not flat(assign("graphgpo", recs)).any()


def test_unreachable_anchor_gets_max_plus_one() -> None:
    recs = [
        {"group": "g", "success": True, "steps": [{"anchor": "A", "action": "x"},
                                                  {"anchor": "B", "action": "y"}]},
        {"group": "g", "success": False, "steps": [{"anchor": "A", "action": "z"},
                                                   {"anchor": "E", "action": "y"}]},
    ]
    # d: B=1, A=2 (the max finite), E unreachable -> 3, fail -> 3
    np.testing.assert_array_equal(distance_to_success(StepBatch.from_records(recs)), [1, 0, 3, 3])


def test_groups_do_not_share_the_success_node() -> None:
    other = [{"group": "h", "steps": [{"anchor": "B", "action": "q"}], "success": True}]
    lone = [{"group": "g", "steps": [{"anchor": "A", "action": "x"}, {"anchor": "B", "action": "y"}],
             "success": False}] * 2
    np.testing.assert_array_equal(distance_to_success(StepBatch.from_records(other + lone))[1:], [1, 1, 1, 1])


def test_bad_omega() -> None:
    with pytest.raises(OptionError, match="omega"):
        assign("graphgpo", toy(), omega=0.0)


def test_cli_reproduces_toy(tmp_path, capsys) -> None:
    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    assert main(["credit", "graphgpo", str(path), "--option", "cross_steps=true"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    np.testing.assert_allclose(np.concatenate([r["advantages"] for r in rows]), FINAL_CROSS, atol=1e-4)
