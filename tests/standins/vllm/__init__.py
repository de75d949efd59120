"""A CPU stand-in for vLLM's offline ``LLM``, for the trainer's tests (``tests/standins`` on ``PYTHONPATH``).

It implements the surface :class:`agentbench_crbc.rollout.engines.vllm.VLLMEngine` drives, with vLLM 0.32-0.33's
signatures (``__version__`` says 0.33): ``LLM(model, **kwargs)``, ``get_tokenizer``,
``generate`` of ``TokensPrompt`` with
``multi_modal_data``, ``collective_rpc(method, timeout=None, args=(), kwargs=None)`` calling the worker method
``reload_weights(weights_path=...)`` (any other worker method or keyword is refused), ``sleep(level=1)`` (levels 1
and 2), ``wake_up(tags=None)`` (tags ``"weights"`` and ``"kv_cache"``: awake again once both are),
``reset_prefix_cache``, ``llm_engine.model_config``; and checks a push the way vLLM's loader does:

- vLLM's ``dtype="auto"`` serves an fp32 checkpoint in bf16 (a half-precision one in its own dtype);
- every tensor name must reach a module or parameter of the served model (``AutoWeightsLoader``: "There is no module
  or parameter named 'module' in Qwen2ForCausalLM"), with a tied ``lm_head.`` skipped and ``rotary_emb.inv_freq``
  ignored; Qwen2.5-VL takes the transformers 5 names and the legacy ones (``visual.``, ``model.layers.``), as
  vLLM's ``hf_to_vllm_mapper`` does;
- shapes must match (``default_weight_loader``), and every parameter must be loaded ("Following weights were not
  initialized from checkpoint");
- generating, or reloading, while asleep is an error.

Each event is appended as a JSON line to ``$ABC_VLLM_STANDIN_LOG/rank{RANK}.jsonl`` (when set): the served dtype,
each push's tensor dtypes, bytes, folder and a weight fingerprint, generate calls, sleeps and wake-ups. The model
loads through ``agentbench_crbc.rollout.engines.models.load_model`` (``tiny``, ``tiny-vl``, a folder) and generates with
the transformers engine, so a run's rollouts are real.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

__version__ = "0.33.0+standin"  # the surface below is vLLM 0.32-0.33's
__all__ = ["LLM", "SamplingParams"]


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop: list[str] | None = None
    logprobs: int | None = None
    skip_special_tokens: bool = True


def _record(event: str, **fields: Any) -> None:
    folder = os.environ.get("ABC_VLLM_STANDIN_LOG")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"rank{os.environ.get('RANK', '0')}.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": event, **fields}) + "\n")


def _serving_dtype(dtype: Any, config: Any) -> Any:
    import torch

    if dtype not in (None, "auto"):
        return dtype if isinstance(dtype, torch.dtype) else getattr(torch, str(dtype).removeprefix("torch."))
    text = getattr(config, "text_config", None) or config
    own = getattr(text, "dtype", None) or getattr(config, "dtype", None)
    own = getattr(torch, own, None) if isinstance(own, str) else own
    return own if own in (torch.float16, torch.bfloat16) else torch.bfloat16  # vLLM: fp32 checkpoints -> bf16


def _tied(config: Any) -> bool:
    text = getattr(config, "text_config", None) or config
    return bool(getattr(config, "tie_word_embeddings", False) or getattr(text, "tie_word_embeddings", False))


def _vl_name(model: Any, name: str) -> str:
    """vLLM's Qwen2.5-VL ``hf_to_vllm_mapper``, written as the transformers 5 names the served model has."""
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "language_model") or not hasattr(inner, "visual"):
        return name
    if name.startswith("visual."):
        return "model." + name
    if name.startswith("model.") and not name.startswith(("model.language_model.", "model.visual.")):
        return "model.language_model." + name.removeprefix("model.")
    return name


def _no_such(model: Any, name: str) -> str | None:
    """The first prefix of ``name`` that is no module or parameter of ``model`` (vLLM's error), or None."""
    mod, parts = model, name.split(".")
    for i, part in enumerate(parts):
        children = dict(mod.named_children())
        if part in children:
            mod = children[part]
            continue
        if i == len(parts) - 1 and (part in mod._parameters or part in mod._buffers):
            return None
        return ".".join(parts[:i + 1])
    return name


def load_weights(model: Any, tensors: dict[str, Any]) -> set[str]:
    """Copy ``tensors`` into ``model`` with vLLM's checks; return the loaded parameter names."""
    import torch

    tied = _tied(model.config)
    params = dict(model.named_parameters())  # a tied head is the embedding's parameter: listed once
    loaded: set[str] = set()
    for name, t in tensors.items():
        if "rotary_emb.inv_freq" in name or (tied and name.startswith("lm_head.")):
            continue
        target = _vl_name(model, name)
        bad = _no_such(model, target)
        if bad is not None or target not in params:
            raise ValueError(f"There is no module or parameter named '{bad or target}' in {type(model).__name__}")
        p = params[target]
        if tuple(p.shape) != tuple(t.shape):
            raise AssertionError(f"Attempted to load weight ({t.size()}) into parameter ({p.size()})")
        with torch.no_grad():
            p.copy_(t)
        loaded.add(target)
    missing = set(params) - loaded
    if missing:
        raise ValueError(f"Following weights were not initialized from checkpoint: {sorted(missing)}")
    return loaded


def _fingerprint(tensors: Any) -> float:
    return float(sum(t.double().abs().sum().item() for t in tensors))


class LLM:
    """``vllm.LLM`` on the CPU: the transformers engine generates, pushes are checked as vLLM checks them."""

    def __init__(self, model: str, *, dtype: Any = "auto", seed: int = 0, enable_sleep_mode: bool = False,
                 distributed_executor_backend: str | None = None, **kwargs: Any) -> None:
        from agentbench_crbc.rollout.engines.hf import HFEngine
        from agentbench_crbc.rollout.engines.models import load_model

        self.model, tok = load_model(model, device="cpu")
        self.tokenizer, self.processor = tok if isinstance(tok, tuple) else (tok, None)
        self.dtype = _serving_dtype(dtype, self.model.config)
        self.model = self.model.to(self.dtype).eval()
        self.engine = HFEngine(self.model, self.tokenizer, image_processor=self.processor)
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(hf_config=self.model.config,
                                                                        dtype=self.dtype))
        self.sleep_mode, self.asleep = enable_sleep_mode, False
        self.sleeping_tags: set[str] = set()
        _record("init", model=model, dtype=str(self.dtype), backend=distributed_executor_backend, seed=seed,
                rank=os.environ.get("RANK", "0"), options=sorted(kwargs))

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def _expand(self, ids: list[int], images: list[Any]) -> list[int]:
        """vLLM expands each image's single placeholder to the image's patch count itself."""
        import numpy as np

        pad = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        merge = int(getattr(self.processor, "merge_size", 2))
        counts = [int(np.prod(self.processor(images=[im], return_tensors="np")["image_grid_thw"][0])) // merge**2
                  for im in images]
        out: list[int] = []
        for t in ids:
            if t == pad:
                if not counts or (out and out[-1] == pad):
                    raise ValueError("a prompt holds more image placeholders than images (or a run of them)")
                out.extend([pad] * counts.pop(0))
            else:
                out.append(t)
        if counts:
            raise ValueError("an image without its placeholder in the prompt")
        return out

    def generate(self, prompts: list[Any], params: list[SamplingParams], use_tqdm: bool = False) -> list[Any]:
        import numpy as np

        from agentbench_crbc.rollout.episodes.base import SamplingParams as Ours

        if self.asleep:
            raise RuntimeError("generate() while the engine sleeps: call wake_up() first")
        ids, images = [], []
        for p in prompts:
            mm = (p.get("multi_modal_data") or {}).get("image")
            ims = [] if mm is None else [np.asarray(x) for x in (mm if isinstance(mm, list) else [mm])]
            ids.append(self._expand(list(p["prompt_token_ids"]), ims) if ims else list(p["prompt_token_ids"]))
            images.append(ims or None)
        sp = params[0]
        ours = Ours(temperature=sp.temperature, top_p=sp.top_p, max_tokens=sp.max_tokens, seed=sp.seed,
                    stop=tuple(sp.stop or ()))
        done = self.engine.generate(ids, ours, images=images if any(images) else None)
        _record("generate", prompts=len(prompts), images=sum(len(x or []) for x in images))
        return [SimpleNamespace(outputs=[SimpleNamespace(
            token_ids=list(c.token_ids), text=c.text, finish_reason="stop" if c.finish_reason == "stop" else "length",
            logprobs=[{t: SimpleNamespace(logprob=lp)} for t, lp in zip(c.token_ids, c.logprobs, strict=True)])])
            for c in done]

    def collective_rpc(self, method: str, timeout: float | None = None, args: tuple[Any, ...] = (),
                       kwargs: dict[str, Any] | None = None) -> list[Any]:
        if method != "reload_weights":
            raise NotImplementedError(f"the vLLM stand-in has no worker method {method!r}")
        return [self._reload_weights(*args, **(kwargs or {}))]

    def _reload_weights(self, weights_path: str | None = None, is_checkpoint_format: bool = True) -> None:
        """The worker's ``reload_weights``: the safetensors files of ``weights_path`` (vLLM >= 0.32)."""
        if weights_path is None:
            raise NotImplementedError("the vLLM stand-in reloads only from weights_path=FOLDER")
        if self.asleep or self.sleeping_tags:
            raise RuntimeError("reload_weights while the engine sleeps: call wake_up() first")
        from safetensors.torch import load_file

        folder = Path(weights_path)
        files = sorted(folder.glob("*.safetensors"))
        tensors: dict[str, Any] = {}
        for f in files:
            tensors.update(load_file(str(f)))
        load_weights(self.model, tensors)
        _record("reload", dtypes=sorted({str(t.dtype) for t in tensors.values()}), names=len(tensors),
                bytes=sum(f.stat().st_size for f in files), folder=str(folder.parent),
                fingerprint=_fingerprint(self.model.parameters()))

    def reset_prefix_cache(self) -> None:
        pass

    def sleep(self, level: int = 1) -> None:
        if level not in (1, 2):
            raise ValueError(f"sleep level {level}: vLLM has levels 1 and 2")
        self.asleep = self.sleep_mode
        self.sleeping_tags = {"weights", "kv_cache"} if self.sleep_mode else set()
        _record("sleep", level=level)

    def wake_up(self, tags: list[str] | None = None) -> None:
        unknown = set(tags or ()) - {"weights", "kv_cache"}
        if unknown:
            raise ValueError(f"wake_up tags {sorted(unknown)}: vLLM's are 'weights' and 'kv_cache'")
        self.sleeping_tags -= set(tags) if tags is not None else self.sleeping_tags
        self.asleep = bool(self.sleeping_tags)
        _record("wake", tags=tags)
