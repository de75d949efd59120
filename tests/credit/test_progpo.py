"""ProGPO (reconstruction) against credit-methods.md section 7's illustrative toy terms, plus its keys."""

from __future__ import annotations

import numpy as np
import pytest

from agentbench_crbc import OptionError, StepBatch
from agentbench_crbc.credit import assign
from agentbench_crbc.plugins.progpo import prefix_keys, progpo_terms

from .toy import toy

PEER = [0.866, 0.7071, -0.866, -0.7071, 0, 0.866, 0, 0, -0.866, 0, 0]
TRANSITION = [0.04, 0.5, 0.04, -0.1176, -0.3824, 0.2067, -0.1961, 0.5294, -0.0486, -0.029, -0.3824]


def test_toy_terms() -> None:
    peer, c = progpo_terms(StepBatch.from_records(toy()))
    np.testing.assert_allclose(peer, PEER, atol=1e-4)
    np.testing.assert_allclose(c, TRANSITION, atol=1e-4)


def test_toy_final_is_the_sum_of_its_parts() -> None:
    c = np.asarray(TRANSITION)
    norm_c = (c - c.mean()) / (c.std(ddof=1) + 1e-6)
    episode = np.repeat([0.8660, -0.8660, 0.8660, -0.8660], [2, 3, 3, 3])
    out = np.concatenate(assign("progpo", toy()))
    np.testing.assert_allclose(out, episode + np.asarray(PEER) + norm_c, atol=2e-3)
    only_peer = np.concatenate(assign("progpo", toy(), transition_weight=0.0))
    np.testing.assert_allclose(only_peer, episode + np.asarray(PEER), atol=1e-4)


def test_prefix_keys_match_a_dictionary_trie() -> None:
    rng = np.random.default_rng(3)
    recs = []
    for i in range(12):
        n = int(rng.integers(1, 40))
        recs.append({"group": f"g{i % 2}", "success": bool(i % 3),
                     "steps": [{"anchor": f"s{rng.integers(2)}", "action": f"a{rng.integers(2)}"}
                               for _ in range(n)]})
    b = StepBatch.from_records(recs)
    key, _ = prefix_keys(b)
    want, table = [], {}
    for r in recs:
        prefix: tuple = (r["group"],)
        for s in r["steps"]:
            prefix = (*prefix, s["anchor"])
            want.append(table.setdefault(prefix, len(table)))
            prefix = (*prefix, s["action"])
    # equal keys exactly where the prefixes are equal
    want_arr = np.asarray(want)
    assert np.array_equal(key[:, None] == key[None, :], want_arr[:, None] == want_arr[None, :])


def test_one_outcome_groups_get_no_transition_credit() -> None:
    recs = toy()
    for r in recs:
        r["success"] = False
    _, c = progpo_terms(StepBatch.from_records(recs))
    assert not c.any()
    assert not np.concatenate(assign("progpo", recs)).any()


def test_bad_options() -> None:
    with pytest.raises(OptionError, match="prior"):
        assign("progpo", toy(), prior=0.0)
    with pytest.raises(OptionError, match="depth"):
        assign("progpo", toy(), depth=-2)
