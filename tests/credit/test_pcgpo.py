"""PCGPO (reconstruction): coverage ranking only in all-failure groups, GRPO elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc import OptionError, StepBatch
from agentbench_crbc.credit import assign
from agentbench_crbc.plugins.pcgpo import coverage, progress_scores

from .toy import toy


def failing_group() -> list[dict]:
    def roll(anchors: str) -> dict:
        return {"group": "f", "steps": [{"anchor": a, "action": "go"} for a in anchors], "success": False}
    return [roll("ABCD"), roll("AAAA"), roll("ABAB"), roll("ABCA")]  # coverage 4, 1, 2, 3


def test_coverage_counts_first_visits() -> None:
    b = StepBatch.from_records(failing_group())
    assert coverage(b).tolist() == [4.0, 1.0, 2.0, 3.0]
    assert progress_scores(b, "rank").tolist() == [4.0, 1.0, 2.0, 3.0]


def test_all_failure_group_is_ranked() -> None:
    out = assign("pcgpo", failing_group())
    ranks = np.array([4.0, 1.0, 2.0, 3.0])
    want = (ranks - ranks.mean()) / (ranks.std(ddof=1) + 1e-6)
    for arr, w in zip(out, want, strict=True):
        np.testing.assert_allclose(arr, w, atol=1e-12)
    assert not np.concatenate(assign("grpo", failing_group())).any()


def test_ties_share_a_rank() -> None:
    recs = failing_group()
    recs[1]["steps"] = recs[3]["steps"]  # coverage 4, 3, 2, 3
    b = StepBatch.from_records(recs)
    assert progress_scores(b, "rank").tolist() == [4.0, 2.5, 1.0, 2.5]


def test_groups_with_a_success_are_plain_grpo() -> None:
    grpo = np.concatenate(assign("grpo", toy()))
    np.testing.assert_array_equal(np.concatenate(assign("pcgpo", toy())), grpo)
    mixed = toy() + failing_group()
    got = assign("pcgpo", mixed)
    np.testing.assert_array_equal(np.concatenate(got[:4]), np.concatenate(assign("grpo", toy())))
    assert np.concatenate(got[4:]).any()


def test_options() -> None:
    cov = np.concatenate(assign("pcgpo", failing_group(), score="coverage", progress_weight=0.5, norm="none"))
    assert cov[0] == pytest.approx(0.5 * (4 - 2.5))
    with pytest.raises(OptionError, match="score"):
        assign("pcgpo", failing_group(), score="length")
