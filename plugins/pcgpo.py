"""PCGPO: progress-conditioned GPO, a reconstruction: ranks all-failure groups by exploration coverage.

Reconstructed from a one-line description (no paper text or code was available): where every rollout of a
group failed, GRPO's advantage is zero and the group teaches nothing; PCGPO ranks those rollouts by progress
instead, measured as first-visit observation coverage. Inferred choices:

- coverage_i = the number of distinct anchors rollout i visits (first visits count, revisits and loops do
  not); a per-rollout measure, so reordering rollouts changes nothing.
- ``score="rank"`` uses the rollouts' average ranks of coverage within the group (ties share a rank),
  ``score="coverage"`` the coverage itself; either is standardised within the group (``norm``) and scaled by
  ``progress_weight``, broadcast to every step of the rollout and added to the GRPO part (which is zero there
  unless failed rollouts carry different partial rewards R).
- groups with at least one success keep plain GRPO (``norm``, ``cross_steps``); a group of one rollout gets 0.
"""

from __future__ import annotations

import numpy as np

from agentbench_crbc import hookimpl
from agentbench_crbc.credit.batch import StepBatch
from agentbench_crbc.credit.stats import episode_advantage, normalize_within
from agentbench_crbc.errors import OptionError
from agentbench_crbc.host import Bound, CreditRegister

__all__ = ["coverage", "pcgpo", "progress_scores"]


def coverage(batch: StepBatch) -> np.ndarray:
    """Per rollout, the number of distinct anchors it visits."""
    firsts = np.unique(batch.step_traj * max(batch.n_states, 1) + batch.step_state) // max(batch.n_states, 1)
    return np.bincount(firsts, minlength=batch.n_traj).astype(np.float64)


def _group_average_ranks(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """1-based average ranks of ``values`` within each group (ties share the mean rank), vectorised."""
    order = np.lexsort((values, groups))
    v, g = values[order], groups[order]
    new_run = np.ones(len(v), dtype=bool)
    new_run[1:] = (v[1:] != v[:-1]) | (g[1:] != g[:-1])
    run = np.cumsum(new_run) - 1
    new_group = np.ones(len(v), dtype=bool)
    new_group[1:] = g[1:] != g[:-1]
    pos = np.arange(len(v)) - np.maximum.accumulate(np.where(new_group, np.arange(len(v)), 0)) + 1.0
    mean_pos = np.bincount(run, weights=pos) / np.bincount(run)
    out = np.empty(len(v))
    out[order] = mean_pos[run]
    return out


def progress_scores(batch: StepBatch, score: str = "rank") -> np.ndarray:
    """Per rollout the progress score that is standardised in all-failure groups."""
    cov = coverage(batch)
    if score == "coverage":
        return cov
    if score == "rank":
        return _group_average_ranks(cov, batch.traj_group)
    raise OptionError(f"pcgpo: option score={score!r} must be 'rank' or 'coverage'")


def pcgpo(batch: StepBatch, *, progress_weight: float = 1.0, score: str = "rank", norm: str = "std",
          cross_steps: bool = False) -> np.ndarray:
    """PCGPO (reconstruction): GRPO plus, in all-failure groups, rollouts ranked by anchor coverage.

    :param progress_weight: scale of the progress advantage in all-failure groups.
    :param score: ``"rank"`` (average ranks of coverage) or ``"coverage"`` (distinct anchors visited).
    :param norm: ``"std"`` or ``"none"``, for the GRPO part and the progress part.
    :param cross_steps: GRPO statistics over step rows, as in ``grpo``.
    :returns: one float per step.
    """
    ep = episode_advantage(batch, norm=norm, cross_steps=cross_steps)
    wins = np.bincount(batch.traj_group, weights=batch.traj_success, minlength=batch.n_groups)
    all_fail = (wins == 0)[batch.traj_group]
    if not all_fail.any():
        return ep
    scores = progress_scores(batch, score)
    prog = normalize_within(scores, batch.traj_group, batch.n_groups, std=norm == "std")
    per_traj = np.where(all_fail, progress_weight * prog, 0.0)
    return ep + per_traj[batch.step_traj]


@hookimpl
def abc_register_credit_assigners(register: CreditRegister) -> None:
    register.add_batched("pcgpo", pcgpo, bounds={
        "progress_weight": Bound(), "score": Bound(choices=("rank", "coverage")),
        "norm": Bound(choices=("std", "none"))}, label="PCGPO")
