"""Tabular MDPs: exact DP against a closed form and Monte Carlo, the JSON schema's errors, the families."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from agentbench_crbc.tabular import (
    MdpError,
    exact_gradient,
    exact_values,
    load_mdp,
    mdp_from_dict,
    occupancy,
    sample_episodes,
    success_probability,
)
from agentbench_crbc.tabular.families import fidelity_settings, learning_task, tabular_families

ISSUE = {"horizon": 10, "start": {"s0": 1.0}, "success": ["goal"], "failure": ["pit"],
         "states": {"s0": {"anchor": "s0", "actions": {"left": {"policy": 0.5, "next": {"s1": 1.0}},
                                                      "right": {"policy": 0.5, "next": {"s0": 0.3, "goal": 0.7}}}},
                    "s1": {"actions": {"jump": {"policy": 1.0, "next": {"pit": 0.5, "s0": 0.5}}}}}}


def chain(n: int, p: float, horizon: int) -> dict:
    """States 0..n-1; 'fwd' moves one right with probability p (else stays); from n-1 it reaches the goal."""
    states = {}
    for i in range(n):
        nxt = "goal" if i == n - 1 else f"c{i + 1}"
        states[f"c{i}"] = {"actions": {"fwd": {"policy": 1.0, "next": {nxt: p, f"c{i}": 1 - p} if p < 1 else
                                               {nxt: 1.0}}}}
    return {"horizon": horizon, "start": {"c0": 1.0}, "success": ["goal"], "states": states}


def test_chain_matches_the_negative_binomial_closed_form() -> None:
    from scipy.stats import binom

    n, p, T = 4, 0.6, 9
    mdp = mdp_from_dict(chain(n, p, T))
    values = exact_values(mdp)
    for t in range(T + 1):
        for i in range(n):
            need = n - i  # successes needed in t Bernoulli(p) trials
            assert values.V[t, i] == pytest.approx(binom.sf(need - 1, t, p), abs=1e-12)


def test_issue_example_by_hand() -> None:
    mdp = mdp_from_dict(ISSUE)
    v = exact_values(mdp)
    # t = 1: Q(s0, right) = 0.7, Q(s0, left) = 0 (s1 is not terminal), V = 0.35; s1 jumps to pit or s0 -> 0.
    assert v.Q[1, 0, :2].tolist() == pytest.approx([0.0, 0.7])
    assert v.V[1, 0] == pytest.approx(0.35) and v.V[1, 1] == 0.0
    # t = 2: Q(s1, jump) = 0.5 * V_1(s0); Q(s0, left) = V_1(s1); Q(s0, right) = 0.3 V_1(s0) + 0.7
    assert v.Q[2, 1, 0] == pytest.approx(0.175)
    assert v.Q[2, 0, :2].tolist() == pytest.approx([0.0, 0.805])


def test_dp_agrees_with_monte_carlo_within_three_standard_errors() -> None:
    mdp = mdp_from_dict(ISSUE)
    n = 40_000
    ep = sample_episodes(mdp, n, np.random.default_rng(0))
    exact = exact_values(mdp).V[mdp.horizon] @ mdp.start
    se = np.sqrt(exact * (1 - exact) / n)
    assert abs(ep.success.mean() - exact) < 3 * se
    # Q of the first action too: condition on it
    for a in range(2):
        won = ep.success[ep.action[:, 0] == a]
        q = exact_values(mdp).Q[mdp.horizon, 0, a]
        assert abs(won.mean() - q) < 3 * np.sqrt(q * (1 - q) / len(won)) + 1e-12
    # occupancy of step k matches the share of episodes in each state at step k
    d = occupancy(mdp)
    for k in range(mdp.horizon):
        for s in range(mdp.n_states):
            share = (ep.state[:, k] == s).mean()
            assert abs(share - d[k, s]) < 3 * np.sqrt(d[k, s] * (1 - d[k, s]) / n) + 1e-9


def test_exact_gradient_matches_finite_differences_of_success() -> None:
    from agentbench_crbc.bench.learn import softmax

    mdp = mdp_from_dict(ISSUE)
    theta = np.where(mdp.mask, np.log(np.where(mdp.mask, mdp.policy, 1.0)), -np.inf)
    g = exact_gradient(mdp)
    h = 1e-6
    for s, a in [(0, 0), (0, 1)]:
        up, down = theta.copy(), theta.copy()
        up[s, a] += h
        down[s, a] -= h
        fd = (success_probability(mdp, softmax(up)[None]) - success_probability(mdp, softmax(down)[None]))[0] / (2 * h)
        assert g[s, a] == pytest.approx(fd, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["states"]["s0"]["actions"]["left"].__setitem__("policy", 0.4),
     r"^states\.s0\.actions: policy probabilities sum to 0\.9"),
    (lambda d: d["states"]["s0"]["actions"]["right"]["next"].__setitem__("s0", 0.2),
     r"^states\.s0\.actions\.right\.next: transition probabilities sum to 0\.9"),
    (lambda d: d["states"]["s0"]["actions"]["left"]["next"].__setitem__("s9", 0.0),
     r"^states\.s0\.actions\.left\.next\.s9: state 's9' is not listed"),
    (lambda d: d["states"].pop("s1"), r"^states\.s0\.actions\.left\.next\.s1: state 's1' is not listed"),
    (lambda d: d.__setitem__("horizon", 0), r"^horizon: must be an integer in \[1, 100000\]"),
    (lambda d: d.__setitem__("horizon", 10**9), r"^horizon: must be an integer in \[1, 100000\], got 1000000000"),
    (lambda d: d.__setitem__("horizon", 10**400), r"^horizon: .*an integer of 401 digits"),
    (lambda d: d["start"].__setitem__("s0", 10**400), r"^start\.s0: must be a probability .* 401 digits"),
    (lambda d: d.pop("start"), r"^start: missing"),
    (lambda d: d["start"].__setitem__("goal", 0.0), r"^start\.goal: 'goal' must be a listed non-terminal state"),
    (lambda d: d["states"]["s1"]["actions"]["jump"].__setitem__("policy", "1"), r"^states\.s1\.actions\.jump\.policy"),
    (lambda d: d["states"]["s0"].__setitem__("anchor", 3), r"^states\.s0\.anchor: must be a string"),
    (lambda d: d.__setitem__("gamma", 1), r"^gamma: unknown key"),
])
def test_schema_errors_name_the_json_path(mutate, message) -> None:
    data = copy.deepcopy(ISSUE)
    mutate(data)
    with pytest.raises(MdpError, match=message) as info:
        mdp_from_dict(data)
    assert "\n" not in str(info.value)


def test_horizon_times_states_is_bounded_before_any_array_is_made() -> None:
    data = chain(2000, 1.0, 60_000)  # 60,001 x 2,000 x 1 cells > 1e8: refused, not a 1 GB allocation
    with pytest.raises(MdpError, match=r"^horizon: 60000 steps x 2000 states x 1 actions is more than"):
        mdp_from_dict(data)


@pytest.mark.parametrize(("text", "message"), [
    (b"\xff\xfe{}", r"not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, r"JSON nested too deeply"),
    (b'{"horizon": 1' + b"0" * 5000 + b"}", r"not valid JSON"),
])
def test_load_refuses_hostile_files_in_one_line(tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(text)
    with pytest.raises(MdpError, match=rf"hostile\.json: {message}") as info:
        load_mdp(path)
    assert "\n" not in str(info.value)


def test_load_names_the_file_and_round_trips(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(MdpError, match=r"bad\.json: not valid JSON"):
        load_mdp(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(ISSUE))
    mdp = load_mdp(good)
    again = mdp_from_dict(mdp.to_dict())
    assert np.array_equal(again.policy, mdp.policy) and (again.transitions != mdp.transitions).nnz == 0


def test_sokoban_family_uses_the_env_rules_and_the_solver_agrees() -> None:
    from agentbench_crbc.envs.sokoban.level import Level
    from agentbench_crbc.envs.sokoban.solver import solution_length
    from agentbench_crbc.envs.sokoban.tabular import sokoban_graph
    from agentbench_crbc.tabular.graph import distances

    graph = sokoban_graph(8, size=6, boxes=1, max_moves=15)
    assert distances(graph.moves)[graph.start] == solution_length(Level.from_text(graph.start))
    mdp = fidelity_settings("sokoban", "quick")[0].mdp()
    greedy = mdp.with_policy(np.where(mdp.policy == mdp.policy.max(1, keepdims=True), 1.0, 0.0) /
                             (mdp.policy == mdp.policy.max(1, keepdims=True)).sum(1, keepdims=True))
    assert exact_values(greedy).V[mdp.horizon] @ mdp.start == pytest.approx(1.0)  # optimal moves always solve it


def test_rooms_observation_anchors_alias_states_and_dead_ends_exist() -> None:
    from agentbench_crbc.tabular.rooms import rooms_mdp_dict

    mdp = mdp_from_dict(rooms_mdp_dict(0, rooms=3, receptacles=4, anchors="observation", slip=0.1))
    assert len(set(mdp.anchors)) < mdp.n_states
    assert mdp.transitions[:, mdp.n_states + 1].nnz > 0  # the garbage can: a failure terminal
    assert any(s.startswith("cellar|") for s in mdp.states)  # the locked cellar: a dead end
    with pytest.raises(MdpError, match="anchors="):
        rooms_mdp_dict(0, anchors="pixels")


@pytest.mark.parametrize("family", tabular_families())
def test_every_setting_builds_and_is_a_valid_mdp(family: str) -> None:
    for mode in ("quick", "full"):
        for setting in fidelity_settings(family, mode):
            mdp = setting.mdp()
            assert np.allclose(mdp.policy.sum(1), 1.0) and 0.0 < success_probability(mdp, mdp.policy[None])[0] < 1.0
    assert learning_task(family) is not None
