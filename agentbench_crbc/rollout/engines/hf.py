"""The transformers policy engine: batched, left-padded, KV-cached sampling on CPU or GPU; token ids in and out."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...hookspecs import hookimpl
from ..episodes.base import Completion, EngineCapabilities, SamplingParams

if TYPE_CHECKING:
    from ...host import EngineRegister
    from .factory import EngineRequest

__all__ = ["HFEngine", "abc_register_rollout_engines", "build", "cache_keyword"]


def cache_keyword(model: Any) -> str:
    """The keyword ``model``'s forward takes its KV cache by: ``cache`` (transformers >= 5.21) or
    ``past_key_values`` (earlier, and a deprecated alias until 5.40).

    A wrong name is not an error: it lands in ``**kwargs`` and every decode step sees one token, so it is looked up.
    """
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft forwards **kwargs
    params = inspect.signature(inner.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    raise ConfigError(f"{type(inner).__name__}.forward takes neither `cache` nor `past_key_values`; the hf engine "
                      "needs a transformers causal LM with a KV cache (a *ForCausalLM model)")


class HFEngine:
    """Generate with a Hugging Face causal LM (or Qwen2.5-VL) from prompt token ids.

    Text prompts run a plain decode loop (one forward per token over the batch, KV cache, rows that finished are
    dropped from the batch), which is the fastest path for small models on CPU. Prompts with images go through
    one left-padded, batched ``model.generate`` with the image processor's ``pixel_values``/``image_grid_thw`` (the
    ids must already hold the expanded ``<|image_pad|>`` run, as
    :class:`~agentbench_crbc.rollout.episodes.prompts.PromptBuilder` makes them).

    Log-probs are those of the sampling distribution (``log_softmax(logits / T)``; greedy: ``T = 1``), one per
    response token; the trainer recomputes its own. ``SamplingParams.seed`` seeds a private generator, so equal
    seeds and equal batches give equal outputs; temperature 0 is greedy.

    :param model: a ``*ForCausalLM`` or ``Qwen2_5_VLForConditionalGeneration`` in eval mode.
    :param tokenizer: its tokenizer (decodes the response text; gives EOS and pad ids).
    :param image_processor: needed only for image prompts.
    :param stop_token_ids: extra ids that end a response (EOS and ``<|im_end|>`` always do).
    :param autocast_dtype: run the model in ``torch.autocast`` of this dtype (bf16 with fp32 master weights).
    """

    def __init__(self, model: Any, tokenizer: Any, *, image_processor: Any = None,
                 stop_token_ids: Sequence[int] = (), autocast_dtype: Any = None) -> None:
        self.model = model
        self.autocast_dtype = autocast_dtype  # forwards in torch.autocast of this dtype (fp32 master weights)
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        stops = set(stop_token_ids)
        for tok in (tokenizer.eos_token, "<|im_end|>", "<|endoftext|>"):
            if tok is not None:
                i = tokenizer.convert_tokens_to_ids(tok)
                if isinstance(i, int) and i != getattr(tokenizer, "unk_token_id", None):
                    stops.add(i)
        self.stop_ids = frozenset(stops)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else next(iter(sorted(self.stop_ids))))
        self._device_before_sleep: Any = None
        self._cache_kw = cache_keyword(model)
        rows = None
        with contextlib.suppress(Exception):  # a padded embedding table samples ids past the tokenizer's
            rows = int(model.get_input_embeddings().num_embeddings)
        #: generates with the model it is given (the trainer's own parameters: not colocated, nothing to push or
        #: release) and takes ``choices`` in :meth:`generate` (text prompts: decoding restricted to given answers)
        self.capabilities = EngineCapabilities(constrains=True, tokenizer=tokenizer, image_processor=image_processor,
                                               model=model, vocab_size=rows if rows and rows > 0 else None)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    # -- protocol -------------------------------------------------------------------------------------------
    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                 images: Sequence[Any] | None = None,
                 choices: Sequence[Sequence[Sequence[int]] | None] | None = None) -> list[Completion]:
        """Complete each prompt; ``images[i]`` is a list of RGB arrays (or None) for prompt ``i``. Image prompts
        run as one left-padded batch through ``model.generate``, seeded with ``seed``.

        :param choices: constrained decoding: ``choices[i]`` lists the token sequences prompt ``i`` may be answered
            with (each ending in a stop id, none a prefix of another), or is None for free text. Every token is
            sampled from the model's distribution restricted to the tokens that continue some choice (a trie
            mask), so the answer is always one of them and its log-probs are those of the restricted
            distribution (a forced token has log-prob 0); the trainer recomputes them the same way.
        """
        from contextlib import nullcontext

        import torch

        if not prompt_ids:
            return []
        amp: Any = nullcontext() if self.autocast_dtype is None else \
            torch.autocast(self.device.type, dtype=self.autocast_dtype)
        with torch.inference_mode(), amp:
            if images is not None and any(images):
                if choices is not None and any(c for c in choices):
                    raise ConfigError("constrained decoding (rollout.constrain) is for text prompts; the hf engine "
                                      "cannot restrict image-prompt generation: set rollout.constrain=false")
                return self._generate_vl(prompt_ids, sampling, images)
            return self._generate_text(prompt_ids, sampling, choices)

    def update_weights(self, state: Mapping[str, Any]) -> None:
        """Load a state dict into the engine's model; the state of the engine's own model (the trainer's parameters,
        shared) loads nothing.

        :raises ConfigError: ``state`` is no state dict, or its names do not match the model's."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"update_weights takes a state dict (name -> tensor), not {type(state).__name__}; "
                              "pass model.state_dict()")
        if self._holds(state):
            return
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if missing or unexpected:  # a silent partial load would generate with stale weights
            raise ConfigError(f"update_weights: the weights do not match the engine's model (missing "
                              f"{sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]}); push the state of the "
                              "same architecture (a peft model's state to a peft model)")

    def _holds(self, state: Mapping[str, Any]) -> bool:
        """Whether ``state``'s tensors are the engine model's own (same names, same memory)."""
        own = self.model.state_dict()
        if own.keys() != state.keys():
            return False
        for k, t in own.items():
            v = state[k]
            if not (hasattr(v, "data_ptr") and v.data_ptr() == t.data_ptr() and v.shape == t.shape
                    and v.dtype == t.dtype and v.device == t.device):
                return False
        return True

    def sleep(self) -> None:
        """On an accelerator, move the model to CPU until :meth:`wake_up`."""
        if self.device.type != "cpu":
            self._device_before_sleep = self.device
            self.model.to("cpu")

    def wake_up(self) -> None:
        if self._device_before_sleep is not None:
            self.model.to(self._device_before_sleep)
            self._device_before_sleep = None

    # -- text -----------------------------------------------------------------------------------------------
    @staticmethod
    def _generator(dev: Any) -> Any:
        """The private sampling generator, on the model's device (``torch.multinomial`` needs them together)."""
        import torch

        return torch.Generator(device=dev)

    def _pick(self, logits: Any, sampling: SamplingParams, gen: Any, banned: Any = None) -> tuple[Any, Any]:
        import torch

        logits = logits.float()
        if banned is not None:  # constrained decoding: only tokens that continue an allowed answer
            logits = logits.masked_fill(banned, float("-inf"))
        if sampling.temperature <= 0:
            logp = torch.log_softmax(logits, dim=-1)
            nxt = logits.argmax(dim=-1)
        else:
            logp = torch.log_softmax(logits / sampling.temperature, dim=-1)
            probs = logp.exp()
            if sampling.top_p < 1.0:
                sp, si = probs.sort(dim=-1, descending=True)
                cut = sp.cumsum(-1) - sp > sampling.top_p
                sp = sp.masked_fill(cut, 0.0)
                probs = torch.zeros_like(probs).scatter(-1, si, sp)
            nxt = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
        return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)

    def _stopped_by_string(self, toks: list[int], stops: tuple[str, ...]) -> bool:
        tail = self.tokenizer.decode(toks[-8:], skip_special_tokens=False)
        return any(s in tail for s in stops)

    def _generate_text(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                       choices: Sequence[Sequence[Sequence[int]] | None] | None = None) -> list[Completion]:
        import torch
        from transformers import DynamicCache

        dev = self.device
        n = len(prompt_ids)
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompt_ids):
            if p:
                ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
                mask[i, width - len(p):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        gen = None
        if sampling.temperature > 0:
            gen = self._generator(dev)
            gen.manual_seed(sampling.seed if sampling.seed is not None else int(torch.randint(2**62, (1,))))
        cache = DynamicCache(config=self.model.config)
        ckw = {self._cache_kw: cache}
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                         **ckw)
        alive = list(range(n))  # original row of each batch row
        toks: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        reason = ["length"] * n
        last_pos = pos[:, -1]
        allowed = [None if choices is None or not choices[i] else [tuple(c) for c in choices[i]] for i in range(n)]
        limit = max(sampling.max_tokens, max((len(c) for a in allowed if a for c in a), default=0))
        vocab = out.logits.shape[-1]
        for _ in range(max(limit, 0)):
            # out is None once every row left is forced to its end (see below): its picks see one-hot distributions
            logits = out.logits[:, -1, :] if out is not None else torch.zeros((len(alive), vocab), device=dev)
            banned = _banned(logits, [allowed[row] for row in alive], [toks[row] for row in alive])
            nxt, lp = self._pick(logits, sampling, gen, banned)
            nl, ll = nxt.tolist(), lp.tolist()
            keep = []
            for b, row in enumerate(alive):
                toks[row].append(nl[b])
                lps[row].append(ll[b])
                if allowed[row] is not None:
                    if tuple(toks[row]) in allowed[row]:
                        reason[row] = "stop"
                    else:
                        keep.append(b)
                elif nl[b] in self.stop_ids or (sampling.stop and self._stopped_by_string(toks[row], sampling.stop)):
                    reason[row] = "stop"
                elif len(toks[row]) < sampling.max_tokens:
                    keep.append(b)
            if not keep:
                break
            if out is None or _forced_to_end([allowed[alive[b]] for b in keep], [toks[alive[b]] for b in keep]):
                # one allowed answer continues each row left: its remaining tokens are forced whatever the model
                # says, so no forward runs; the picks still run (zero logits under the same mask give the same
                # one-hot distributions bit for bit) and draw the same random numbers as with the forwards
                alive, out = [alive[b] for b in keep], None
                continue
            if len(keep) < len(alive):
                idx = torch.tensor(keep, device=dev)
                cache.batch_select_indices(idx)
                mask, nxt, last_pos = mask[idx], nxt[idx], last_pos[idx]
                alive = [alive[b] for b in keep]
            mask = torch.cat([mask, mask.new_ones((len(alive), 1))], dim=1)
            last_pos = last_pos + 1
            out = self.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                             use_cache=True, **ckw)
        return [Completion(tuple(t), tuple(lp), reason[i], self._decode(t)) for i, (t, lp) in
                enumerate(zip(toks, lps, strict=True))]

    def _decode(self, toks: Sequence[int]) -> str:
        body = [t for t in toks if t not in self.stop_ids]
        return str(self.tokenizer.decode(body, skip_special_tokens=False))

    # -- vision ---------------------------------------------------------------------------------------------
    def _generate_vl(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
                     images: Sequence[Any]) -> list[Completion]:
        """One batched ``model.generate`` over left-padded image prompts (their images in prompt order)."""
        import torch

        if self.image_processor is None:
            raise ValueError("image prompts need HFEngine(..., image_processor=...)")
        dev = self.device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        kw: dict[str, Any] = {}
        flat = [im for imgs in images for im in (imgs or [])]
        if flat:
            proc = self.image_processor(images=flat, return_tensors="pt")
            kw["pixel_values"] = proc["pixel_values"].to(dev, self.model.dtype)
            kw["image_grid_thw"] = proc["image_grid_thw"].to(dev)
            pad = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
            kw["mm_token_type_ids"] = (ids == pad).int()
        greedy = sampling.temperature <= 0
        # exactly the requested sampling: a fresh GenerationConfig (the model's own, e.g. Qwen2.5-VL's
        # repetition_penalty 1.05 or top_k, would fill every field left unset), and no output_scores (batch x vocab
        # logits kept for every step): a processor keeps the chosen tokens' log-probs, one step at a time
        from transformers import GenerationConfig

        gcfg = GenerationConfig(do_sample=not greedy, max_new_tokens=sampling.max_tokens,
                                eos_token_id=sorted(self.stop_ids), pad_token_id=self.pad_id, repetition_penalty=1.0,
                                temperature=sampling.temperature if not greedy else 1.0,
                                top_p=sampling.top_p if not greedy else 1.0, top_k=0, min_p=None, typical_p=1.0,
                                no_repeat_ngram_size=0, return_dict_in_generate=True)
        record = _chosen_logprobs(1.0 if greedy else sampling.temperature)
        inner = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        saved_cfg = inner.generation_config
        inner.generation_config = GenerationConfig()
        try:
            with torch.random.fork_rng(devices=[] if dev.type in ("cpu", "meta") else [dev]):
                if sampling.seed is not None:
                    torch.manual_seed(sampling.seed)
                res = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=gcfg,
                                          logits_processor=[record], **kw)
        finally:
            inner.generation_config = saved_cfg
        seqs = res.sequences if hasattr(res, "sequences") else res
        steps = record.finish(seqs).cpu()  # (B, generated): log_softmax(logits / T) at the chosen tokens
        out = []
        for b in range(len(prompts)):
            toks = seqs[b, width:].tolist()
            lps = [float(x) for x in steps[b, :len(toks)]]
            end = next((k + 1 for k, t in enumerate(toks) if t in self.stop_ids), None)
            if end is not None:
                toks = toks[:end]
            elif self.pad_id not in self.stop_ids:
                while toks and toks[-1] == self.pad_id:
                    toks.pop()
            reason = "stop" if toks and toks[-1] in self.stop_ids else "length"
            out.append(Completion(tuple(toks), tuple(lps[: len(toks)]), reason, self._decode(toks)))
        return out


def _forced_to_end(allowed: Sequence[list[tuple[int, ...]] | None], done: Sequence[Sequence[int]]) -> bool:
    """Whether every row is constrained and exactly one of its allowed answers continues the tokens it has (the
    rest of its answer is then forced: each later position allows one token)."""
    for cands, have in zip(allowed, done, strict=True):
        if cands is None:
            return False
        k, have_t = len(have), tuple(have)
        if sum(1 for c in cands if len(c) > k and c[:k] == have_t) != 1:
            return False
    return True


def _banned(logits: Any, allowed: Sequence[list[tuple[int, ...]] | None], done: Sequence[Sequence[int]]) -> Any:
    """A ``(rows, vocab)`` mask of the tokens a constrained row may not take next (None when no row is
    constrained): those continuing none of its allowed answers after the tokens it has."""
    import torch

    if all(a is None for a in allowed):
        return None
    banned = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    for b, (cands, have) in enumerate(zip(allowed, done, strict=True)):
        if cands is None:
            continue
        k = len(have)
        nxt = sorted({c[k] for c in cands if len(c) > k and list(c[:k]) == list(have)})
        if not nxt:
            raise ValueError(f"constrained decoding: no allowed answer continues {list(have)}; choices must be "
                             "distinct and none a prefix of another")
        banned[b] = True
        banned[b, nxt] = False
    return banned


def _chosen_logprobs(temperature: float) -> Any:
    """A logits processor for ``model.generate`` that keeps ``log_softmax(logits / temperature)`` at each chosen
    token: it holds one step's ``(batch, vocab)`` log-probs and reads the token picked from them at the next call
    (or from the final sequences in :meth:`finish`); custom processors run before the sampling warpers, so the
    logits are the model's own."""
    import torch
    from transformers import LogitsProcessor

    class ChosenLogprobs(LogitsProcessor):
        def __init__(self) -> None:
            self.prev: Any = None
            self.steps: list[Any] = []

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if self.prev is not None:
                self.steps.append(self.prev.gather(-1, input_ids[:, -1:].to(self.prev.device)).squeeze(-1))
            self.prev = torch.log_softmax(scores.float() / temperature, dim=-1)
            return scores

        def finish(self, sequences: Any) -> Any:
            if self.prev is not None:
                self.steps.append(self.prev.gather(-1, sequences[:, -1:].to(self.prev.device)).squeeze(-1))
                self.prev = None
            if not self.steps:
                return torch.zeros((sequences.shape[0], 0))
            return torch.stack(self.steps, dim=1)

    return ChosenLogprobs()


def build(request: EngineRequest) -> HFEngine:
    """The ``hf`` engine: generate with ``request.model`` (the trainer's policy), or load ``request.spec`` /
    ``request.model_name`` (``tiny``, ``tiny-vl``, ``smollm2``, a Hugging Face id or folder) on ``request.device``.

    Options: ``threads`` (torch CPU threads, set before loading), ``stop_token_ids``.
    """
    from ...extras import require

    require("torch", "transformers")
    opts = request.options
    if "threads" in opts:
        import torch

        torch.set_num_threads(int(opts["threads"]))
    model, tok, proc = request.model, request.tokenizer, request.image_processor
    if model is None:
        name = request.spec or request.model_name
        if not name:
            raise ConfigError("the hf engine needs a model: --policy hf:NAME (tiny, smollm2, a Hugging Face id or "
                              "folder) or a loaded model")
        from .models import load_model

        model, tok = load_model(name, device=None if request.device is None else str(request.device))
        if isinstance(tok, tuple):
            tok, proc = tok
    elif tok is None:
        raise ConfigError("the hf engine was given a model without its tokenizer; pass EngineRequest(tokenizer=...)")
    return HFEngine(model, tok, image_processor=proc, stop_token_ids=tuple(opts.get("stop_token_ids", ())),
                    autocast_dtype=request.autocast_dtype)


@hookimpl
def abc_register_rollout_engines(register: EngineRegister) -> None:
    register.add("hf", build, options=("threads", "stop_token_ids"),
                 summary="transformers: batched KV-cached sampling on CPU or GPU (hf:NAME)", extra="train")
