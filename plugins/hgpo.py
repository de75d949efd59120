"""HGPO: history-consistent step groups aggregated across history lengths (reconstruction; see the docstring).

Source: a public copy of verl-agent's HGPO recipe (``recipe/hgpo/core_hgpo.py``, "History-based Group Policy
Optimization"); the paper itself was not available, so this follows that code and is marked a reconstruction.
Per group, a step (i, t) belongs to one step group per history length k = 0..K: the steps whose current anchor
and previous k anchors are all equal (observations only, no actions; a step with fewer than k predecessors has
no group at that k). Within every group of two or more steps the discounted return R_{i,t} (GiGPO Eq. 5,
``gamma``) is normalised (``mean_std_norm``: by the population std, as the recipe's ``std(unbiased=False)``;
``mean_norm``: centred only). A step's credit is the weighted mean of its non-zero normalised returns, weight
(k + 2)^alpha for history length k (the recipe's (L + 1)^alpha with L = k + 1 anchors), over (sum of weights +
1e-6). With ``base_group`` the GRPO episode advantage joins the mean as one more item of weight 1 (the
recipe's k = 0 item); without it (the recipe's default) there is no separate episode part.
"""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.keys import intern_pairs
from agentbench_crbc.credit.options import GAMMA, MODE, OPTIONAL_NORM, mode_uses_std
from agentbench_crbc.credit.returns import discounted_returns
from agentbench_crbc.credit.stats import EPS, episode_advantage, keyed_mean_std
from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["hgpo", "history_keys"]


def history_keys(batch: StepBatch, K: int) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """For k = 0..K: (mask of steps with at least k predecessors, key id per step, number of ids).

    Keys are equal iff the steps' current and previous k anchors are equal (within one group; anchors are
    already group-specific states).
    """
    out = [(np.ones(batch.n_steps, dtype=bool), batch.step_state, batch.n_states)]
    prev_key = batch.step_state
    for k in range(1, K + 1):
        mask = batch.step_t > k
        if not mask.any():
            break
        pos = np.flatnonzero(mask)
        left = prev_key[pos - 1]  # window of k anchors ending at the previous step (same rollout: t > k >= 1)
        ids, n = intern_pairs(left, batch.step_state[pos])
        key = np.full(batch.n_steps, -1, dtype=np.int64)
        key[pos] = ids
        out.append((mask, key, n))
        prev_key = key
    return out


def hgpo(batch: StepBatch, *, history: int = 2, gamma: float = 1.0, alpha: float = 1.0,
         mode: str = "mean_std_norm", base_group: bool = False, norm: str | None = None,
         cross_steps: bool = False) -> np.ndarray:
    """HGPO: per step, the (k + 2)^alpha-weighted mean of its normalised returns over histories k = 0..K.

    :param history: K, the most previous anchors a step group may require (the recipe's ``history_length``).
    :param gamma: discount of the step returns (the recipe's default 1.0).
    :param alpha: the recipe's ``length_weight_alpha``: longer, more consistent histories weigh more.
    :param mode: ``mean_std_norm`` or ``mean_norm``; ``norm`` overrides it for the episode item.
    :param base_group: add the GRPO episode advantage (``norm``, ``cross_steps``) as an item of weight 1.
    :returns: one float per step.
    """
    if isinstance(history, bool) or not isinstance(history, int) or history < 0:
        raise OptionError(f"hgpo: option history={history!r} must be an integer >= 0")
    use_std = mode_uses_std(mode)
    ret = discounted_returns(batch, gamma)
    num = np.zeros(batch.n_steps)
    den = np.zeros(batch.n_steps)
    if base_group:
        ep = episode_advantage(batch, norm=norm or ("std" if use_std else "none"), cross_steps=cross_steps)
        on = ep != 0.0
        num[on] += ep[on]
        den[on] += 1.0
    for k, (mask, key, n) in enumerate(history_keys(batch, history)):
        pos = np.flatnonzero(mask)
        r = ret[pos]
        mean, sd, count = keyed_mean_std(r, key[pos], n)
        dev = r - mean
        if use_std:
            pop_sd = sd * np.sqrt((count - 1.0) / np.maximum(count, 1.0))
            adv = dev / (pop_sd + EPS)
        else:
            adv = dev
        adv[(count < 2) | (dev == 0.0)] = 0.0
        on = adv != 0.0
        w = float(k + 2) ** alpha
        num[pos[on]] += w * adv[on]
        den[pos[on]] += w
    return num / (den + EPS)


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("hgpo", hgpo, bounds={
        # K rounds of keying, weights (K + 2)^alpha: bounded so both stay finite and quick (4^1000 overflows)
        "history": Bound(0, 1000, integer=True), "alpha": Bound(0.0, 20.0), "gamma": GAMMA, "mode": MODE,
        "norm": OPTIONAL_NORM}, label="HGPO")
