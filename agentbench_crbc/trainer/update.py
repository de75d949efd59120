"""One policy update from rollout groups: credit (plugin, by name) -> step samples -> PPO-clip + KL mini-batches."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import torch

from ..credit import StepBatch, assign_batch
from ..errors import AlignmentError, ConfigError
from ..rollout.episodes.base import RolloutGroup, RolloutStep, drop_env_failures
from .config import OptimConfig
from .lockstep import KLGuard, identity, micro_chunks, reshard
from .loss import LossConfig, policy_loss, response_logprobs

__all__ = ["StepSample", "UpdateContext", "allowed_tokens", "build_samples", "compute_advantages", "pack", "ppo_update",
           "samples_from_groups", "step_logprobs", "step_weights"]


@dataclass(frozen=True, slots=True)
class StepSample:
    """One environment step as the loss sees it: prompt and response token ids, the step's advantage and the group
    and trajectory it belongs to (for the aggregations that weigh groups or trajectories equally)."""

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    advantage: float
    group: int = 0  # the group's index in the update's batch
    rollout: int = 0  # the trajectory's index in its group
    images: tuple[Any, ...] = field(default=(), compare=False)  # RGB arrays of the prompt (vision-language models)
    #: the answers decoding was restricted to (constrained decoding); empty: free text over the whole vocabulary
    choices: tuple[tuple[int, ...], ...] = field(default=(), compare=False)
    #: the rollout's log-prob of each response token (the engine's; ``optim.rollout_old_logprobs`` reads them)
    logprobs: tuple[float, ...] = field(default=(), compare=False)


def _with_steps(groups: Sequence[RolloutGroup]) -> list[RolloutGroup]:
    """The groups without their step-less trajectories (an env that crashed at reset); groups left empty go."""
    out = []
    for g in groups:
        if all(t.steps for t in g.trajectories):
            out.append(g)
        elif any(t.steps for t in g.trajectories):
            out.append(replace(g, trajectories=tuple(t for t in g.trajectories if t.steps)))
    return out


def compute_advantages(groups: Sequence[RolloutGroup], method: str, options: Mapping[str, Any]) -> np.ndarray:
    """Per-step credit of ``method`` (looked up in the plugin host) for every step of ``groups``: one float64 per
    step, in input order (groups, their trajectories, their steps), so it zips with the steps.

    The groups go to the method as they are (:meth:`StepBatch.from_groups`: the anchors recorded by the runner are
    keyed by the canonical form ``abc credit`` uses for JSONL records, no record dicts). The batch's trajectory
    lengths are checked against the groups', so an advantage can only pair with the step it was computed for.
    :raises AlignmentError: the method returned the wrong number of values, or the batch does not match.
    """
    groups = _with_steps(groups)
    if not groups:
        return np.zeros(0)
    batch = StepBatch.from_groups(groups)
    adv = np.asarray(assign_batch(method, batch, **options), dtype=np.float64)
    if adv.shape != (batch.n_steps,):
        raise AlignmentError(f"credit method {method!r} returned {adv.shape} advantages for {batch.n_steps} steps")
    lens = np.fromiter((len(t.steps) for g in groups for t in g.trajectories), dtype=np.int64)
    if batch.n_groups != len(groups) or not np.array_equal(batch.traj_len, lens):
        raise AlignmentError(f"the credit batch ({batch.n_groups} groups, {batch.n_traj} trajectories) does not "
                             f"match its {len(groups)} groups of {len(lens)} trajectories")
    return adv


def samples_from_groups(groups: Sequence[RolloutGroup], advantages: Any, *,
                        adv_norm: str = "none") -> list[StepSample]:
    """Pair each step's tokens with its advantage (``advantages[k]`` belongs to the k-th step of ``groups`` in input
    order); steps with no response tokens are dropped.

    :param advantages: one float per step, from :func:`compute_advantages` on the same groups.
    :param adv_norm: ``std`` divides all advantages by their standard deviation over the batch's steps;
        ``mean-std`` first subtracts their mean (PPO's advantage normalisation).
    :raises AlignmentError: the number of advantages is not the number of steps.
    """
    adv = np.asarray(advantages, dtype=np.float64)
    n_steps = sum(len(t.steps) for g in groups for t in g.trajectories)
    if adv.shape != (n_steps,):
        raise AlignmentError(f"{adv.size} advantages for {n_steps} steps: pass compute_advantages() of these "
                             "same groups")
    if adv_norm in ("std", "mean-std") and adv.size > 1:
        if adv_norm == "mean-std":
            adv = adv - adv.mean()
        sd = adv.std()
        adv = adv / sd if sd > 1e-8 else adv
    out: list[StepSample] = []
    k = 0
    for gi, g in enumerate(groups):
        for i, traj in enumerate(g.trajectories):
            for s in cast("tuple[RolloutStep, ...]", traj.steps):
                if s.response_ids:
                    out.append(StepSample(tuple(s.prompt_ids), tuple(s.response_ids), float(adv[k]), gi, i,
                                          tuple(s.images), tuple(getattr(s, "choices", ())),
                                          tuple(getattr(s, "logprobs", ()))))
                k += 1
    return out


def build_samples(groups: Sequence[RolloutGroup], method: str, options: Mapping[str, Any], *,
                  adv_norm: str = "none") -> tuple[list[StepSample], np.ndarray, dict[str, float]]:
    """One update's gradient batch: groups a gate stopped are left out, so are trajectories an env crash or hang ended
    (a group left with fewer than 2 is dropped: see :func:`~agentbench_crbc.rollout.episodes.base.drop_env_failures`);
    the rest get ``method``'s credit and become step samples. Returns the samples, the advantages (1-D float64, one
    per kept step in input order, before ``adv_norm``) and the counts ``gated_groups``, ``env_error_trajectories``,
    ``env_error_groups`` for the metrics."""
    kept, n_err, n_err_groups = drop_env_failures([g for g in groups if not g.gated])
    kept = _with_steps(kept)
    adv = compute_advantages(kept, method, options)
    counts = {"gated_groups": float(sum(g.gated for g in groups)), "env_error_trajectories": float(n_err),
              "env_error_groups": float(n_err_groups)}
    return samples_from_groups(kept, adv, adv_norm=adv_norm), adv, counts


def step_weights(samples: Sequence[StepSample], agg: str) -> np.ndarray:
    """The weight of each step in the batch objective (they sum to 1); the loss is ``sum_i w_i loss_i`` with
    ``loss_i`` the step's token-mean loss.

    - ``step-mean``: ``1 / N`` (every step alike).
    - ``token-mean``: ``|y_i| / sum_j |y_j|`` (every response token alike).
    - ``group-mean`` (the paper's Eq. 15): ``1 / (K * T_g)`` for a step of group ``g``, with ``T_g = sum_i T_i``
      the steps of the group's trajectories and ``K`` the number of groups: the average over each group's steps,
      then uniformly over groups, so a group with longer episodes does not weigh more.
    - ``traj-mean``: ``1 / (M * T_i)`` for a step of trajectory ``i`` of ``M``: each trajectory's steps averaged,
      then trajectories alike, so a long failed episode does not outweigh a short success (with a group-centred
      trajectory advantage, each group's steps then push up and down equally).
    """
    n = len(samples)
    if n == 0:
        return np.zeros(0)
    if agg == "step-mean":
        return np.full(n, 1.0 / n)
    if agg == "token-mean":
        tok = np.array([len(s.response_ids) for s in samples], dtype=np.float64)
        return tok / max(tok.sum(), 1.0)
    if agg in ("group-mean", "traj-mean"):
        keys = [s.group if agg == "group-mean" else f"{s.group}\x00{s.rollout}" for s in samples]
        _, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
        return 1.0 / (len(counts) * counts[inv].astype(np.float64))
    raise ValueError(f"loss_agg must be 'step-mean', 'token-mean', 'group-mean' or 'traj-mean', got {agg!r}")


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


def allowed_tokens(samples: Sequence[StepSample], length: int) -> torch.Tensor:
    """``(B, length, K)`` long: at each response position of a constrained step, the tokens that continue one of
    its ``choices`` after the response tokens before it (``-1`` pads; unconstrained steps and prompt positions are
    all ``-1``). Position ``p + t`` holds the options of response token ``t``, as :func:`response_logprobs` reads
    them (row ``b``, column = the token's position)."""
    opts: list[list[tuple[int, list[int]]]] = []
    for s in samples:
        p = len(s.prompt_ids)
        opts.append([(p + t, o) for t, o in enumerate(_options(s)) if o is not None])
    k = max((len(o) for row in opts for _, o in row), default=1)
    out = torch.full((len(samples), length, k), -1, dtype=torch.long)
    for b, row in enumerate(opts):
        for col, o in row:
            out[b, col, :len(o)] = torch.tensor(o, dtype=torch.long)
    return out


def _options(s: StepSample) -> list[list[int] | None]:
    """Per response token of a constrained step: the tokens that continue one of its ``choices`` after the response
    tokens before it; ``None`` where the whole vocabulary is open (a free-text step; past an answer outside the
    choices, which no constrained engine gives)."""
    y = s.response_ids
    out: list[list[int] | None] = [None] * len(y)
    if s.choices:
        for t in range(len(y)):
            nxt = sorted({c[t] for c in s.choices if len(c) > t and c[:t] == y[:t]})
            if y[t] not in nxt:  # an answer outside the choices (not from a constrained engine): free from here
                break
            out[t] = nxt
    return out


def _image_key(images: Sequence[Any]) -> tuple[str, ...]:
    return tuple(hashlib.sha1(np.ascontiguousarray(im).tobytes()).hexdigest() for im in images)


class _Sequences:
    """The distinct (prompt, response, images) of an update's steps, packed once per micro-batch.

    Steps with equal tokens (the G copies of a group share their first prompt, and often later ones) get equal
    log-probs, so each distinct sequence is run through the model once per pass and its log-probs are shared by
    all of its steps; the loss still counts every step with its own advantage and weight: an exact saving.
    Prompts with images go in with the image processor's ``pixel_values`` and ``image_grid_thw``.
    """

    def __init__(self, samples: Sequence[StepSample], pad_id: int, device: torch.device | str,
                 image_processor: Any = None, image_pad_id: int | None = None, *, share_prompts: bool = False) -> None:
        self.share_prompts = share_prompts  # optim.dedup_prompts: one forward per distinct context (_shared_lp)
        index: dict[tuple[Any, ...], int] = {}
        self.seqs: list[StepSample] = []
        of = []
        for s in samples:
            key = (s.prompt_ids, s.response_ids, _image_key(s.images) if s.images else (), s.choices)
            if key not in index:
                index[key] = len(self.seqs)
                self.seqs.append(StepSample(s.prompt_ids, s.response_ids, 0.0, images=s.images, choices=s.choices))
            of.append(index[key])
        self.of_sample = np.array(of, dtype=np.int64)
        if not self.seqs:  # a rank without steps still runs the padding passes of the busiest rank
            dummy = StepSample((pad_id,), (pad_id,), 0.0)
            if image_processor is not None and image_pad_id is not None:  # VL: through the vision tower too, so
                # every rank's backward reaches the same parameters (DDP's buckets, FSDP2's reduce-scatter)
                image = np.zeros((56, 56, 3), dtype=np.uint8)
                grid = image_processor(images=[image], return_tensors="np")["image_grid_thw"][0]
                n = int(np.prod(grid)) // int(getattr(image_processor, "merge_size", 2)) ** 2
                dummy = StepSample((image_pad_id,) * n, (pad_id,), 0.0, images=(image,))
            self.seqs.append(dummy)
        if image_processor is None and any(s.images for s in self.seqs):
            raise ValueError("steps with images need UpdateContext(image_processor=...) (the VL model's processor)")
        self.pad_id, self.device = pad_id, device
        self.image_processor, self.image_pad_id = image_processor, image_pad_id
        self.n_resp = max((len(s.response_ids) for s in self.seqs), default=0)

    def __len__(self) -> int:
        return len(self.seqs)

    def batch(self, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                  torch.Tensor, dict[str, Any]]:
        """``input_ids``, ``attention_mask``, ``response_mask`` (B, L), the response positions ``pos`` and their
        mask (B, R), and the keyword inputs of :func:`response_logprobs`: the model's image inputs (empty for
        text) and, for constrained steps, ``allowed`` (B, L, K): the tokens each response position could take."""
        chunk = [self.seqs[int(r)] for r in rows]
        ids, att, resp, _ = pack(chunk, self.pad_id, self.device)
        pos = torch.zeros((len(chunk), self.n_resp), dtype=torch.long)
        rmask = torch.zeros((len(chunk), self.n_resp), dtype=torch.bool)
        for i, s in enumerate(chunk):
            p, r = len(s.prompt_ids), len(s.response_ids)
            pos[i, :r] = torch.arange(p, p + r)
            rmask[i, :r] = True
        extra: dict[str, Any] = {}
        images = [im for s in chunk for im in s.images]
        if images:
            proc = self.image_processor(images=images, return_tensors="pt")
            extra["pixel_values"] = proc["pixel_values"].to(ids.device)
            extra["image_grid_thw"] = proc["image_grid_thw"].to(ids.device)
            if self.image_pad_id is not None:
                extra["mm_token_type_ids"] = (ids == self.image_pad_id).int()
        if any(s.choices for s in chunk):
            extra["allowed"] = allowed_tokens(chunk, ids.shape[1]).to(ids.device)
        return ids, att, resp, pos.to(ids.device), rmask.to(ids.device), extra


def _response_lp(model: Any, seqs: _Sequences, rows: Sequence[int], *, entropy: bool = False,
                 autocast: Any = nullcontext) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Log-probs (and entropies) of the response tokens of ``rows``, ``(B, R)``, with their mask and the mask of the
    positions where the policy had a choice (free text: all; a constrained step: those with two or more allowed
    tokens, where the logged entropy is averaged); the LM head and the fp32 log-softmax see response positions only
    (:func:`~agentbench_crbc.trainer.loss.response_logprobs`). Constrained steps get the log-probs and entropies
    of the restricted distribution (a forced token: 0, 0)."""
    if seqs.share_prompts and not any(seqs.seqs[int(r)].images for r in rows):
        return _shared_lp(model, seqs, rows, entropy=entropy, autocast=autocast)
    ids, att, resp, pos, rmask, extra = seqs.batch(rows)
    with autocast():
        lp, ent = response_logprobs(model, ids, att, resp, entropy=entropy, **extra)
    lp = lp.float().gather(1, pos) * rmask
    free = rmask
    if "allowed" in extra:  # an unrestricted position has no allowed ids (count 0), a forced one exactly 1
        free = rmask & ((extra["allowed"] >= 0).sum(-1).gather(1, pos) != 1)
    return lp, None if ent is None else ent.float().gather(1, pos) * rmask, rmask, free


def _shared_lp(model: Any, seqs: _Sequences, rows: Sequence[int], *, entropy: bool = False,
               autocast: Any = nullcontext) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """:func:`_response_lp` with one forward per distinct context (``optim.dedup_prompts``; text steps).

    A response token that its step's choices force (one allowed token) has log-prob and entropy 0 whatever the
    model says, so only the positions with a choice are read (free text: every position), and a sequence needs
    the model only up to the token before its last such position. Sequences with equal tokens up to there share
    one pass: with constrained decoding all answers to one prompt (``<action>`` forced, the move read from the
    distribution after it, the rest forced), with free text those that differ in their last token only. Each
    sequence's log-probs are gathered from its context's pass (:func:`~agentbench_crbc.trainer.loss.query_logprobs`),
    so the values, the loss and its gradient are the plain path's up to float rounding. A sequence without any
    position with a choice reads its last position (log-prob 0, kept in the graph)."""
    from .loss import query_logprobs

    chunk = [seqs.seqs[int(r)] for r in rows]
    r_max = seqs.n_resp
    rmask = torch.zeros((len(chunk), r_max), dtype=torch.bool)
    free = torch.zeros((len(chunk), r_max), dtype=torch.bool)
    index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    contexts: list[tuple[int, ...]] = []
    q_ctx, q_col, q_tgt, q_row, q_t = [], [], [], [], []
    q_opts: list[list[int] | None] = []
    for i, s in enumerate(chunk):
        p, y = len(s.prompt_ids), s.response_ids
        opts = _options(s)
        rmask[i, :len(y)] = True
        has_choice = [o is None or len(o) != 1 for o in opts]
        free[i, :len(y)] = torch.tensor(has_choice, dtype=torch.bool)
        ts = [t for t in range(len(y)) if has_choice[t] and p + t > 0] or [len(y) - 1]
        key = (s.prompt_ids, y[:ts[-1]])
        if key not in index:
            index[key] = len(contexts)
            contexts.append(s.prompt_ids + y[:ts[-1]])
        for t in ts:
            q_ctx.append(index[key])
            q_col.append(p + t - 1)
            q_tgt.append(y[t])
            q_row.append(i)
            q_t.append(t)
            q_opts.append(opts[t])
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), seqs.pad_id, dtype=torch.long)
    att = torch.zeros((len(contexts), width), dtype=torch.long)
    for c, toks in enumerate(contexts):
        ids[c, :len(toks)] = torch.tensor(toks, dtype=torch.long)
        att[c, :len(toks)] = 1
    allowed = None
    if any(o is not None for o in q_opts):
        k = max(len(o) for o in q_opts if o is not None)
        allowed = torch.full((len(q_opts), k), -1, dtype=torch.long)
        for q, o in enumerate(q_opts):
            if o is not None:
                allowed[q, :len(o)] = torch.tensor(o, dtype=torch.long)
        allowed = allowed.to(seqs.device)
    dev = seqs.device

    def longs(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.long, device=dev)

    with autocast():
        lp_q, ent_q = query_logprobs(model, ids.to(dev), att.to(dev), longs(q_ctx), longs(q_col), longs(q_tgt),
                                     entropy=entropy, allowed=allowed)
    where = (longs(q_row), longs(q_t))
    lp = torch.zeros((len(chunk), r_max), dtype=torch.float32, device=dev).index_put(where, lp_q)
    ent = None if ent_q is None else \
        torch.zeros((len(chunk), r_max), dtype=torch.float32, device=dev).index_put(where, ent_q)
    rmask, free = rmask.to(dev), free.to(dev)
    return lp, ent, rmask, free & rmask


def _padding_pass(model: Any, seqs: _Sequences, autocast: Any) -> torch.Tensor:
    """A pass over sequence 0 for a rank with fewer micro-batches than the busiest one (its collectives line up;
    see :mod:`~agentbench_crbc.trainer.lockstep`); the caller drops the log-probs or backpropagates them times 0."""
    return _response_lp(model, seqs, [0], autocast=autocast)[0]


@torch.no_grad()
def step_logprobs(model: torch.nn.Module, samples: Sequence[StepSample], *, pad_id: int, micro_batch: int = 64,
                  device: torch.device | str = "cpu", image_processor: Any = None,
                  image_pad_id: int | None = None) -> list[np.ndarray]:
    """Each step's response-token log-probs under ``model`` (no grad), the way the PPO update computes them
    (images included)."""
    seqs = _Sequences(samples, pad_id, device, image_processor, image_pad_id)
    lp = _no_grad_pass(model, seqs, micro_batch, 0, nullcontext).cpu()
    return [lp[j, :len(samples[i].response_ids)].numpy() for i, j in enumerate(seqs.of_sample.tolist())]


def _no_grad_pass(model: Any, seqs: _Sequences, micro: int, n_micro: int, autocast: Any) -> torch.Tensor:
    """Response log-probs of every distinct sequence under ``model`` (no grad), ``(n_seqs, R)``; pads to
    ``n_micro`` forwards so every rank runs as many (FSDP2 gathers parameters in each forward)."""
    out = []
    with torch.no_grad():
        starts = list(range(0, len(seqs), micro))
        for j in range(max(n_micro, len(starts))):
            rows = list(range(starts[j], min(starts[j] + micro, len(seqs)))) if j < len(starts) else [0]
            lp, _, _, _ = _response_lp(model, seqs, rows, autocast=autocast)
            if j < len(starts):
                out.append(lp)
    return torch.cat(out) if out else torch.zeros((0, seqs.n_resp), device=seqs.device)


def _old_pass(model: Any, seqs: _Sequences, mbs: Sequence[np.ndarray], micro: int, sync_max: Callable[[int], int],
              autocast: Any) -> torch.Tensor:
    """Old log-probs per step, ``(n_steps, R)``, from no-grad passes over exactly the micro-batches of the first
    epoch's training passes (same rows, same padding), so with unchanged weights the ratio is exactly 1."""
    n = sum(len(mb) for mb in mbs)
    out = torch.zeros((n, seqs.n_resp), device=seqs.device)
    with torch.no_grad():
        for mb in mbs:
            for chunk, sel, row_of in micro_chunks(seqs.of_sample, mb, micro, sync_max):
                if len(chunk) == 0:
                    _padding_pass(model, seqs, autocast)
                    continue
                lp, _, _, _ = _response_lp(model, seqs, chunk.tolist(), autocast=autocast)
                out[torch.from_numpy(sel).to(out.device)] = lp[torch.from_numpy(row_of).to(out.device)]
    return out


def _rollout_old(samples: Sequence[StepSample], n_resp: int, device: torch.device | str) -> torch.Tensor | None:
    """``optim.rollout_old_logprobs``: the old log-probs per step, ``(n_steps, R)``, the rollout engine's own;
    ``None`` when a step lacks one per response token (an engine that does not report them: the no-grad pass)."""
    if any(len(s.logprobs) != len(s.response_ids) for s in samples):
        return None  # an engine that does not report them: the old policy's no-grad pass instead
    out = torch.zeros((len(samples), n_resp))
    for i, s in enumerate(samples):
        out[i, :len(s.logprobs)] = torch.tensor(s.logprobs, dtype=torch.float32)
    return out.to(device)


#: ``optim.rollout_old_logprobs``: the largest gap between the rollout's log-probs and the first training pass's
#: (unchanged weights) accepted as float rounding; fp32 measured about 1e-6, autocast (bf16) allows more
_OLD_GAP = {None: 1e-3, "autocast": 5e-2}


def _check_rollout_old(gap: float, autocast_dtype: Any) -> None:
    """The first training pass runs on the weights that made the rollouts: its log-probs must be the engine's up to
    float rounding, else the engine did not sample from the trained policy as the loss computes it.

    :raises ConfigError: the gap is past rounding."""
    tol = _OLD_GAP[None if autocast_dtype is None else "autocast"]
    if not gap <= tol:
        raise ConfigError(f"optim.rollout_old_logprobs: the rollout's log-probs differ from the trained policy's by "
                          f"{gap:.3g} before any step (> {tol:g}): the engine must be the trained model in the "
                          "training dtype, sampling at rollout.temperature=1 and rollout.top_p=1; set "
                          "optim.rollout_old_logprobs=false")


def _ref_logprobs(ref: Any, seqs: _Sequences, micro: int, n_micro: int, autocast: Any) -> torch.Tensor:
    if callable(ref) and not isinstance(ref, torch.nn.Module):  # a context-manager factory (LoRA: adapters off)
        model, ctx = ref()
        with ctx:
            return _no_grad_pass(model, seqs, micro, n_micro, autocast)
    return _no_grad_pass(ref, seqs, micro, n_micro, autocast)


def _approx_kl(model: Any, seqs: _Sequences, old: torch.Tensor, mb: np.ndarray, micro: int,
               sync_max: Callable[[int], int], autocast: Any, w_np: np.ndarray) -> float:
    """The k3 estimate of KL(pi_old || pi) on mini-batch ``mb`` under the weights now (no grad), weighed as the
    loss weighs its steps: how far the update has moved the policy on the steps it just trained on."""
    from .loss import kl_low_var

    total, w_total = 0.0, float(w_np[mb].sum()) if len(mb) else 1.0
    with torch.no_grad():
        for chunk, sel, row_of in micro_chunks(seqs.of_sample, mb, micro, sync_max):
            if len(chunk) == 0:
                _padding_pass(model, seqs, autocast)
                continue
            lp, _, rmask, _ = _response_lp(model, seqs, chunk.tolist(), autocast=autocast)
            r_idx = torch.from_numpy(row_of).to(lp.device)
            m = rmask[r_idx].float()
            k3 = (kl_low_var(old[torch.from_numpy(sel).to(lp.device)], lp[r_idx]) * m).sum(-1) / m.sum(-1).clamp(min=1)
            total += float((k3 * torch.from_numpy(w_np[sel] / w_total).to(k3)).sum())
    return total


def _free_cached(dev_type: str) -> None:
    """Return the allocator's cached blocks to the device (CUDA; a no-op elsewhere)."""
    if dev_type == "cuda":
        torch.cuda.empty_cache()


@dataclass(frozen=True, slots=True)
class UpdateContext:
    """What an update needs besides the policy, its optimizer and ``optim``: where it runs, set once a run.

    :param ref: the KL reference: a frozen model, or a callable returning ``(model, context)`` for LoRA, where the
        context disables the adapters; ``None``: no KL term.
    :param sync_max: the largest value of an int over ranks (identity in one process). Under torchrun every rank
        runs as many mini-batches, micro-batches and no-grad forwards as the busiest one (extra passes add zero
        gradient), so collectives line up and every rank takes the same number of optimizer steps.
    :param world_size: ranks sharing ``optim.mini_batch_size``.
    :param autocast_dtype: run forwards in ``torch.autocast`` of this dtype (bf16 on GPUs); parameters, gradients
        and optimizer state stay in their own (fp32) dtype.
    :param image_processor: the VL model's image processor: steps with images get their ``pixel_values`` and
        ``image_grid_thw`` in every forward (old, reference and training), like the rollout did.
    :param image_pad_id: the ``<|image_pad|>`` token id (marks image positions for the model). Steps whose response
        contains it (a malformed answer, already penalised as invalid) leave the update, counted as
        ``image_token_steps``: the model would read the token as a placeholder for an image that is not there.
    """

    pad_id: int
    ref: Any = None
    device: torch.device | str = "cpu"
    sync_max: Callable[[int], int] = identity
    world_size: int = 1
    autocast_dtype: torch.dtype | None = None
    image_processor: Any = None
    image_pad_id: int | None = None

    def autocast(self) -> Any:
        """A context-manager factory: ``torch.autocast`` in ``autocast_dtype``, or no autocast."""
        if self.autocast_dtype is None:
            return nullcontext
        dev_type, dtype = torch.device(self.device).type, self.autocast_dtype
        return lambda: torch.autocast(dev_type, dtype=dtype)


@dataclass
class _Batch:
    """One update's steps made ready for the loss: the distinct sequences, the per-step weights, advantages and
    old (and reference) log-probs on the model's device, and the epochs' shuffled orders."""

    samples: list[StepSample]
    seqs: _Sequences
    w_np: np.ndarray
    weights: torch.Tensor
    adv: torch.Tensor
    of_sample: torch.Tensor
    old: torch.Tensor
    ref_lp: torch.Tensor | None
    epochs: list[np.ndarray]
    n_mb: int
    n_dropped: int  # steps that left the update (an image placeholder in the response)
    reused_old: bool = False  # ``old`` is the rollout's log-probs (optim.rollout_old_logprobs), not a pass


def _prepare(model: Any, samples: Sequence[StepSample], cfg: OptimConfig, ctx: UpdateContext,
             rng: np.random.Generator, autocast: Any) -> _Batch:
    """The batch of one update: steps filtered and deduplicated, the epochs' orders drawn, then the old log-probs
    (batched exactly as epoch 0's training passes, so the first mini-batch's ratio is exactly 1 in bf16) and the
    reference's, in no-grad passes."""
    n_in = len(samples)
    if ctx.image_pad_id is not None:  # a response that emitted the image placeholder cannot be run without an image
        samples = [s for s in samples if ctx.image_pad_id not in s.response_ids]
    seqs = _Sequences(samples, ctx.pad_id, ctx.device, ctx.image_processor, ctx.image_pad_id,
                      share_prompts=cfg.dedup_prompts)
    micro, n = cfg.micro_batch, len(samples)
    n_fwd = ctx.sync_max(-(-len(seqs) // micro) if samples else 0)
    per_rank = max(1, cfg.mini_batch_size // max(ctx.world_size, 1))
    n_mb = ctx.sync_max(-(-n // per_rank))  # 0 when no rank has a step (every group gated or dropped): no update
    epochs = [rng.permutation(n) for _ in range(cfg.ppo_epochs if n_mb else 0)]
    model.eval()  # no dropout in the reference passes
    old = _rollout_old(samples, seqs.n_resp, ctx.device) if cfg.rollout_old_logprobs else None
    reused_old = old is not None
    if old is None:
        old = _old_pass(model, seqs, np.array_split(epochs[0], n_mb) if epochs else [], micro, ctx.sync_max, autocast)
    ref_lp = _ref_logprobs(ctx.ref, seqs, micro, n_fwd, autocast) if ctx.ref is not None and cfg.kl_coef > 0 \
        else None
    # every tensor the loss sees lives on the model's device (a CPU tensor mixed with CUDA log-probs is a crash)
    w_np = step_weights(samples, cfg.loss_agg)
    return _Batch(list(samples), seqs, w_np, torch.tensor(w_np, dtype=torch.float32, device=ctx.device),
                  torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=ctx.device),
                  torch.from_numpy(seqs.of_sample).to(ctx.device), old, ref_lp, epochs, n_mb, n_in - n, reused_old)


@dataclass
class _Tally:
    """The loss parts summed over an update's micro-batches, the ratio's range and each optimizer step's norm."""

    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("loss", "pg_loss", "kl", "entropy", "clip_frac", "approx_kl"), 0.0))
    ratio_max: float = 1.0
    ratio_min: float = 1.0
    grad_norms: list[float] = field(default_factory=list)
    optimizer_steps: int = 0
    old_gap: float = 0.0  # optim.rollout_old_logprobs: the largest |rollout - first pass| log-prob gap


def _train_minibatch(model: Any, optimizer: torch.optim.Optimizer, params: Sequence[torch.nn.Parameter],
                     b: _Batch, mb: np.ndarray, cfg: OptimConfig, ctx: UpdateContext, autocast: Any,
                     tally: _Tally, *, check_old: bool = False) -> None:
    """One optimizer step on mini-batch ``mb``: the Eq. 15 objective restricted to its steps,
    ``sum_i w_i loss_i / sum_i w_i`` with :func:`step_weights`, its gradient accumulated over micro-batches of
    distinct sequences, clipped, then stepped."""
    optimizer.zero_grad(set_to_none=True)
    w_total = float(b.w_np[mb].sum()) if len(mb) else 1.0
    loss_cfg = LossConfig(cfg.clip_ratio, cfg.kl_coef, cfg.entropy_coef, cfg.ratio)
    for chunk, sel_np, row_np in micro_chunks(b.seqs.of_sample, mb, cfg.micro_batch, ctx.sync_max):
        if len(chunk) == 0:  # zero gradient, the same collectives as the busiest rank
            (_padding_pass(model, b.seqs, autocast).sum() * 0.0).backward()
            continue
        lp, ent, rmask, free = _response_lp(model, b.seqs, chunk.tolist(), entropy=True, autocast=autocast)
        sel = torch.from_numpy(sel_np).to(ctx.device)
        row_of = torch.from_numpy(row_np).to(ctx.device)
        if check_old:  # optim.rollout_old_logprobs: the first pass, still on the rollout's weights
            gap = float(((lp.detach()[row_of] - b.old[sel]).abs() * rmask[row_of]).max())
            tally.old_gap = max(tally.old_gap, gap)
            _check_rollout_old(gap, ctx.autocast_dtype)
        out = policy_loss(lp[row_of], b.old[sel], b.adv[sel], rmask[row_of], b.weights[sel] / w_total, loss_cfg,
                          ref_logp=None if b.ref_lp is None else b.ref_lp[b.of_sample[sel]],
                          entropy=None if ent is None else ent[row_of], entropy_mask=free[row_of])
        out.loss.backward()
        share = float(b.w_np[sel_np].sum()) / w_total
        for key, value in (("loss", float(out.loss.detach())), ("pg_loss", out.pg), ("kl", out.kl),
                           ("entropy", out.entropy), ("approx_kl", out.approx_kl),
                           ("clip_frac", out.clip_frac * share)):
            tally.sums[key] += value
        tally.ratio_max, tally.ratio_min = max(tally.ratio_max, out.ratio_max), min(tally.ratio_min, out.ratio_min)
    gn = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
    tally.grad_norms.append(float(gn.full_tensor() if hasattr(gn, "full_tensor") else gn))
    optimizer.step()
    tally.optimizer_steps += 1


def ppo_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: Sequence[StepSample],
               cfg: OptimConfig, ctx: UpdateContext, *, rng: np.random.Generator | None = None) -> dict[str, float]:
    """PPO on one update's steps: ``cfg.ppo_epochs`` passes, each shuffling the steps and taking one optimizer step
    per mini-batch of ``cfg.mini_batch_size`` steps (over all ranks), gradients accumulated over micro-batches of
    ``cfg.micro_batch`` distinct sequences (:func:`_train_minibatch`); with ``cfg.target_kl`` a step that moved the
    policy too far is undone and the update stops. Old log-probs are the policy's before the update, reference
    log-probs ``ctx.ref``'s (:func:`_prepare`). Returns the update's metrics row."""
    t0 = time.perf_counter()
    autocast = ctx.autocast()
    b = _prepare(model, samples, cfg, ctx, rng if rng is not None else np.random.default_rng(0), autocast)
    t_old = time.perf_counter() - t0
    params = [p for p in model.parameters() if p.requires_grad]
    guard = KLGuard(cfg.target_kl, cfg.lr, params, optimizer) if cfg.target_kl > 0 else None
    tally = _Tally()
    model.train()
    for ep, perm in enumerate(b.epochs):
        if guard is not None and guard.fired:
            break
        for k, mb in enumerate(np.array_split(perm, b.n_mb)):
            if guard is not None:  # before the mini-batch's passes: FSDP2 holds its shards, not gathered weights
                guard.before_step()
            _train_minibatch(model, optimizer, params, b, mb, cfg, ctx, autocast, tally,
                             check_old=b.reused_old and ep == 0 and k == 0)
            if guard is not None:
                model.eval()
                kl_now = _approx_kl(model, b.seqs, b.old, mb, cfg.micro_batch, ctx.sync_max, autocast, b.w_np)
                model.train()
                if guard.after_step(kl_now, ctx.sync_max):
                    tally.optimizer_steps -= 1
                    break
    model.eval()
    # how far the whole update moved the policy: k3 KL(pi_old || pi) over all its steps under the weights it kept
    # (one no-grad pass; the guard's numbers cover one mini-batch each, the logged approx_kl is a mean before steps);
    # only when asked (optim.kl_end) or with the guard on: otherwise nothing reads it and it is not logged at all
    n = len(b.samples)
    kl_end: float | None = None
    if cfg.kl_end or guard is not None:
        kl_end = _approx_kl(model, b.seqs, b.old, np.arange(n), cfg.micro_batch, ctx.sync_max, autocast, b.w_np) \
            if b.n_mb else 0.0
    reshard(model)
    # gradients, the guard's snapshot, the old and reference log-probs and the batch go, then the cached blocks,
    # before a colocated engine wakes up and takes the memory back (empty_cache frees only unreferenced blocks)
    optimizer.zero_grad(set_to_none=True)
    if guard is not None:
        guard.release()
    n_seqs, n_dropped, b_n_mb, reused_old = len(b.seqs), b.n_dropped, b.n_mb, b.reused_old
    n_tokens = float(sum(len(s.response_ids) for s in b.samples))
    del b
    _free_cached(torch.device(ctx.device).type)
    n_passes = len(tally.grad_norms)  # mini-batches with a backward pass (a step the guard undid included)
    logs = {k: v / max(n_passes, 1) for k, v in tally.sums.items()}  # per optimizer step: parts sum to its loss
    if guard is not None:
        logs.update(kl_stop=float(guard.fired), approx_kl_after=guard.last_kl, lr=guard.finish())
        if guard.fired:
            logs["approx_kl_rejected"] = guard.rejected_kl
    if kl_end is not None:
        logs["approx_kl_end"] = kl_end
    if reused_old and b_n_mb:
        logs["old_logprob_gap"] = tally.old_gap
    logs.update(ratio_max=tally.ratio_max, ratio_min=tally.ratio_min,
                grad_norm=float(np.mean(tally.grad_norms)) if tally.grad_norms else 0.0,
                optimizer_steps=float(tally.optimizer_steps), n_steps=float(n), n_sequences=float(n_seqs),
                image_token_steps=float(n_dropped), n_tokens=n_tokens, time_old_ref=t_old,
                time_ppo=time.perf_counter() - t0 - t_old)
    return logs
