"""A seed's validation before RL taken from its warm start (``run_cell(share_before=True)``) changes no number: the
RL run's facts (per-update held-out success, per-level episodes, training success), records and weights equal
those of the same run computing it itself."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from agentbench_crbc.bench import plan as P
from agentbench_crbc.bench import schedule as S


def _sha(run_dir):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((run_dir / "model").glob("*"))
            if p.suffix == ".safetensors"}


@pytest.mark.slow
def test_a_shared_validation_before_rl_changes_no_number(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch", reason="trains a tiny model: needs the train extra")
    tiny = dataclasses.replace(P.MODES["quick"], variants=("crbc",), warm_steps=2, updates=2, groups=2,
                               group_size=2, eval_episodes=4, eval_every=1)
    monkeypatch.setitem(P.MODES, "tiny", tiny)
    warm, rl, _ = P.plan("tiny", seeds=[0], extra=["threads=1", "env.max_steps=6"])
    wdir = S.run_cell(warm, tmp_path / "warm", warm_dir=None, minutes=None)
    assert S._warm_before(S.cell_config(rl, tmp_path / "x", wdir, None), wdir) is not None  # it applies here
    own = S.run_cell(rl, tmp_path / "own", warm_dir=wdir, minutes=None, share_before=False)
    shared = S.run_cell(rl, tmp_path / "shared", warm_dir=wdir, minutes=None, share_before=True)
    a, b = S._run_facts(own), S._run_facts(shared)
    a.pop("rl_seconds"), b.pop("rl_seconds")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert _sha(own) == _sha(shared) and _sha(own)
    recs = [[{k: v for k, v in json.loads(ln).items() if k != "run"}
             for ln in (d / "eval" / "records.jsonl").read_text().splitlines()] for d in (own, shared)]
    assert recs[0] == recs[1]
