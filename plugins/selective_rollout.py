"""Selective-rollout group gate (zhiyuanZhai20/selective-rollout): stop groups with converged prefixes.

Source: the project's code (``src/divergence.py``, ``src/rollout.py``) and paper (``paper/paper.tex``).
Checked once, right after the group's K-th environment step: each rollout's prefix is its first K action
strings, right-padded with ``<END>`` when it ended earlier; d_K is the mean over all pairs of rollouts of the
token-level Levenshtein distance (a token is a whole action string, unit costs) divided by the longer prefix's
length. The gate fires when d_K < ``threshold``; the optional OR-rule (the paper's appendix) also fires when
the fraction of rollouts that ended before step K is at least ``end_fraction``. When it fires the rollout
engine stops the group and drops it from the gradient batch. Caution (inferred): the premise "converged
prefixes, zero-variance group" holds for GRPO; with step-level credit a dropped group may still have carried
step credit.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from agentbench_crbc import hookimpl
from agentbench_crbc.errors import OptionError, RecordError
from agentbench_crbc.host import Bound, GateRegister

__all__ = ["END", "levenshtein", "prefix_divergence", "selective_rollout"]

#: Padding token of a rollout that ended before step K.
END = "<END>"


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Edit distance between two token sequences (insert, delete, substitute: cost 1 each)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def prefix_divergence(actions: Sequence[Sequence[str]], K: int) -> float:
    """d_K: mean over pairs of rollouts of Lev(p_i, p_j) / max(|p_i|, |p_j|), p_i the END-padded K-prefix."""
    if len(actions) < 2:
        raise RecordError(f"selective_rollout: a group needs at least 2 rollouts to compare, "
                          f"got {len(actions)}")
    prefixes = [list(a[:K]) + [END] * (K - len(a[:K])) for a in actions]
    dists = [levenshtein(p, q) / max(len(p), len(q), 1) for p, q in combinations(prefixes, 2)]
    return sum(dists) / len(dists)


def selective_rollout(actions: Sequence[Sequence[str]], step: int, *, K: int = 10, threshold: float = 0.12,
                      or_rule: bool = False, end_fraction: float = 0.9) -> bool:
    """Whether to stop (and drop) the group now.

    :param actions: the group's action strings so far, one sequence per rollout (a shorter one has ended).
    :param step: how many environment steps the group has taken; the gate decides only at ``step == K``.
    :param K: the check step (paper default 10).
    :param threshold: d_L: fire when the prefix divergence d_K is below it (paper default 0.12).
    :param or_rule: also fire when at least ``end_fraction`` of the rollouts ended before step K.
    :returns: True to stop the group.
    """
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise OptionError(f"selective_rollout: option K={K!r} must be an integer >= 1")
    if not 0.0 <= end_fraction <= 1.0:
        raise OptionError(f"selective_rollout: option end_fraction={end_fraction!r} must lie in [0, 1]")
    if step != K:
        return False
    if prefix_divergence(actions, K) < threshold:
        return True
    if or_rule:
        ended = sum(len(a) <= K - 1 for a in actions) / len(actions)
        return ended >= end_fraction
    return False


@hookimpl
def abc_register_group_gates(register: GateRegister) -> None:
    register.add("selective_rollout", selective_rollout, bounds={
        "K": Bound(1, integer=True), "threshold": Bound(), "end_fraction": Bound(0.0, 1.0)})
