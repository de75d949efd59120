"""Log-probs and entropy of response tokens only: the LM head sees response positions, softmax runs in chunks."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

__all__ = ["response_logprobs"]


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

    def keep_response_rows(_module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0][rows, cols - 1][None], *args[1:])

    handle = _output_head(model).register_forward_pre_hook(keep_response_rows)
    try:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, **forward_kwargs).logits[0]
    finally:
        handle.remove()
    lps, ents = [], []
    for s in range(0, logits.shape[0], chunk_tokens):
        args = (logits[s:s + chunk_tokens], targets[s:s + chunk_tokens], temperature, entropy,
                None if allowed_rows is None else allowed_rows[s:s + chunk_tokens])
        if torch.is_grad_enabled() and logits.requires_grad:
            lp, ent = checkpoint(_chunk_stats, *args, use_reentrant=False)
        else:
            lp, ent = _chunk_stats(*args)
        lps.append(lp)
        ents.append(ent)
    out = torch.zeros((b, length), dtype=torch.float32, device=input_ids.device)
    ent_out = torch.zeros((b, length), dtype=torch.float32, device=input_ids.device) if entropy else None
    if lps:
        out = out.index_put((rows, cols), torch.cat(lps))
        if ent_out is not None:
            ent_out = ent_out.index_put((rows, cols), torch.cat(ents))
    return out, ent_out
