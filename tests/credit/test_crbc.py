"""CRBC against the contract's worked example, its algebraic properties, and its failure modes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc import CreditError, OptionError, StepBatch
from agentbench_crbc.credit import assign, explain
from agentbench_crbc.credit.closure import FAILURE, SUCCESS, closure, closure_from_transitions

from .toy import toy

FINAL = [[6.5354, 5.8660], [4.8033, -5.8660, -4.4016], [-4.7494, 0.8660, 7.9371], [-1.1973, -6.2580, -4.4016]]


def test_worked_example_final_credit() -> None:
    out = assign("crbc", toy())
    for got, want in zip(out, FINAL, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-4)


def test_worked_example_values_and_step_credit() -> None:
    b = StepBatch.from_records(toy())
    c = closure(b)
    V = dict(zip(b.state_anchor, c.V, strict=True))
    np.testing.assert_allclose([V["A"], V["B"], V["C"], V["D"]], [0.474626, 0.650067, 0.326667, 0.320133], atol=1e-6)
    credit = {(b.state_anchor[s], b.actions[a]): v for s, a, v in zip(c.sa_state, c.sa_action, c.A_step, strict=True)}
    want = {("A", "a1"): 1.1339, ("A", "a2"): -1.1231, ("A", "a3"): -0.0663, ("A", "a4"): -1.0784,
            ("B", "b1"): 1.0, ("B", "b2"): -1.0, ("C", "c1"): -0.7071, ("C", "c2"): 1.4142, ("D", "d1"): 0.0}
    for key, value in want.items():
        assert credit[key] == pytest.approx(value, abs=1e-4), key
    sigma = dict(zip(b.state_anchor, c.sigma, strict=True))
    assert sigma["A"] == pytest.approx(0.143261, abs=1e-6)
    assert not c.gate[b.state_anchor.index("D")]


@pytest.mark.parametrize(("depth", "want"), [(0, 0.2828), (1, -0.1758), (2, 1.0698), (3, 1.1226), (None, 1.1339),
                                             ("inf", 1.1339)])
def test_depth_family_on_toy(depth: object, want: float) -> None:
    out = assign("crbc", toy(), depth=depth, w_traj=0.0, w_step=1.0)
    assert out[0][0] == pytest.approx(want, abs=1e-4)


def test_depth_zero_values_are_visit_means_of_realised_returns() -> None:
    b = StepBatch.from_records(toy())
    c = closure(b, depth=0)
    # V0(A): visits A at (t1,T2,R1), (t1,T3,R0), (t1,T3,R1), (t1,T3,R0), (t2,T3,R0) -> mean of beta^(T-t+1) R
    want = (0.98 ** 2 + 0.98 ** 3) / 5
    assert c.V[b.state_anchor.index("A")] == pytest.approx(want, abs=1e-12)


def test_beta_one_gives_success_probabilities() -> None:
    c = closure(StepBatch.from_records(toy()), beta=1.0)
    np.testing.assert_allclose(c.V, [0.5, 2 / 3, 1 / 3, 1 / 3], atol=1e-12)


def test_depth_iteration_converges_to_closure() -> None:
    b = StepBatch.from_records(toy())
    full = closure(b)
    deep = closure(b, depth=400)
    np.testing.assert_allclose(deep.V, full.V, atol=1e-10)
    np.testing.assert_allclose(deep.A_step, full.A_step, atol=1e-8)


def test_paper_bound_on_depth_error() -> None:
    """Eq. 12: |A_inf - A_K| <= 2 beta^K / (1 - beta) * |T V0 - V0| for K >= 1."""
    b = StepBatch.from_records(toy())
    beta = 0.98
    full, v0, v1 = closure(b), closure(b, depth=0), closure(b, depth=1)
    gap = np.abs(v1.V - v0.V).max()
    for K in (1, 2, 3, 5, 8):
        cK = closure(b, depth=K)
        assert np.abs(full.A - cK.A).max() <= 2 * beta ** K / (1 - beta) * gap + 1e-12


def test_all_failure_gives_zero_step_credit() -> None:
    recs = toy()
    for r in recs:
        r["success"] = False
    c = closure(StepBatch.from_records(recs))
    assert not c.V.any() and not c.A_step.any()


def test_singular_closure_raises_clear_error() -> None:
    with pytest.raises(CreditError, match="never reaches a success or failure boundary"):
        closure_from_transitions([("A", "stay", "A"), ("B", "go", SUCCESS)], beta=1.0)
    V, _ = closure_from_transitions([("A", "stay", "A"), ("A", "go", SUCCESS), ("B", "x", FAILURE)], beta=1.0)
    assert V["A"] == pytest.approx(1.0) and V["B"] == 0.0


def test_bad_options_are_refused() -> None:
    with pytest.raises(OptionError, match="beta"):
        assign("crbc", toy(), beta=1.5)
    with pytest.raises(OptionError, match="depth"):
        assign("crbc", toy(), depth=-1)
    with pytest.raises(OptionError, match="unknown option 'gama'"):
        assign("crbc", toy(), gama=0.9)


def test_explain_reports_coverage_growing_with_depth() -> None:
    (g,) = explain(toy())
    assert g.group == "toy" and g.n_rollouts == 4
    cov = [g.coverage[k] for k in ("0", "1", "2", "3", "inf")]
    assert cov == sorted(cov) and cov[0] == pytest.approx(1.4) and cov[-1] <= 4
    pair = next(p for p in g.pairs if p["anchor"] == "A" and p["action"] == "a1")
    assert pair["A_step"] == pytest.approx(1.1339, abs=1e-4) and pair["mu"] == pytest.approx(0.4)


# -- properties -------------------------------------------------------------------------------------------------

anchors = st.sampled_from(["A", "B", "C", "D", "E"])
actions = st.sampled_from(["x", "y", "z"])
trajectory = st.fixed_dictionaries({
    "group": st.sampled_from(["g1", "g2"]),
    "steps": st.lists(st.fixed_dictionaries({"anchor": anchors, "action": actions}), min_size=1, max_size=8),
    "success": st.booleans(),
})
batches = st.lists(trajectory, min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(batches, st.sampled_from([0.9, 0.98, 1.0]))
def test_policy_weighted_advantage_is_zero_at_every_anchor(records: list, beta: float) -> None:
    c = closure(StepBatch.from_records(records), beta=beta)
    total = np.bincount(c.sa_state, weights=c.mu * c.A, minlength=len(c.V))
    np.testing.assert_allclose(total, 0.0, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(batches)
def test_values_solve_the_bellman_equation_and_lie_in_range(records: list) -> None:
    b = StepBatch.from_records(records)
    beta = 0.98
    c = closure(b, beta=beta)
    V_ext = np.concatenate([c.V, [1.0, 0.0]])
    backup = beta * np.bincount(b.step_state, weights=V_ext[b.step_next], minlength=b.n_states) / np.bincount(
        b.step_state, minlength=b.n_states)
    np.testing.assert_allclose(c.V, backup, atol=1e-10)
    assert (c.V >= -1e-12).all() and (beta + 1e-12 >= c.V).all()


@settings(max_examples=40, deadline=None)
@given(batches, st.integers(0, 4))
def test_finite_depth_is_consistent(records: list, K: int) -> None:
    c = closure(StepBatch.from_records(records), depth=K)
    assert np.isfinite(c.A_step).all()
    total = np.bincount(c.sa_state, weights=c.mu * c.A, minlength=len(c.V))
    np.testing.assert_allclose(total, 0.0, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(batches)
def test_matches_naive_reference_implementation(records: list) -> None:
    from .reference import crbc_reference

    got = assign("crbc", records)
    for a, b in zip(got, crbc_reference(records), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9)


def test_explicit_transitions_with_dead_ends_and_deterministic_cycles() -> None:
    # A -> B -> A forever (no exit) has value 0 at beta < 1; C leads to a state never left (value 0)
    V, _ = closure_from_transitions([("A", "go", "B"), ("B", "go", "A"), ("C", "x", "E"), ("C", "y", SUCCESS),
                                     ("D", "z", "A")], beta=0.9)
    assert V["A"] == V["B"] == V["D"] == V["E"] == 0.0
    assert V["C"] == pytest.approx(0.9 * 0.5)
    V, _ = closure_from_transitions([("A", "go", "B"), ("B", "go", "C"), ("C", "go", SUCCESS)], beta=0.5)
    assert (V["A"], V["B"], V["C"]) == pytest.approx((0.125, 0.25, 0.5))


# -- the iterative solve for graphs whose LU factor would fill in -----------------------------------------------------

def _random_revisits(n_steps: int, ratio: int, seed: int = 0, n_traj: int = 8) -> list[dict]:
    """One group whose anchors recur at random (one distinct anchor per ``ratio`` steps): a giant strongly
    connected component, the case where a direct LU factor becomes dense."""
    rng = np.random.default_rng(seed)
    pool, length = max(n_steps // ratio, 2), n_steps // n_traj
    return [{"group": "g", "success": bool(i % 2),
             "steps": [{"anchor": int(a), "action": str(int(rng.integers(3)))}
                       for a in rng.integers(0, pool, size=length)]} for i in range(n_traj)]


@settings(max_examples=40, deadline=None)
@given(batches, st.sampled_from([0.9, 0.98, 1.0]))
def test_iterative_solve_equals_the_direct_one(records: list, beta: float) -> None:
    import agentbench_crbc.credit.closure as closure_mod

    b = StepBatch.from_records(records)
    direct = closure(b, beta=beta)
    limit = closure_mod.DIRECT_FILL_LIMIT
    closure_mod.DIRECT_FILL_LIMIT = -1  # every system goes to GMRES
    try:
        iterative = closure(b, beta=beta)
    finally:
        closure_mod.DIRECT_FILL_LIMIT = limit
    np.testing.assert_allclose(iterative.V, direct.V, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(iterative.A_step, direct.A_step, rtol=1e-9, atol=1e-10)


def test_a_giant_component_takes_the_iterative_path_and_solves_bellman(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentbench_crbc.credit.closure as closure_mod

    calls: list[str] = []
    real_gmres, real_splu = closure_mod.gmres, closure_mod.splu
    monkeypatch.setattr(closure_mod, "gmres", lambda *a, **k: calls.append("gmres") or real_gmres(*a, **k))
    monkeypatch.setattr(closure_mod, "splu", lambda *a, **k: calls.append("splu") or real_splu(*a, **k))
    records = _random_revisits(24_000, 10)  # about 2,400 anchors in one strongly connected component
    b = StepBatch.from_records(records)
    c = closure(b, beta=0.98)
    assert calls == ["gmres"]
    V_ext = np.concatenate([c.V, [1.0, 0.0]])
    backup = 0.98 * np.bincount(b.step_state, weights=V_ext[b.step_next], minlength=b.n_states) / np.bincount(
        b.step_state, minlength=b.n_states)
    np.testing.assert_allclose(c.V, backup, atol=1e-11)
    calls.clear()
    closure(StepBatch.from_records(toy()))  # the worked example stays on the exact direct path
    assert calls == ["splu"]


def test_iterative_solve_that_does_not_converge_falls_back_to_lu(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentbench_crbc.credit.closure as closure_mod

    records = _random_revisits(4_000, 10, seed=3)
    want = closure(StepBatch.from_records(records)).V
    monkeypatch.setattr(closure_mod, "DIRECT_FILL_LIMIT", -1)
    monkeypatch.setattr(closure_mod, "gmres", lambda A, b, **k: (np.zeros_like(b), 1))  # "did not converge"
    np.testing.assert_allclose(closure(StepBatch.from_records(records)).V, want, rtol=1e-10, atol=1e-12)
