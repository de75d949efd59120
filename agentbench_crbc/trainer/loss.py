"""The policy loss of the CRBC paper's Eq. 15: PPO-clip on token or step ratios with step advantages, KL, entropy."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["LossOut", "kl_low_var", "policy_loss", "token_logprobs"]


@dataclass
class LossOut:
    """A loss to call ``backward`` on and its parts (detached floats) for the logs."""

    loss: torch.Tensor
    pg: float
    kl: float
    entropy: float
    clip_frac: float
    ratio_max: float
    ratio_min: float = 1.0
    approx_kl: float = 0.0


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                   temperature: float = 1.0, entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of every token given the tokens before it, shape ``(B, L)`` (position 0 gets 0).

    :param temperature: divide logits by it first (the sampling distribution the rollout used).
    :param entropy: also return the per-position entropy of the next-token distribution, ``(B, L)``.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    lp = logp_all.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    out = F.pad(lp, (1, 0))
    ent = None
    if entropy:
        ent = F.pad(-(logp_all.exp() * logp_all).sum(-1), (1, 0))
    return out, ent


def kl_low_var(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: ``exp(r - l) - (r - l) - 1 >= 0`` (clamped to 10)."""
    d = (ref_logp - logp).clamp(-20.0, 20.0)
    return (d.exp() - d - 1.0).clamp(max=10.0)


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
                ref_logp: torch.Tensor | None = None, entropy: torch.Tensor | None = None, clip_ratio: float = 0.2,
                kl_coef: float = 0.01, entropy_coef: float = 0.0, agg: str = "step-mean",
                denom: float | None = None, ratio: str = "token", weights: torch.Tensor | None = None,
                entropy_mask: torch.Tensor | None = None) -> LossOut:
    """Eq. 15: ``-sum_steps w_i [agg_tokens min(rho A, clip(rho, 1-eps, 1+eps) A)] + kl_coef * KL - c_H * H``.

    Each row is one environment step (prompt + response); its advantage ``advantages[b]`` is broadcast over its
    response tokens (``mask[b] == 1``).

    :param logp: ``(B, L)`` current log-probs (with grad); ``old_logp``: ``(B, L)`` the rollout policy's (no grad).
    :param advantages: ``(B,)`` per-step advantages from the credit method.
    :param mask: ``(B, L)`` 1 on response tokens.
    :param ratio: ``token`` (a ratio per response token, clipped per token, then the token mean of the step) or
        ``sequence`` (the paper's per-step ratio ``pi(y|h) / pi_old(y|h)``: the product over the step's tokens,
        clipped once per step).
    :param weights: ``(B,)`` the weight of each step in the batch objective (see :func:`step_weights`); the loss is
        ``sum_b weights[b] * loss_b`` with ``loss_b`` the step's own (token-mean) loss, and ``agg``/``denom`` are
        ignored. Without weights: ``agg`` is ``step-mean`` (token mean within each step, then mean over steps) or
        ``token-mean`` (mean over all response tokens of the batch), divided by ``denom`` (the whole batch's step or
        token count when this call sees one micro-batch of it) instead of this call's own count.
    :param entropy_mask: ``(B, L)`` the positions the logged entropy averages over (default ``mask``; constrained
        decoding passes the positions with a choice, so forced tokens do not dilute it). The bonus uses ``mask``.
    """
    if ratio not in ("token", "sequence"):
        raise ValueError(f"ratio must be 'token' or 'sequence', got {ratio!r}")
    mask = mask.to(logp.dtype)
    n_tok = mask.sum(-1).clamp(min=1.0)
    adv = advantages.to(device=logp.device, dtype=logp.dtype)  # advantages may come from the CPU
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0) * mask
    if ratio == "sequence":
        rho = torch.exp((log_ratio.sum(-1)).clamp(-20.0, 20.0))  # (B,)
        pg_step = -torch.minimum(rho * adv, rho.clamp(1.0 - clip_ratio, 1.0 + clip_ratio) * adv)
        pg = pg_step[:, None].expand_as(logp) * mask  # the step's loss, spread evenly by the token mean below
        ratio_tok = rho[:, None].expand_as(logp)
    else:
        ratio_tok = torch.exp(log_ratio)
        a = adv[:, None]
        pg = -torch.minimum(ratio_tok * a, ratio_tok.clamp(1.0 - clip_ratio, 1.0 + clip_ratio) * a)
    per_tok = pg
    kl = torch.zeros_like(pg)
    if ref_logp is not None and kl_coef > 0:
        kl = kl_low_var(logp, ref_logp)
        per_tok = per_tok + kl_coef * kl
    if entropy is not None and entropy_coef > 0:
        per_tok = per_tok - entropy_coef * entropy
    if weights is not None:
        w = weights.to(device=logp.device, dtype=logp.dtype)

        def reduce(x: torch.Tensor) -> torch.Tensor:
            return (((x * mask).sum(-1) / n_tok) * w).sum()
    elif agg == "step-mean":
        def reduce(x: torch.Tensor) -> torch.Tensor:
            return ((x * mask).sum(-1) / n_tok).sum() / (denom if denom is not None else x.shape[0])
    elif agg == "token-mean":
        def reduce(x: torch.Tensor) -> torch.Tensor:
            return (x * mask).sum() / (denom if denom is not None else mask.sum().clamp(min=1.0))
    else:
        raise ValueError(f"agg must be 'step-mean' or 'token-mean', got {agg!r}")
    loss = reduce(per_tok)
    with torch.no_grad():
        if ratio == "sequence":  # one ratio per step: fractions and extremes over steps
            has = mask.sum(-1) > 0
            frac = float(((rho - 1.0).abs() > clip_ratio)[has].float().mean()) if has.any() else 0.0
            rmax = float(rho[has].max()) if has.any() else 1.0
            rmin = float(rho[has].min()) if has.any() else 1.0
        else:
            clipped = ((ratio_tok - 1.0).abs() > clip_ratio).to(mask.dtype)
            frac = float((clipped * mask).sum() / mask.sum().clamp(min=1.0))
            on = mask.bool()
            rmax = float(ratio_tok[on].max()) if on.any() else 1.0
            rmin = float(ratio_tok[on].min()) if on.any() else 1.0
        ent = float("nan")
        if entropy is not None:
            em = mask if entropy_mask is None else entropy_mask.to(mask.dtype)
            if weights is not None:  # each step's mean over its free positions (0 if none), weighed like the loss
                ent = float((((entropy * em).sum(-1) / em.sum(-1).clamp(min=1.0)) * w).sum())
            else:
                ent = float((entropy * em).sum() / em.sum().clamp(min=1.0))
        approx_kl = float(reduce(kl_low_var(old_logp, logp.detach())))  # k3 estimate of KL(pi_old || pi)
        return LossOut(loss, float(reduce(pg)), float(reduce(kl)), ent, frac, rmax, rmin, approx_kl)
