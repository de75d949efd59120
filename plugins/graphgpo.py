"""GraphGPO: graph-based step credit from shortest-path distance to success (Cheng et al., arXiv 2605.26684).

Source: the paper's abstract plus the public GraphGPO recipe of verl-agent (``recipe/GraphGPO/core_graph.py``,
read in a copy); the paper's method section was not available. Per group, the rollouts' steps form one
directed graph over anchors (one unit edge per step, multi-edges kept); the last step of a successful rollout
leads to the node ``success``, of a failed one to the node ``fail`` (all failures share it). d(v) is the
shortest-path length from v to ``success`` (breadth-first on the reversed graph); nodes that cannot reach it,
``fail`` included, get d = (largest finite d in the group) + 1, and a group without any success gets d = 1
everywhere (so no step credit). The step return is R^G_{i,t} = R_succ * omega^d(s_{i,t+1}) (the recipe's form;
the paper's omega^(d+1) differs by the constant omega, which ``mean_std_norm`` cancels), normalised
GiGPO-style within groups of equal source anchor (a lone anchor gets 0). Final: A = traj_weight * A^E +
step_weight * A^G, A^E the GRPO episode advantage. R_succ is the largest outcome R among the group's
successful rollouts (10 in verl-agent's ALFWorld, 1 by default).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.options import MODE, OPTIONAL_NORM, WEIGHT, mode_uses_std
from agentbench_crbc.credit.stats import episode_advantage, normalize_within
from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["distance_to_success", "graph_returns", "graphgpo"]


def distance_to_success(batch: StepBatch) -> np.ndarray:
    """Per step, d of its successor: 0 for ``success``; the graph distance for an anchor; (group max) + 1 for
    ``fail`` and for anchors that cannot reach success; 1 everywhere in a group without success."""
    S = batch.n_states
    # reversed edges successor -> state over S + 2 nodes (z+ = S, z- = S + 1); BFS from z+ reaches only the
    # states of groups that contain it, and states never cross groups, so one search serves the whole batch
    rev = sp.csr_matrix((np.ones(batch.n_steps), (batch.step_next, batch.step_state)), shape=(S + 2, S + 2))
    d = shortest_path(rev, method="D", directed=True, unweighted=True, indices=S)
    d_states = d[:S]
    finite = np.isfinite(d_states)
    max_finite = np.zeros(batch.n_groups)
    np.maximum.at(max_finite, batch.state_group[finite], d_states[finite])
    step_d = np.ones(batch.n_steps)
    nxt = batch.step_next
    inner = nxt < S
    step_d[inner] = d[nxt[inner]]
    step_d[nxt == S] = 0.0
    unreach = ~np.isfinite(step_d) | (nxt == S + 1)
    step_d[unreach] = max_finite[batch.step_group[unreach]] + 1.0
    has_success = np.bincount(batch.traj_group, weights=batch.traj_success, minlength=batch.n_groups) > 0
    step_d[~has_success[batch.step_group]] = 1.0
    return step_d


def graph_returns(batch: StepBatch, omega: float) -> np.ndarray:
    """R^G_{i,t} = R_succ * omega^d(s_{i,t+1}) per step, R_succ the group's largest successful outcome."""
    if not 0.0 < omega <= 1.0:
        raise OptionError(f"graphgpo: option omega={omega!r} must lie in (0, 1]")
    r_succ = np.zeros(batch.n_groups)
    win = batch.traj_success
    np.maximum.at(r_succ, batch.traj_group[win], batch.traj_outcome[win])
    r_succ[r_succ == 0.0] = 1.0
    return r_succ[batch.step_group] * np.power(omega, distance_to_success(batch))


def graphgpo(batch: StepBatch, *, omega: float = 0.1, traj_weight: float = 1.0, step_weight: float = 1.0,
             mode: str = "mean_std_norm", norm: str | None = None, cross_steps: bool = False) -> np.ndarray:
    """GraphGPO: A = traj_weight * A^E + step_weight * A^G, A^G the anchor-normalised graph return.

    :param omega: base of the distance discount (paper: 0.1 / 0.2 / 0.8 for ALFWorld / WebShop / Sokoban).
    :param mode: ``mean_std_norm`` or ``mean_norm``, for both parts; ``norm`` overrides the episode part.
    :param cross_steps: episode statistics over step rows (verl-agent's default).
    :returns: one float per step.
    """
    use_std = mode_uses_std(mode)
    ep = episode_advantage(batch, norm=norm or ("std" if use_std else "none"), cross_steps=cross_steps)
    step = normalize_within(graph_returns(batch, omega), batch.step_state, batch.n_states, std=use_std)
    return traj_weight * ep + step_weight * step


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("graphgpo", graphgpo, bounds={
        "omega": Bound(0.0, 1.0, lo_open=True), "traj_weight": WEIGHT, "step_weight": WEIGHT, "mode": MODE,
        "norm": OPTIONAL_NORM}, label="GraphGPO",
        # the paper's anchor-mixing weight per env family (its presets on the ``paper`` base)
        presets={"paper/alfworld": {"omega": 0.1}, "paper/webshop": {"omega": 0.2}, "paper/sokoban": {"omega": 0.8}})
