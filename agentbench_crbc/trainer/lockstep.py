"""What keeps ranks in lock-step through one PPO update: micro-batches padded to the busiest rank, the KL guard's
shard-local snapshot and undo, and FSDP2's reshard after no-grad passes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["KLGuard", "identity", "local", "micro_chunks", "reshard"]


def identity(n: int) -> int:
    """``sync_max`` in one process: the largest value over one rank is its own."""
    return n


def micro_chunks(of_sample: np.ndarray, mb: np.ndarray, micro: int, sync_max: Callable[[int], int]
                 ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A mini-batch's micro-batches as the training pass runs them: ``(rows, samples, row of each sample)`` with
    ``rows`` the distinct sequences of the chunk (``of_sample[i]``: step ``i``'s sequence); empty rows are a padding
    pass, so every rank runs as many passes as the busiest one (``sync_max``: the largest value over ranks)."""
    mb_seq = of_sample[mb]
    rows = np.unique(mb_seq)
    out = []
    for k in range(max(sync_max(-(-len(rows) // micro)), 1)):
        chunk = rows[k * micro:(k + 1) * micro]
        sel = mb[np.isin(mb_seq, chunk)]
        out.append((chunk, sel, np.searchsorted(chunk, of_sample[sel])))
    return out


def local(t: torch.Tensor) -> torch.Tensor:
    """The rank's own storage of ``t``: a DTensor's local shard (FSDP2), else ``t`` itself, detached."""
    return (t.to_local() if hasattr(t, "to_local") else t).detach()


class KLGuard:
    """``optim.target_kl``: snapshots the trainable weights and the optimizer state before each step and restores
    them when the step moved the policy past ``1.5 * target_kl`` (then the update stops and the learning rate is
    halved); an update that ends below ``target_kl / 2`` raises a halved rate by 1.5x again, up to ``optim.lr``
    (the adaptive schedule of rl_games' ``kl_threshold``, with Stable-Baselines3's early stop). Without the
    halving, Adam's first steps (about ``lr`` on every weight, whatever the gradient's size) would be undone
    again and again and the run would never move."""

    def __init__(self, target_kl: float, base_lr: float, params: Sequence[torch.nn.Parameter],
                 optimizer: Any) -> None:
        self.target, self.limit, self.base_lr = target_kl, 1.5 * target_kl, base_lr
        self.params, self.optimizer = list(params), optimizer
        self.fired = False
        self.last_kl = 0.0  # of the weights kept: the last step that stayed within the bound (0: none yet)
        self.rejected_kl = 0.0  # of the step undone, when one was
        self._saved: Any = None

    def before_step(self) -> None:
        """Copy the weights and the optimizer's per-weight state (in place-restorable clones: under FSDP2 these are
        the rank's shards, DTensors, and no state dict round trip is needed). The previous step's snapshot goes
        first, so two never exist at once."""
        self._saved = None
        with torch.no_grad():
            weights = [local(p).clone() for p in self.params]
            state = [{k: local(v).clone() if torch.is_tensor(v) else v for k, v in self.optimizer.state[p].items()}
                     if p in self.optimizer.state else None for p in self.params]
        self._saved = (weights, state)

    def after_step(self, kl: float, sync_max: Callable[[int], int]) -> bool:
        """Whether the step went too far (it is undone, on every rank alike)."""
        if not sync_max(int(kl > self.limit or not np.isfinite(kl))):
            self.last_kl = kl
            return False
        self.rejected_kl = kl
        weights, state = self._saved
        with torch.no_grad():
            for p, w, st in zip(self.params, weights, state, strict=True):
                local(p).copy_(w)
                if st is None:  # the step created this weight's state: it had none before
                    self.optimizer.state.pop(p, None)
                    continue
                live = self.optimizer.state[p]
                for k, v in st.items():
                    if torch.is_tensor(v) and torch.is_tensor(live.get(k)):
                        local(live[k]).copy_(v)
                    else:
                        live[k] = v
        self._scale_lr(0.5)
        self.fired = True
        return True

    def release(self) -> None:
        """Drop the snapshot (the update is over: nothing is undone any more)."""
        self._saved = None

    def finish(self) -> float:
        """At the end of the update: a rate the guard halved recovers by 1.5x when the policy moved little; returns
        the learning rate now."""
        if not self.fired and self.last_kl < self.target / 2 and self.lr() < self.base_lr:
            self._scale_lr(1.5)
        return self.lr()

    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _scale_lr(self, factor: float) -> None:
        for g in self.optimizer.param_groups:  # halving is never capped; raising stops at optim.lr
            g["lr"] = float(g["lr"]) * factor if factor < 1 else min(float(g["lr"]) * factor, self.base_lr)


def reshard(model: torch.nn.Module) -> None:
    """Shard FSDP2's modules back: the root keeps its gathered (bf16) weights after a no-grad forward."""
    for m in model.modules():
        shard_back = getattr(m, "reshard", None)
        if callable(shard_back):
            shard_back()
