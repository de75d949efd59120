"""The selective-rollout group gate on credit-methods.md section 8's examples, its options, and its hook."""

from __future__ import annotations

import pytest

from agentbench_crbc import OptionError, RecordError
from agentbench_crbc.host import get_host
from agentbench_crbc.plugins.selective_rollout import levenshtein, prefix_divergence, selective_rollout

DIVERSE = [["go", "take", "open"]] * 3 + [["go", "look", "open"]]
SAME = [["go", "take", "open"]] * 4
ENDED = [["go", "take", "open"]] * 3 + [["go", "take"]]


def test_section_8_examples() -> None:
    assert prefix_divergence(DIVERSE, 3) == pytest.approx(1 / 6)
    assert not selective_rollout(DIVERSE, 3, K=3)
    assert prefix_divergence(SAME, 3) == 0.0
    assert selective_rollout(SAME, 3, K=3)
    assert prefix_divergence(ENDED, 3) == pytest.approx(1 / 6)
    assert not selective_rollout(ENDED, 3, K=3)


def test_defaults_k10_threshold_012() -> None:
    steps = [f"step{t}" for t in range(10)]
    same = [steps] * 8
    assert not selective_rollout(same, 9)  # decides only at step K = 10
    assert selective_rollout(same, 10)
    assert not selective_rollout(same, 11)
    # one of 8 rollouts differs in 8 of 10 actions: d = 7 * 0.8 / 28 = 0.2 >= 0.12
    odd = [steps] * 7 + [steps[:2] + [f"x{t}" for t in range(8)]]
    assert prefix_divergence(odd, 10) == pytest.approx(0.2)
    assert not selective_rollout(odd, 10)
    # differing in 4 of 10: d = 7 * 0.4 / 28 = 0.1 < 0.12
    near = [steps] * 7 + [steps[:6] + [f"x{t}" for t in range(4)]]
    assert selective_rollout(near, 10)
    assert selective_rollout(odd, 10, threshold=0.25)


def test_or_rule_on_early_termination() -> None:
    done = [["a", "b"]] * 7 + [["a", "c", "d", "e"]]  # 7/8 = 0.875 ended before K = 4
    assert not selective_rollout(done, 4, K=4, threshold=0.0)
    assert not selective_rollout(done, 4, K=4, threshold=0.0, or_rule=True)
    assert selective_rollout(done, 4, K=4, threshold=0.0, or_rule=True, end_fraction=0.85)


def test_levenshtein_on_tokens() -> None:
    assert levenshtein(["a", "b", "c"], ["a", "c"]) == 1
    assert levenshtein(["go to desk 1"], ["go to desk 2"]) == 1  # whole action strings are the tokens
    assert levenshtein([], ["x", "y"]) == 2


def test_errors() -> None:
    with pytest.raises(RecordError, match="at least 2"):
        selective_rollout([["a"]], 10)
    with pytest.raises(OptionError, match="K="):
        selective_rollout(SAME, 3, K=0)


def test_registered_through_the_hook() -> None:
    gate = get_host().gate("selective_rollout")
    assert gate.options == {"K": 10, "threshold": 0.12, "or_rule": False, "end_fraction": 0.9}
    assert gate.fn(SAME, 10) is True
