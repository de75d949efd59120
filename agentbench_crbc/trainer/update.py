"""One policy update from rollout groups: credit (plugin, by name) -> step samples -> PPO-clip + KL steps."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..batch import StepBatch
from ..credit import assign_batch
from ..rollout.base import RolloutGroup
from .config import OptimConfig
from .loss import policy_loss, token_logprobs

__all__ = ["StepSample", "compute_advantages", "pack", "ppo_update", "samples_from_groups", "sequence_logprobs"]


@dataclass(frozen=True, slots=True)
class StepSample:
    """One environment step as the loss sees it: prompt and response token ids and the step's advantage."""

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    advantage: float


def compute_advantages(groups: Sequence[RolloutGroup], method: str, options: dict[str, Any]) -> np.ndarray:
    """Per-step credit of ``method`` (looked up in the plugin host) for every step of ``groups``, flat, in order."""
    records = [r for g in groups for r in g.to_records()]
    batch = StepBatch.from_records(records)
    return assign_batch(method, batch, **options)


def samples_from_groups(groups: Sequence[RolloutGroup], advantages: np.ndarray, *, adv_norm: str = "none"
                        ) -> list[StepSample]:
    """Pair each step's tokens with its advantage; steps with no response tokens are dropped.

    :param adv_norm: ``std`` divides all advantages by their standard deviation over the batch's steps.
    """
    adv = np.asarray(advantages, dtype=np.float64)
    if adv_norm == "std" and adv.size > 1:
        sd = adv.std()
        adv = adv / sd if sd > 1e-8 else adv
    out: list[StepSample] = []
    k = 0
    for g in groups:
        for t in g.trajectories:
            for s in t.steps:
                if s.response_ids:
                    out.append(StepSample(tuple(s.prompt_ids), tuple(s.response_ids), float(adv[k])))
                k += 1
    if k != len(adv):
        raise ValueError(f"{len(adv)} advantages for {k} steps")
    return out


def pack(samples: Sequence[StepSample], pad_id: int, device: torch.device | str = "cpu"
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask``, ``response_mask`` (B, L) and ``advantages`` (B,)."""
    L = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    ids = torch.full((len(samples), L), pad_id, dtype=torch.long)
    att = torch.zeros((len(samples), L), dtype=torch.long)
    resp = torch.zeros((len(samples), L), dtype=torch.bool)
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        ids[i, :p + r] = torch.tensor(s.prompt_ids + s.response_ids)
        att[i, :p + r] = 1
        resp[i, p:p + r] = True
    adv = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    return ids.to(device), att.to(device), resp.to(device), adv.to(device)


@torch.no_grad()
def sequence_logprobs(model: torch.nn.Module, samples: Sequence[StepSample], *, pad_id: int, micro_batch: int,
                      device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Per-sample ``(B_i, L_i)`` token log-probs under ``model`` (no grad), one tensor per micro-batch."""
    out = []
    for i in range(0, len(samples), micro_batch):
        ids, att, _, _ = pack(samples[i:i + micro_batch], pad_id, device)
        out.append(token_logprobs(model, ids, att)[0])
    return out


def _ref_logprobs(ref: Any, samples: Sequence[StepSample], *, pad_id: int, micro_batch: int,
                  device: torch.device | str) -> list[torch.Tensor] | None:
    if ref is None:
        return None
    if callable(ref) and not isinstance(ref, torch.nn.Module):  # a context-manager factory (LoRA: adapters off)
        model, ctx = ref()
        with ctx:
            return sequence_logprobs(model, samples, pad_id=pad_id, micro_batch=micro_batch, device=device)
    return sequence_logprobs(ref, samples, pad_id=pad_id, micro_batch=micro_batch, device=device)


def ppo_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: Sequence[StepSample],
               cfg: OptimConfig, *, pad_id: int, ref: Any = None, device: torch.device | str = "cpu",
               rng: np.random.Generator | None = None, n_micro: int | None = None) -> dict[str, float]:
    """``cfg.ppo_epochs`` passes over ``samples``, one optimizer step per pass, gradients accumulated over
    micro-batches so the step equals the full batch's Eq. 15 gradient.

    Old log-probs are the model's own before the update (equal to the current ones in the first pass, so they
    are taken from that pass without a second forward); reference log-probs come from ``ref`` (a frozen model, or
    a callable returning ``(model, context)`` for LoRA, where the context disables the adapters).

    :param n_micro: run this many micro-batches per pass (>= this rank's own count; the extra ones contribute zero
        gradient). Under torchrun every rank must run the same number of forward/backward passes.
    """
    t0 = time.perf_counter()
    mb = cfg.micro_batch
    order = np.arange(len(samples))
    if rng is not None:
        rng.shuffle(order)
    samples = [samples[int(i)] for i in order]
    ref_lp = _ref_logprobs(ref, samples, pad_id=pad_id, micro_batch=mb, device=device) if cfg.kl_coef > 0 else None
    t_ref = time.perf_counter() - t0
    n_tok = sum(len(s.response_ids) for s in samples)
    denom = float(len(samples)) if cfg.loss_agg == "step-mean" else float(max(n_tok, 1))
    old: list[torch.Tensor] = []
    logs: dict[str, float] = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0,
                              "ratio_max": 1.0, "grad_norm": 0.0}
    model.train()
    for epoch in range(cfg.ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        starts = list(range(0, len(samples), mb))
        starts += [-1] * max((n_micro or 0) - len(starts), 0)  # padding passes: zero gradient, same collectives
        for j, i in enumerate(starts):
            if i < 0:
                ids, att, _, _ = pack(samples[:1], pad_id, device)
                lp, _ = token_logprobs(model, ids, att)
                (lp.sum() * 0.0).backward()
                continue
            ids, att, resp, adv = pack(samples[i:i + mb], pad_id, device)
            lp, ent = token_logprobs(model, ids, att, entropy=cfg.entropy_coef > 0)
            if epoch == 0:
                old.append(lp.detach())
            out = policy_loss(lp, old[j], adv, resp, ref_logp=None if ref_lp is None else ref_lp[j], entropy=ent,
                              clip_ratio=cfg.clip_ratio, kl_coef=cfg.kl_coef, entropy_coef=cfg.entropy_coef,
                              agg=cfg.loss_agg, denom=denom)
            out.loss.backward()
            if epoch == cfg.ppo_epochs - 1:
                logs["loss"] += float(out.loss.detach())
                logs["pg_loss"] += out.pg
                logs["kl"] += out.kl
                logs["entropy"] += out.entropy
                logs["clip_frac"] += out.clip_frac * len(ids) / len(samples)
                logs["ratio_max"] = max(logs["ratio_max"], out.ratio_max)
        params = [p for p in model.parameters() if p.requires_grad]
        gn = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
        logs["grad_norm"] = float(gn.full_tensor() if hasattr(gn, "full_tensor") else gn)
        optimizer.step()
    model.eval()
    logs["time_ref"] = t_ref
    logs["time_ppo"] = time.perf_counter() - t0 - t_ref
    logs["n_steps"] = float(len(samples))
    logs["n_tokens"] = float(n_tok)
    return logs
