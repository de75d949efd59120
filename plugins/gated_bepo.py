"""Gated-BEPO: confidence-gated Bellman credit (Yan et al., arXiv 2608.06861), a reconstruction.

Only the abstract was available (no method text, no code). What it states: an empirical rollout graph per
group; node values from a mean-backup Bellman fixed point under the current policy's empirical action
distribution; TD residuals accumulated along each sampled trajectory with GAE; a confidence gate that gives
Bellman step credit only at states with several observed successors and leaves the rest to episode-level
credit.

Inferred here (each choice is an option or named below):

- V is the behaviour-policy fixed point (I - gamma P) V = b with P(s'|s) = N(s -> s') / N(s),
  V(z+) = 1, V(z-) = 0: the same system as CRBC's closure, solved by
  :func:`agentbench_crbc.credit.closure.closure`. Every rollout's last step goes to z+ or z- (truncation is
  failure), so gamma = 1 is solvable; input that cannot reach a boundary raises :class:`CreditError`.
- delta_{i,t} = gamma V(x_{i,t}) - V(s_{i,t}) (outcome-only values; intermediate step rewards are not used),
  A^GAE_{i,t} = sum_l (gamma lam)^l delta_{i,t+l} within the rollout.
- gate g(s) = [number of distinct observed successors of s, boundaries included, >= ``min_successors``].
- ``step_norm="group"`` standardises A^GAE over all step rows of the group (``"none"`` keeps it raw).
- final A_{i,t} = A^E_i + g(s_{i,t}) * step_weight * norm(A^GAE)_{i,t}; the abstract's "adaptive mixing" of
  the two parts is unknown and not modelled (a fixed ``step_weight``).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.closure import closure
from agentbench_crbc.credit.stats import episode_advantage, keyed_mean_std, normalize_within
from agentbench_crbc.errors import CreditError, OptionError
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["bellman_values", "gated_bepo", "gated_bepo_terms", "reverse_discounted_sum", "successor_gate"]

# padded 2-D filtering is used while it costs at most this many cells per step (else a per-rollout loop)
_PAD_FACTOR = 8
# below this group std the GAE counts as constant (the linear solve leaves ~1e-16 noise that std-normalising
# would blow up to O(1e-10) and make the credit depend on the order of rollouts)
_FLAT = 1e-9


def reverse_discounted_sum(values: np.ndarray, batch: StepBatch, c: float) -> np.ndarray:
    """Per step, sum_{l >= 0} c^l values_{i,t+l} within its rollout (the GAE / discounted-return sum)."""
    values = np.asarray(values, dtype=np.float64)
    T_max = int(batch.traj_len.max())
    if batch.n_traj * T_max <= _PAD_FACTOR * batch.n_steps + 4096:
        col = batch.step_t - 1
        pad = np.zeros((batch.n_traj, T_max))
        pad[batch.step_traj, col] = values
        # reversed rows start with the zero padding, which contributes nothing to the recursion
        out = lfilter([1.0], [1.0, -c], pad[:, ::-1], axis=1)[:, ::-1]
        return np.ascontiguousarray(out[batch.step_traj, col])
    out = np.empty_like(values)
    for s, n in zip(batch.traj_start.tolist(), batch.traj_len.tolist(), strict=True):
        out[s:s + n] = lfilter([1.0], [1.0, -c], values[s:s + n][::-1])[::-1]
    return out


def bellman_values(batch: StepBatch, gamma: float) -> np.ndarray:
    """V over states, then V(z+) = 1, V(z-) = 0: the empirical behaviour-policy fixed point at gamma."""
    if not 0.0 < gamma <= 1.0:
        raise OptionError(f"gated_bepo: option gamma={gamma!r} must lie in (0, 1]")
    try:
        V = closure(batch, beta=gamma).V
    except CreditError as exc:
        raise CreditError(f"gated_bepo: {str(exc).removeprefix('crbc: ')}") from None
    return np.concatenate([V, [1.0, 0.0]])


def successor_gate(batch: StepBatch, min_successors: int = 2) -> np.ndarray:
    """Per state: at least ``min_successors`` distinct observed successors (boundaries count)?"""
    S = batch.n_states
    pairs = np.unique(batch.step_state * (S + 2) + batch.step_next)
    return np.bincount(pairs // (S + 2), minlength=S) >= min_successors


def gated_bepo_terms(batch: StepBatch, *, gamma: float = 1.0, lam: float = 0.95, min_successors: int = 2,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(V with boundaries, TD residuals, GAE, gate per step) of a batch."""
    if not 0.0 <= lam <= 1.0:
        raise OptionError(f"gated_bepo: option lam={lam!r} must lie in [0, 1]")
    V = bellman_values(batch, gamma)
    delta = gamma * V[batch.step_next] - V[batch.step_state]
    gae = reverse_discounted_sum(delta, batch, gamma * lam)
    gate = successor_gate(batch, min_successors)[batch.step_state]
    return V, delta, gae, gate


def gated_bepo(batch: StepBatch, *, gamma: float = 1.0, lam: float = 0.95, step_weight: float = 1.0,
               min_successors: int = 2, step_norm: str = "group", norm: str = "std",
               cross_steps: bool = False) -> np.ndarray:
    """Gated-BEPO: A = A^E + gate(s) * step_weight * norm(GAE of Bellman TD residuals).

    :param gamma: discount of the fixed point and the TD residuals, in (0, 1].
    :param lam: GAE lambda; lam = 1 telescopes to R_i - V(s_t) at gamma = 1, lam = 0 is one-step TD.
    :param min_successors: the confidence gate's threshold on distinct observed successors.
    :param step_norm: ``"group"`` standardises the GAE over the group's step rows, ``"none"`` keeps it raw.
    :param norm: ``"std"`` or ``"none"`` for the episode part; ``cross_steps`` as in ``grpo``.
    :returns: one float per step.
    """
    if step_norm not in ("group", "none"):
        raise OptionError(f"gated_bepo: option step_norm={step_norm!r} must be 'group' or 'none'")
    _, _, gae, gate = gated_bepo_terms(batch, gamma=gamma, lam=lam, min_successors=min_successors)
    if step_norm == "group":
        _, sd, _ = keyed_mean_std(gae, batch.step_group, batch.n_groups)
        gae = normalize_within(gae, batch.step_group, batch.n_groups)
        gae[sd < _FLAT] = 0.0  # a group whose GAE is constant up to solver rounding has no step signal
    ep = episode_advantage(batch, norm=norm, cross_steps=cross_steps)
    return ep + np.where(gate, step_weight * gae, 0.0)


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("gated_bepo", gated_bepo, bounds={
        "gamma": Bound(0.0, 1.0, lo_open=True), "lam": Bound(0.0, 1.0), "step_weight": Bound(),
        "min_successors": Bound(0, integer=True), "step_norm": Bound(choices=("group", "none")),
        "norm": Bound(choices=("std", "none"))}, label="Gated-BEPO")
