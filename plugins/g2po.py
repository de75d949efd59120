"""G2PO: graph-grouped policy optimisation with group-aggregated state values (Wang et al., arXiv 2606.22995).

Source: the paper's abstract plus the public code ``Nala-YN/G2PO`` (``g2po/core_g2po.py``); the full paper
text was not available. Per group, each anchor s gets the value V(s) = mean over its visits (i, t) of
gamma^(T_i - t + 1) * R_i (t 1-indexed); the boundaries are V(z+) = R_i of the successful rollout (the code's
SUCCESS_REWARD) and V(z-) = 0. The step part has two terms:

1. local: within each anchor group of two or more visits, the successor value V(x_{i,t}) minus
   ``invalid_penalty`` for an invalid action, normalised (a lone anchor gets 0);
2. global (edge-centric): the value gain V(x_{i,t}) - V(s_{i,t}), normalised over all step rows of the group.

Final: A = A^E + step_weight * (local + global), with ``mode`` (``mean_std_norm`` or ``mean_norm``) applied to
the episode part and both terms, as the code does. A group of a single step row gets a zero global term (the
code's ``torch.std`` of one element is NaN).
"""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.options import GIGPO_BOUNDS, WEIGHT, mode_uses_std
from agentbench_crbc.credit.stats import episode_advantage, normalize_within
from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import CreditRegister

__all__ = ["g2po", "g2po_terms", "group_values"]


def group_values(batch: StepBatch, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """(V per state, V of each step's successor): visit means of gamma^(T - t + 1) R; z+ = R_i, z- = 0."""
    if not 0.0 <= gamma <= 1.0:
        raise OptionError(f"g2po: option gamma={gamma!r} must lie in [0, 1]")
    T = batch.traj_len[batch.step_traj]
    R = batch.traj_outcome[batch.step_traj]
    g = np.power(gamma, (T - batch.step_t + 1).astype(np.float64)) * R
    S = batch.n_states
    V = np.bincount(batch.step_state, weights=g, minlength=S) / np.maximum(
        np.bincount(batch.step_state, minlength=S), 1)
    nxt = batch.step_next
    v_next = np.where(nxt == S, R, 0.0)
    inner = nxt < S
    v_next[inner] = V[nxt[inner]]
    return V, v_next


def g2po_terms(batch: StepBatch, *, gamma: float = 0.95, mode: str = "mean_std_norm",
               invalid_penalty: float = 0.1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The local term, the raw value gain and the normalised global term, one float per step each."""
    use_std = mode_uses_std(mode)
    V, v_next = group_values(batch, gamma)
    score = v_next - invalid_penalty * (~batch.step_valid)
    local = normalize_within(score, batch.step_state, batch.n_states, std=use_std)
    gain = v_next - V[batch.step_state]
    glob = normalize_within(gain, batch.step_group, batch.n_groups, std=use_std)
    return local, gain, glob


def g2po(batch: StepBatch, *, gamma: float = 0.95, step_weight: float = 1.0, mode: str = "mean_std_norm",
         invalid_penalty: float = 0.1, norm: str | None = None, cross_steps: bool = False) -> np.ndarray:
    """G2PO: A = A^E + step_weight * (local + global).

    :param gamma: discount of the group-aggregated values (hard-coded 0.95 in the code).
    :param mode: ``mean_std_norm`` or ``mean_norm``, for all parts; ``norm`` overrides the episode part.
    :param invalid_penalty: subtracted from an invalid step's successor value in the local term.
    :param cross_steps: episode statistics over step rows (verl-agent's default).
    :returns: one float per step.
    """
    use_std = mode_uses_std(mode)
    ep = episode_advantage(batch, norm=norm or ("std" if use_std else "none"), cross_steps=cross_steps)
    local, _, glob = g2po_terms(batch, gamma=gamma, mode=mode, invalid_penalty=invalid_penalty)
    return ep + step_weight * (local + glob)


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("g2po", g2po, bounds={**GIGPO_BOUNDS, "invalid_penalty": WEIGHT}, label="G2PO")
