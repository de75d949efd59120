"""The vLLM policy engine (optional extra ``agentbench-crbc[vllm]``, GPU): token-id prompts, images, weight updates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from .base import Completion, SamplingParams

__all__ = ["VLLMEngine"]


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ConfigError(f"the vllm engine needs vLLM on a CUDA machine: pip install 'agentbench-crbc[vllm]' "
                          f"({exc}); on CPU use the hf engine") from None
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

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                 images: Sequence[Any] | None = None) -> list[Completion]:
        from vllm.inputs import TokensPrompt

        if not prompt_ids:
            return []
        prompts = []
        for i, ids in enumerate(prompt_ids):
            p: dict[str, Any] = {"prompt_token_ids": list(ids)}
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

    def update_weights(self, state: Any) -> None:
        """Push new weights (a state dict or module) into the running model, in place."""
        if hasattr(state, "state_dict"):
            state = state.state_dict()
        items = list(state.items())

        def load(worker: Any) -> None:
            worker.model_runner.model.load_weights(items)

        engine = self.llm.llm_engine
        if hasattr(self.llm, "collective_rpc"):
            self.llm.collective_rpc(load)
        else:  # older vLLM
            engine.model_executor.driver_worker.model_runner.model.load_weights(items)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        if hasattr(self.llm, "sleep"):
            self.llm.sleep(level=1)

    def wake_up(self) -> None:
        if hasattr(self.llm, "wake_up"):
            self.llm.wake_up()
