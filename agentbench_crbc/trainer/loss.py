"""The policy loss of the CRBC paper's Eq. 15 (PPO-clip on token or step ratios with step advantages, KL, entropy)
and the log-probs it needs: response tokens only, the LM head on response positions, softmax in chunks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

__all__ = ["LossConfig", "LossOut", "kl_low_var", "policy_loss", "query_logprobs", "response_logprobs",
           "token_logprobs"]


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


@dataclass(frozen=True)
class LossConfig:
    """The scalars of Eq. 15: PPO clip range, KL and entropy coefficients, and where the ratio is taken.

    :param ratio: ``token`` (a ratio per response token, clipped per token, then the token mean of the step) or
        ``sequence`` (the paper's per-step ratio ``pi(y|h) / pi_old(y|h)``: the product over the step's tokens,
        clipped once per step).
    """

    clip_ratio: float = 0.2
    kl_coef: float = 0.01
    entropy_coef: float = 0.0
    ratio: str = "token"

    def __post_init__(self) -> None:
        if self.ratio not in ("token", "sequence"):
            raise ValueError(f"ratio must be 'token' or 'sequence', got {self.ratio!r}")


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                weights: torch.Tensor, cfg: LossConfig, *, ref_logp: torch.Tensor | None = None,
                entropy: torch.Tensor | None = None, entropy_mask: torch.Tensor | None = None) -> LossOut:
    """Eq. 15: ``-sum_steps w_i [agg_tokens min(rho A, clip(rho, 1-eps, 1+eps) A)] + kl_coef * KL - c_H * H``.

    Each row is one environment step (prompt + response); its advantage ``advantages[b]`` is broadcast over its
    response tokens (``mask[b] == 1``).

    :param logp: ``(B, L)`` current log-probs (with grad); ``old_logp``: ``(B, L)`` the rollout policy's (no grad).
    :param advantages: ``(B,)`` per-step advantages from the credit method.
    :param mask: ``(B, L)`` 1 on response tokens.
    :param weights: ``(B,)`` the weight of each step in the batch objective (see
        :func:`~agentbench_crbc.trainer.update.step_weights`); the loss is ``sum_b weights[b] * loss_b`` with
        ``loss_b`` the step's own (token-mean) loss.
    :param cfg: clip range, coefficients and the ratio's form (:class:`LossConfig`).
    :param entropy_mask: ``(B, L)`` the positions the logged entropy averages over (default ``mask``; constrained
        decoding passes the positions with a choice, so forced tokens do not dilute it). The bonus uses ``mask``.
    """
    clip_ratio = cfg.clip_ratio
    mask = mask.to(logp.dtype)
    n_tok = mask.sum(-1).clamp(min=1.0)
    adv = advantages.to(device=logp.device, dtype=logp.dtype)  # advantages may come from the CPU
    w = weights.to(device=logp.device, dtype=logp.dtype)
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0) * mask
    if cfg.ratio == "sequence":
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
    if ref_logp is not None and cfg.kl_coef > 0:
        kl = kl_low_var(logp, ref_logp)
        per_tok = per_tok + cfg.kl_coef * kl
    if entropy is not None and cfg.entropy_coef > 0:
        per_tok = per_tok - cfg.entropy_coef * entropy

    def reduce(x: torch.Tensor) -> torch.Tensor:
        return (((x * mask).sum(-1) / n_tok) * w).sum()

    loss = reduce(per_tok)
    with torch.no_grad():
        if cfg.ratio == "sequence":  # one ratio per step: fractions and extremes over steps
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
        if entropy is not None:  # each step's mean over its free positions (0 if none), weighed like the loss
            em = mask if entropy_mask is None else entropy_mask.to(mask.dtype)
            ent = float((((entropy * em).sum(-1) / em.sum(-1).clamp(min=1.0)) * w).sum())
        approx_kl = float(reduce(kl_low_var(old_logp, logp.detach())))  # k3 estimate of KL(pi_old || pi)
        return LossOut(loss, float(reduce(pg)), float(reduce(kl)), ent, frac, rmax, rmin, approx_kl)


def _output_head(model: torch.nn.Module) -> torch.nn.Module:
    """The module that maps hidden states to vocabulary logits, through DDP and peft wrappers."""
    inner: Any = getattr(model, "module", model)  # DDP
    head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
    if not isinstance(head, torch.nn.Module):
        raise TypeError(f"{type(inner).__name__} has no output embeddings (get_output_embeddings() is None); "
                        "response_logprobs needs a transformers *ForCausalLM or image-text model")
    return head


def _chunk_stats(logits: torch.Tensor, targets: torch.Tensor, temperature: float, entropy: bool,
                 allowed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    x = logits.float()
    if temperature != 1.0:
        x = x / temperature
    if allowed is not None:  # constrained decoding: softmax over each row's allowed tokens only (-1 = padding)
        keep = torch.zeros_like(x, dtype=torch.bool).scatter_(-1, allowed.clamp(min=0), allowed >= 0)
        keep |= (allowed < 0).all(-1, keepdim=True)  # a row without a restriction keeps the whole vocabulary
        x = x.masked_fill(~keep, float("-inf"))
    logp = F.log_softmax(x, dim=-1)
    lp = logp.gather(-1, targets[:, None]).squeeze(-1)
    ent = -(logp.exp() * logp.clamp(min=-1e30)).sum(-1) if entropy else lp.new_zeros(())
    return lp, ent


def _head_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, rows: torch.Tensor,
                 cols: torch.Tensor, forward_kwargs: dict[str, Any]) -> torch.Tensor:
    """The LM head's logits at the hidden states of positions ``(rows, cols)`` only, ``(N, V)``: a forward pre-hook
    on the head hands it just those rows, inside the model's own forward (DDP and FSDP2 see an ordinary call)."""

    def keep_rows(_module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0][rows, cols][None], *args[1:])

    handle = _output_head(model).register_forward_pre_hook(keep_rows)
    try:
        return model(input_ids=input_ids, attention_mask=attention_mask, **forward_kwargs).logits[0]
    finally:
        handle.remove()


def _chunked_stats(logits: torch.Tensor, index: torch.Tensor | None, targets: torch.Tensor, temperature: float,
                   entropy: bool, allowed: torch.Tensor | None, chunk_tokens: int
                   ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """:func:`_chunk_stats` over ``chunk_tokens`` targets at a time (each chunk recomputed in the backward pass);
    target ``q`` reads logits row ``index[q]`` (``None``: row ``q``)."""
    lps, ents = [], []
    for s in range(0, targets.shape[0], chunk_tokens):
        part = logits[s:s + chunk_tokens] if index is None else logits[index[s:s + chunk_tokens]]
        args = (part, targets[s:s + chunk_tokens], temperature, entropy,
                None if allowed is None else allowed[s:s + chunk_tokens])
        if torch.is_grad_enabled() and logits.requires_grad:
            lp, ent = checkpoint(_chunk_stats, *args, use_reentrant=False)
        else:
            lp, ent = _chunk_stats(*args)
        lps.append(lp)
        ents.append(ent)
    return lps, ents


def response_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      response_mask: torch.Tensor, *, temperature: float = 1.0, entropy: bool = False,
                      chunk_tokens: int = 1024, allowed: torch.Tensor | None = None,
                      **forward_kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each response token given the tokens before it, ``(B, L)`` fp32, 0 outside ``response_mask``.

    Equal (to float rounding) to :func:`~agentbench_crbc.trainer.loss.token_logprobs` at response positions, at a
    fraction of its memory: a forward pre-hook on the LM head hands it only the hidden states that predict a response
    token (``N`` rows instead of ``B x L``), and the fp32 log-softmax runs over ``chunk_tokens`` rows at a time, each
    chunk recomputed in the backward pass (activation checkpointing) instead of kept. Peak memory of the head drops
    from about ``3 x B x L x V x 4`` bytes to ``N x V`` logits in the model's dtype plus one chunk; see
    ``benchmarks/logprob_memory.py``. The hook runs inside the model's own forward, so DDP and FSDP2 wrappers see an
    ordinary call.

    :param response_mask: ``(B, L)``, true on response tokens (position 0 is ignored: nothing predicts it).
    :param temperature: divide logits by it first (the rollout's sampling distribution).
    :param entropy: also return the entropy of the next-token distribution at response positions, ``(B, L)``.
    :param chunk_tokens: rows of the log-softmax per chunk.
    :param allowed: ``(B, L, K)`` token ids (``-1`` pads) the softmax at each response position is restricted to
        (constrained decoding: the tokens that continue an allowed answer); a position of only ``-1`` keeps the whole
        vocabulary. Log-probs and entropies are then those of the restricted distribution (a forced token: 0).
    :param forward_kwargs: passed to the model (``pixel_values``, ``image_grid_thw``, ``position_ids``...).
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    b, length = input_ids.shape
    resp = response_mask.bool().clone()
    resp[:, 0] = False
    rows, cols = resp.nonzero(as_tuple=True)
    targets = input_ids[rows, cols]
    allowed_rows = allowed[rows, cols] if allowed is not None else None

    logits = _head_logits(model, input_ids, attention_mask, rows, cols - 1, forward_kwargs)
    lps, ents = _chunked_stats(logits, None, targets, temperature, entropy, allowed_rows, chunk_tokens)
    out = torch.zeros((b, length), dtype=torch.float32, device=input_ids.device)
    ent_out = torch.zeros((b, length), dtype=torch.float32, device=input_ids.device) if entropy else None
    if lps:
        out = out.index_put((rows, cols), torch.cat(lps))
        if ent_out is not None:
            ent_out = ent_out.index_put((rows, cols), torch.cat(ents))
    return out, ent_out


def query_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   rows: torch.Tensor, cols: torch.Tensor, targets: torch.Tensor, *, entropy: bool = False,
                   chunk_tokens: int = 1024, allowed: torch.Tensor | None = None,
                   **forward_kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of ``targets[q]`` under the next-token distribution after row ``rows[q]``'s tokens up to column
    ``cols[q]`` (inclusive), ``(Q,)`` fp32, and its entropy when asked: several queries may read one position
    (the answers to one prompt, each its token gathered from the prompt's single pass).

    The twin of :func:`response_logprobs` for shared prefixes: the LM head sees each distinct queried position
    once, the fp32 log-softmax runs per query in checkpointed chunks, so each query's value and gradient are the
    ones :func:`response_logprobs` gives that query's own sequence (to float rounding; a position read by several
    queries gets the sum of their gradients).

    :param rows: ``(Q,)`` long, the row of ``input_ids`` each query reads; ``cols``: ``(Q,)`` its column.
    :param targets: ``(Q,)`` long, the token whose log-prob each query wants.
    :param allowed: ``(Q, K)`` the token ids each query's softmax is restricted to (``-1`` pads; a row of only
        ``-1`` keeps the whole vocabulary), as in :func:`response_logprobs`.
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    length = input_ids.shape[1]
    uniq, inv = torch.unique(rows * length + cols, return_inverse=True)
    urows, ucols = uniq // length, uniq % length

    logits = _head_logits(model, input_ids, attention_mask, urows, ucols, forward_kwargs)
    lps, ents = _chunked_stats(logits, inv, targets, 1.0, entropy, allowed, chunk_tokens)
    if not lps:
        return logits.new_zeros((0,), dtype=torch.float32), logits.new_zeros((0,), dtype=torch.float32) \
            if entropy else None
    return torch.cat(lps).float(), torch.cat(ents).float() if entropy else None
