"""Gated-BEPO against credit-methods.md section 5 (toy group), its limits and options, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentbench_crbc import OptionError, StepBatch
from agentbench_crbc.cli import main
from agentbench_crbc.credit import assign
from agentbench_crbc.plugins.gated_bepo import gated_bepo_terms, reverse_discounted_sum

from .toy import toy

DELTA = [0.1667, 0.3333, 0.1667, -0.3333, -0.3333, -0.1667, 0.0, 0.6667, 0.0, -0.1667, -0.3333]
GAE = [0.4833, 0.3333, -0.4508, -0.65, -0.3333, 0.4350, 0.6333, 0.6667, -0.4592, -0.4833, -0.3333]
FINAL = [1.8293, 1.5390, -1.7107, -2.0962, -1.4833, 1.7358, 0.8660, 2.1842, -1.7268, -1.7736, -1.4833]
EPISODE = np.repeat([0.8660, -0.8660, 0.8660, -0.8660], [2, 3, 3, 3])
CROSS = np.repeat([1.0445, -0.8704, 1.0445, -0.8704], [2, 3, 3, 3])


def flat(out: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(out)


def test_toy_values_residuals_gae_gate() -> None:
    b = StepBatch.from_records(toy())
    V, delta, gae, gate = gated_bepo_terms(b)
    np.testing.assert_allclose(V, [0.5, 2 / 3, 1 / 3, 1 / 3, 1.0, 0.0], atol=1e-12)  # A B C D z+ z-
    np.testing.assert_allclose(delta, DELTA, atol=1e-4)
    np.testing.assert_allclose(gae, GAE, atol=1e-4)
    assert gate.tolist() == [True] * 6 + [False] + [True] * 4  # off only at D (one successor)


def test_toy_final_rows_default_and_cross_steps() -> None:
    np.testing.assert_allclose(flat(assign("gated_bepo", toy())), FINAL, atol=1e-4)
    cross = flat(assign("gated_bepo", toy(), cross_steps=True))
    np.testing.assert_allclose(cross[:2], [2.0078, 1.7175], atol=1e-4)  # 1.0445 + the same step part
    shift = flat(assign("grpo", toy(), cross_steps=True)) - flat(assign("grpo", toy()))
    np.testing.assert_allclose(shift, CROSS - EPISODE, atol=2e-4)
    np.testing.assert_allclose(cross - flat(assign("gated_bepo", toy())), shift, atol=1e-12)


def test_lambda_one_telescopes_to_outcome_minus_value() -> None:
    b = StepBatch.from_records(toy())
    V, _, gae, _ = gated_bepo_terms(b, gamma=1.0, lam=1.0)
    want = b.traj_success[b.step_traj] - V[b.step_state]
    np.testing.assert_allclose(gae, want, atol=1e-12)


def test_lambda_zero_is_one_step_td() -> None:
    _, delta, gae, _ = gated_bepo_terms(StepBatch.from_records(toy()), lam=0.0)
    np.testing.assert_array_equal(gae, delta)


def test_reverse_discounted_sum_matches_a_loop_on_both_paths() -> None:
    rng = np.random.default_rng(0)
    recs = [{"group": "g", "steps": [{"anchor": str(k), "action": "a"}] * n, "success": True}
            for k, n in enumerate([1, 5, 200, 3])]
    b = StepBatch.from_records(recs)
    v = rng.normal(size=b.n_steps)
    want = np.empty_like(v)
    for s, n in zip(b.traj_start, b.traj_len, strict=True):
        acc = 0.0
        for k in range(s + n - 1, s - 1, -1):
            acc = v[k] + 0.9 * acc
            want[k] = acc
    np.testing.assert_allclose(reverse_discounted_sum(v, b, 0.9), want, atol=1e-12)  # padded 2-D path
    import agentbench_crbc.plugins.gated_bepo as gb

    old, gb._PAD_FACTOR = gb._PAD_FACTOR, 0
    try:
        np.testing.assert_allclose(reverse_discounted_sum(v, b, 0.9), want, atol=1e-12)  # per-rollout path
    finally:
        gb._PAD_FACTOR = old


def test_gamma_one_with_a_closed_loop_is_solvable() -> None:
    """Every last step maps to z+/z-, so even a loop A <-> B that a rollout never leaves has a fixed point."""
    loop = [{"anchor": "A", "action": "go"}, {"anchor": "B", "action": "back"}] * 20
    recs = [{"group": "g", "steps": loop, "success": False},
            {"group": "g", "steps": [*loop[:3], {"anchor": "C", "action": "win"}], "success": True}]
    out = flat(assign("gated_bepo", recs, gamma=1.0))
    assert np.isfinite(out).all()


def test_step_norm_none_and_gate_threshold() -> None:
    raw = flat(assign("gated_bepo", toy(), step_norm="none"))
    np.testing.assert_allclose(raw - EPISODE, np.where(np.arange(11) == 6, 0.0, GAE), atol=1e-4)
    no_gate = flat(assign("gated_bepo", toy(), min_successors=1, step_norm="none"))
    np.testing.assert_allclose(no_gate - EPISODE, GAE, atol=1e-4)
    with pytest.raises(OptionError, match="step_norm"):
        assign("gated_bepo", toy(), step_norm="batch")
    with pytest.raises(OptionError, match="gamma"):
        assign("gated_bepo", toy(), gamma=0.0)


def test_cli_reproduces_toy(tmp_path, capsys) -> None:
    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    assert main(["credit", "gated_bepo", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    np.testing.assert_allclose(np.concatenate([r["advantages"] for r in rows]), FINAL, atol=1e-4)
