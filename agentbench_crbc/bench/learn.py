"""Tabular softmax policies trained with each credit method's step credit, all seeds in one vectorised batch.

The loss is plain on-policy policy gradient, ``-mean over steps of credit x log pi(a|s)`` per seed (the trainer's
``step-mean`` aggregation), one Adam step per batch. With one update per batch, as the trainer's default
``ppo_epochs = 1``, the PPO-clip objective's gradient at ratio 1 is exactly this gradient, so this is the trainer's
loss without the KL and entropy terms. Success is the exact success probability of each policy (dynamic
programming), so the curves carry no evaluation noise: their intervals are over seeds only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..credit import assign_batch
from ..credit.batch import StepBatch
from ..host import Host, get_host
from ..tabular.dp import success_probability
from ..tabular.mdp import TabularMDP
from ..tabular.sample import sample_episodes, to_records

__all__ = ["LearnConfig", "LearningCurves", "learn", "softmax"]


@dataclass(frozen=True)
class LearnConfig:
    """Budget and optimiser of one learning run (every method gets the same)."""

    updates: int = 2000
    """Policy updates (one batch each)."""
    seeds: int = 10
    """Independent seeds, trained side by side in one batch (groups never mix seeds)."""
    group_size: int = 8
    """G, rollouts per group."""
    groups: int = 2
    """Groups per seed per update."""
    lr: float = 0.005
    """Adam learning rate on the logits."""
    eval_every: int = 20
    """Exact success is computed every this many updates (and at 0)."""


@dataclass(frozen=True, eq=False)
class LearningCurves:
    """Exact success ``(len(updates), seeds)`` of one method at the listed update counts."""

    method: str
    updates: np.ndarray
    success: np.ndarray


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; ``-inf`` logits (padded actions) get probability 0."""
    z = np.exp(logits - logits.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)  # type: ignore[no-any-return]


def learn(mdp: TabularMDP, method: str, cfg: LearnConfig, *, seed: int = 0, host: Host | None = None,
          options: dict[str, object] | None = None) -> LearningCurves:
    """Train ``cfg.seeds`` tabular softmax policies from the MDP's behaviour policy with ``method``'s credit."""
    host = host or get_host()
    rng = np.random.default_rng(seed)
    K, S, A, G = cfg.seeds, mdp.n_states, mdp.n_actions, cfg.group_size
    with np.errstate(divide="ignore"):
        theta = np.broadcast_to(np.where(mdp.mask, np.log(mdp.policy), -np.inf), (K, S, A)).copy()
    m = np.zeros((K, S, A))
    v = np.zeros((K, S, A))
    b1, b2, eps = 0.9, 0.999, 1e-8
    per_seed = cfg.groups * G
    which = np.repeat(np.arange(K), per_seed)
    evals, curve = [], []
    for u in range(cfg.updates + 1):
        pi = softmax(theta)
        if u % cfg.eval_every == 0 or u == cfg.updates:
            evals.append(u)
            curve.append(success_probability(mdp, pi))
        if u == cfg.updates:
            break
        ep = sample_episodes(mdp, K * per_seed, rng, policy=pi, which=which)
        batch = StepBatch.from_records(to_records(mdp, ep, G))
        credit = assign_batch(method, batch, host=host, **(options or {}))
        epi, _, s, a = ep.steps()
        k = which[epi]
        n_steps = np.bincount(k, minlength=K).astype(float)
        w = credit / n_steps[k]
        hit = np.bincount((k * S + s) * A + a, w, minlength=K * S * A).reshape(K, S, A)
        mass = np.bincount(k * S + s, w, minlength=K * S).reshape(K, S)
        grad = hit - mass[:, :, None] * pi  # ascent direction of mean credit x log pi
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        step = cfg.lr * (m / (1 - b1 ** (u + 1))) / (np.sqrt(v / (1 - b2 ** (u + 1))) + eps)
        theta += np.where(mdp.mask, step, 0.0)
    return LearningCurves(method, np.asarray(evals), np.asarray(curve))
