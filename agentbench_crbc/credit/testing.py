"""The credit test kit: ``check_credit_assigner`` (contract section 5) and the record builders it and tests use.

The pytest fixtures (``make_group``, ``credit_checker``) live in :mod:`agentbench_crbc.testing`, the pytest11
entry point, which re-exports these.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import CreditError
from ..host import CreditMethod, get_host, options_of
from .assign import run_method
from .batch import StepBatch

__all__ = ["check_credit_assigner", "degenerate_groups", "make_group", "random_groups"]

Records = list[dict[str, Any]]


def make_group(*, n_traj: int = 4, n_steps: int | Sequence[int] = 3, shared_anchors: bool = True,
               success: Sequence[bool] | None = None, group: str = "g0", seed: int = 0,
               n_anchors: int = 3, n_actions: int = 2) -> Records:
    """Records of one group: ``n_traj`` rollouts of ``n_steps`` steps (an int or one per rollout).

    With ``shared_anchors`` the anchors come from a small pool so that rollouts revisit each other's states.
    """
    rng = np.random.default_rng(seed)
    lens = [n_steps] * n_traj if isinstance(n_steps, int) else list(n_steps)
    wins = list(success) if success is not None else [bool(x) for x in rng.integers(0, 2, n_traj)]
    out = []
    for i, (T, win) in enumerate(zip(lens, wins, strict=True)):
        steps = []
        for t in range(T):
            a = f"s{rng.integers(n_anchors)}" if shared_anchors else f"{group}-r{i}-t{t}"
            steps.append({"anchor": a, "action": f"a{rng.integers(n_actions)}"})
        out.append({"group": group, "steps": steps, "success": win})
    return out


def random_groups(seed: int, n_groups: int = 3) -> Records:
    """A seeded batch of several groups with revisits, self-loops, varied lengths and outcomes."""
    rng = np.random.default_rng(seed)
    out: Records = []
    for g in range(n_groups):
        n = int(rng.integers(1, 9))
        lens = [int(x) for x in rng.integers(1, 13, n)]
        out += make_group(n_traj=n, n_steps=lens, group=f"g{g}", seed=int(rng.integers(1 << 30)),
                          n_anchors=int(rng.integers(1, 6)), n_actions=int(rng.integers(1, 4)))
    return out


def degenerate_groups() -> dict[str, Records]:
    """The edge cases of contract section 5, one named batch each."""
    loop = [{"anchor": "A", "action": "stay"}] * 6 + [{"anchor": "B", "action": "go"}]
    return {
        "single trajectory": make_group(n_traj=1, n_steps=4),
        "single steps": make_group(n_traj=5, n_steps=1),
        "all success": make_group(n_traj=4, n_steps=[2, 3, 1, 4], success=[True] * 4),
        "all failure": make_group(n_traj=4, n_steps=[2, 3, 1, 4], success=[False] * 4),
        "self-loops and cycles": [
            {"group": "c", "steps": loop, "success": True},
            {"group": "c", "steps": [{"anchor": "A", "action": "go"}, {"anchor": "B", "action": "back"},
                                     {"anchor": "A", "action": "go"}], "success": False},
            {"group": "c", "steps": [{"anchor": "B", "action": "back"}], "success": False},
        ],
        "anchors seen once": make_group(n_traj=4, n_steps=3, shared_anchors=False),
        "json anchors": [{"group": "j", "steps": [{"anchor": [1, 2], "action": "x"}, {"anchor": {"k": 1},
                          "action": "y"}], "success": True},
                         {"group": "j", "steps": [{"anchor": [1, 2], "action": "y"}], "success": False}],
        "10k steps in one group": make_group(n_traj=8, n_steps=1250, n_anchors=40, n_actions=4, seed=7),
    }


def _as_method(fn: str | CreditMethod | Callable[..., Any], batched: bool | None) -> CreditMethod:
    if isinstance(fn, CreditMethod):
        return fn
    if isinstance(fn, str):
        return get_host().credit_method(fn)  # type: ignore[no-any-return]
    if batched is None:
        ann = next(iter(getattr(fn, "__annotations__", {}).values()), "")
        batched = "StepBatch" in str(ann)
    return CreditMethod(getattr(fn, "__name__", "fn"), fn, batched, "<test>", "<test>", "", options_of(fn))


def _credit(m: CreditMethod, records: Records, options: Mapping[str, Any]) -> list[np.ndarray]:
    batch = StepBatch.from_records(copy.deepcopy(records))
    try:
        return batch.split(run_method(m, batch, options))
    except CreditError as exc:  # the host's own checks (shape, finiteness) are contract failures here
        raise AssertionError(f"{m.name}: {exc}") from None


def check_credit_assigner(fn: str | CreditMethod | Callable[..., Any], *, options: Mapping[str, Any] | None = None,
                          batched: bool | None = None, extra: Sequence[Records] = (), seeds: int = 6) -> None:
    """Assert contract section 5 for a credit assigner; raises ``AssertionError`` naming the broken promise.

    :param fn: a registered method name, a :class:`CreditMethod`, or a callable (per-group
        ``fn(group, **options) -> list[array]``, or batched ``fn(batch: StepBatch, **options) -> array``, detected
        from the first parameter's annotation unless ``batched`` is given).
    :param options: method options to test with (defaults otherwise).
    :param extra: more record batches to check besides the generated and degenerate ones.
    """
    m = _as_method(fn, batched)
    opts = m.check_options(dict(options or {}))
    torch_loaded = "torch" in sys.modules
    cases = dict(degenerate_groups())
    cases.update({f"random batch {s}": random_groups(s) for s in range(seeds)})
    cases.update({f"extra {i}": r for i, r in enumerate(extra)})
    for name, records in cases.items():
        out = _credit(m, records, opts)
        where = f"{m.name} on {name!r}"
        assert len(out) == len(records), f"{where}: {len(out)} arrays for {len(records)} trajectories"
        for rec, arr in zip(records, out, strict=True):
            assert isinstance(arr, np.ndarray) and arr.dtype == np.float64, f"{where}: not a float64 numpy array"
            assert arr.shape == (len(rec["steps"]),), f"{where}: shape {arr.shape}, want ({len(rec['steps'])},)"
            assert np.isfinite(arr).all(), f"{where}: non-finite credit {arr}"
        again = _credit(m, records, opts)
        assert all(np.array_equal(a, b) for a, b in zip(out, again, strict=True)), f"{where}: not deterministic"
        _check_permutation(m, records, opts, out, where)
        _check_independence(m, records, opts, out, where)
    if not torch_loaded:
        assert "torch" not in sys.modules, f"{m.name}: the credit layer imported torch; use numpy/scipy only"


def _close(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return all(np.allclose(x, y, rtol=1e-9, atol=1e-12) for x, y in zip(a, b, strict=True))


def _check_permutation(m: CreditMethod, records: Records, opts: Mapping[str, Any], out: list[np.ndarray],
                       where: str) -> None:
    perm = np.random.default_rng(len(records)).permutation(len(records))
    permuted = _credit(m, [records[i] for i in perm], opts)
    assert _close(permuted, [out[i] for i in perm]), f"{where}: reordering trajectories changed their credit"


def _check_independence(m: CreditMethod, records: Records, opts: Mapping[str, Any], out: list[np.ndarray],
                        where: str) -> None:
    other = random_groups(99, n_groups=2)
    for rec in other:
        rec["group"] = "__other__" + rec["group"]
    together = _credit(m, other + records, opts)[len(other):]
    assert _close(together, out), f"{where}: adding another group changed this group's credit"
