"""ProGPO: progress- and reliability-oriented GPO (Fan, Liu; arXiv 2607.04242), a reconstruction.

Only the abstract was available (no method text, no code). What it states: critic-free; exact-prefix action
comparison in history-consistent peer groups; sparse peer comparisons complemented by transition credit from
rollout-based state potentials, estimated with semantic expansion and inverse-variance fusion across history
depths. Everything below beyond that is inferred (credit-methods.md section 7):

- peer term A^P: steps whose exact prefix (s_1, a_1, ..., s_t) is shared by two or more rollouts of the group
  form a peer group; the discounted return G_{i,t} (``gamma``) is normalised within it (a lone prefix gets 0).
- potential: for history depth k = 0..``depth`` the key of a visit is (s_{t-k}, a_{t-k}, ..., a_{t-1}, s_t),
  padded before the rollout's start; p_k = (successes + prior) / (visits + 2 prior) over the group's visits
  with that key, Var_k = p_k (1 - p_k) / visits; Phi = sum_k (p_k / Var_k) / sum_k (1 / Var_k)
  (inverse-variance fusion). "Semantic expansion" (merging equivalent observations before counting) is left to
  the env's anchor extractor: anchors are compared exactly here.
- transition credit c_{i,t} = gamma Phi(x_{i,t}) - Phi(s_{i,t}) with Phi(z+) = 1, Phi(z-) = 0 (potential-based
  shaping), standardised over the group's step rows; a group whose rollouts all have one outcome gets c = 0
  (its potentials differ only through the smoothing prior, which carries no information).
- final A = A^E + peer_weight * A^P + transition_weight * norm(c); the weights are unknown (1 by default).
"""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.keys import intern_pairs
from agentbench_crbc.credit.options import GAMMA, NORM, WEIGHT
from agentbench_crbc.credit.returns import discounted_returns
from agentbench_crbc.credit.stats import episode_advantage, keyed_mean_std, normalize_within
from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["fused_potential", "prefix_keys", "progpo", "progpo_terms"]


def prefix_keys(batch: StepBatch) -> tuple[np.ndarray, int]:
    """Per step an id equal iff the exact prefixes (s_1, a_1, ..., s_t) are equal (within one group).

    Window ids double in length each round (log2 of the longest rollout rounds of ``np.unique``).
    """
    prev_action = np.full(batch.n_steps, -1, dtype=np.int64)
    inner = batch.step_t > 1
    prev_action[inner] = batch.step_action[np.flatnonzero(inner) - 1]
    win, n = intern_pairs(prev_action, batch.step_state)  # token t = (a_{t-1}, s_t)
    length, T_max = 1, int(batch.traj_len.max())
    while length < T_max:
        left = np.full(batch.n_steps, -1, dtype=np.int64)  # -1: the window lies wholly before the start
        has = batch.step_t > length
        left[has] = win[np.flatnonzero(has) - length]
        win, n = intern_pairs(left, win)
        length *= 2
    return win, n


def fused_potential(batch: StepBatch, *, depth: int = 1, prior: float = 1.0) -> np.ndarray:
    """Per step, the inverse-variance fusion over depths 0..depth of smoothed success rates."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise OptionError(f"progpo: option depth={depth!r} must be an integer >= 0")
    if prior <= 0:
        raise OptionError(f"progpo: option prior={prior!r} must be > 0 (zero variance means infinite weight)")
    win = batch.traj_success[batch.step_traj].astype(np.float64)
    pair = intern_pairs(batch.step_state, batch.step_action)[0]  # (s, a) token
    key, n_keys = batch.step_state, batch.n_states
    num = np.zeros(batch.n_steps)
    den = np.zeros(batch.n_steps)
    for k in range(depth + 1):
        if k:
            back = np.full(batch.n_steps, -1, dtype=np.int64)
            has = batch.step_t > k
            back[has] = pair[np.flatnonzero(has) - k]
            key, n_keys = intern_pairs(back, key)
        visits = np.bincount(key, minlength=n_keys).astype(np.float64)[key]
        wins = np.bincount(key, weights=win, minlength=n_keys)[key]
        p = (wins + prior) / (visits + 2.0 * prior)
        inv_var = visits / (p * (1.0 - p))
        num += p * inv_var
        den += inv_var
    return num / den


def progpo_terms(batch: StepBatch, *, gamma: float = 1.0, depth: int = 1, prior: float = 1.0,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(peer term A^P, raw transition credit c), one float per step each."""
    ret = discounted_returns(batch, gamma)
    key, n = prefix_keys(batch)
    peer = normalize_within(ret, key, n)
    phi = fused_potential(batch, depth=depth, prior=prior)
    S = batch.n_states
    nxt = batch.step_next
    phi_next = np.where(nxt == S, 1.0, 0.0)
    inner = nxt < S
    phi_next[inner] = phi[np.flatnonzero(inner) + 1]  # the successor is the rollout's next step
    c = gamma * phi_next - phi
    _, sd, _ = keyed_mean_std(batch.traj_outcome, batch.traj_group, batch.n_groups)
    c[sd[batch.step_traj] == 0.0] = 0.0  # one outcome in the group: no information in the potentials
    return peer, c


def progpo(batch: StepBatch, *, gamma: float = 1.0, depth: int = 1, prior: float = 1.0,
           peer_weight: float = 1.0, transition_weight: float = 1.0, norm: str = "std",
           cross_steps: bool = False) -> np.ndarray:
    """ProGPO (reconstruction): A = A^E + peer_weight * A^P + transition_weight * norm(c).

    :param gamma: discount of the peer returns and of the potential shaping.
    :param depth: the deepest history used by the potentials (depths 0..depth are fused).
    :param prior: pseudo-count of the smoothed success rates (1 = Laplace).
    :param norm: ``"std"`` or ``"none"``, for the episode part and the transition credit.
    :param cross_steps: episode statistics over step rows, as in ``grpo``.
    :returns: one float per step.
    """
    peer, c = progpo_terms(batch, gamma=gamma, depth=depth, prior=prior)
    ep = episode_advantage(batch, norm=norm, cross_steps=cross_steps)
    trans = normalize_within(c, batch.step_group, batch.n_groups, std=norm == "std")
    return ep + peer_weight * peer + transition_weight * trans


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("progpo", progpo, bounds={
        "gamma": GAMMA, "depth": Bound(0, 1000, integer=True), "prior": Bound(0.0, lo_open=True),
        "peer_weight": WEIGHT, "transition_weight": WEIGHT, "norm": NORM}, label="ProGPO")
