"""An engine for any OpenAI-compatible completions server (vLLM, SGLang) fed token-id prompts over HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError, EnvError
from ...hookspecs import hookimpl
from ...io import json_text
from ..episodes.base import Completion, EngineCapabilities, SamplingParams

if TYPE_CHECKING:
    from ...host import EngineRegister
    from .factory import EngineRequest

__all__ = ["OPTIONS", "OpenAIEngine", "abc_register_rollout_engines", "build"]

#: The ``EngineRequest.options`` keys the ``openai`` engine reads (keywords of :class:`OpenAIEngine`).
OPTIONS = ("api_key", "timeout", "max_concurrency", "post", "weight_sync")


class OpenAIEngine:
    """``POST {base_url}/completions`` with ``prompt`` = token ids, ``logprobs=1`` and
    ``return_tokens_as_token_ids`` (vLLM's extension; tokens come back as ``token_id:123``), one request per
    prompt, sent concurrently.

    Weights live in the server: :meth:`update_weights` calls ``weight_sync(state)`` with the state dict when given
    (e.g. a function that saves it and asks the server to reload), else it is a no-op.

    :param base_url: e.g. ``http://localhost:8000/v1``.
    :param model: the served model name.
    :param tokenizer: decodes responses when the server sends no text; maps token strings to ids as a fallback.
    :param post: ``post(url, json_body, headers, timeout) -> dict``; default uses httpx (lazily) or urllib.
    """

    def __init__(self, base_url: str, model: str, *, tokenizer: Any = None, api_key: str | None = None,
                 timeout: float = 600.0, max_concurrency: int = 64,
                 post: Callable[[str, dict[str, Any], dict[str, str], float], dict[str, Any]] | None = None,
                 weight_sync: Callable[[Any], None] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self._post = post or _default_post
        self.weight_sync = weight_sync
        #: the weights live in the server (not colocated); prompts are built with ``tokenizer``
        self.capabilities = EngineCapabilities(tokenizer=tokenizer)

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams,
                 images: Sequence[Any] | None = None) -> list[Completion]:
        if images is not None and any(images):
            raise NotImplementedError("OpenAIEngine sends token-id prompts only; use HFEngine or VLLMEngine for "
                                      "images")
        if not prompt_ids:
            return []

        def one(i: int) -> Completion:
            body: dict[str, Any] = {
                "model": self.model, "prompt": list(prompt_ids[i]), "max_tokens": sampling.max_tokens,
                "temperature": sampling.temperature, "top_p": sampling.top_p, "logprobs": 1,
                "return_tokens_as_token_ids": True, "skip_special_tokens": False,
            }
            if sampling.seed is not None:
                body["seed"] = sampling.seed + i
            if sampling.stop:
                body["stop"] = list(sampling.stop)
            reply = self._post(f"{self.base_url}/completions", body, self.headers, self.timeout)
            return self._completion(reply)

        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(prompt_ids))) as ex:
            return list(ex.map(one, range(len(prompt_ids))))

    def _completion(self, reply: dict[str, Any]) -> Completion:
        try:
            choice = reply["choices"][0]
            lp = choice.get("logprobs") or {}
            tokens = lp.get("tokens") or []
            ids = [self._token_id(t) for t in tokens]
            logprobs = [float(x) if x is not None else 0.0 for x in (lp.get("token_logprobs") or [])]
            reason = "stop" if choice.get("finish_reason") == "stop" else "length"
            text = choice.get("text")
            if text is None and self.tokenizer is not None:
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
            return Completion(tuple(ids), tuple(logprobs[: len(ids)]), reason, str(text or ""))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise EnvError(f"the completions server answered something unexpected ({exc!r}): "
                           f"{reply!r:.300}") from None

    def _token_id(self, token: str) -> int:
        if token.startswith("token_id:"):
            return int(token[len("token_id:"):])
        if self.tokenizer is None:
            raise ValueError(f"token {token!r} without ids; start vLLM >= 0.6 or pass tokenizer=")
        return int(self.tokenizer.convert_tokens_to_ids(token))

    def update_weights(self, state: Mapping[str, Any]) -> None:
        """Hand the state dict to ``weight_sync`` (when given)."""
        if self.weight_sync is not None:
            self.weight_sync(state)

    def sleep(self) -> None:
        """The server manages its memory."""

    def wake_up(self) -> None:
        """The server manages its memory."""


def _default_post(url: str, body: dict[str, Any], headers: dict[str, str], timeout: float) -> dict[str, Any]:
    try:
        import httpx
    except ImportError:
        httpx = None  # type: ignore[misc,arg-type,call-arg,assignment]
    if httpx is not None:
        try:
            r = httpx.post(url, json=body, headers=headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise EnvError(f"cannot reach the completions server at {url}: {exc}") from None
        if r.status_code != 200:
            raise EnvError(f"{url} answered HTTP {r.status_code}: {r.text[:300]}")
        return r.json()  # type: ignore[no-any-return]
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=json_text(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]
    except (urllib.error.URLError, OSError) as exc:
        raise EnvError(f"cannot reach the completions server at {url}: {exc}") from None


def build(request: EngineRequest) -> OpenAIEngine:
    """The ``openai`` engine: the server at ``request.spec`` (``openai:http://localhost:8000/v1``) serving
    ``request.model_name``; its tokenizer is ``request.tokenizer`` or loaded from ``request.model_name``.

    Options: ``api_key``, ``timeout``, ``max_concurrency``, ``post``, ``weight_sync`` (see :class:`OpenAIEngine`).
    """
    if not request.spec:
        raise ConfigError("the openai engine needs the server's URL: --policy openai:http://HOST:PORT/v1")
    if not request.model_name:
        raise ConfigError("--policy openai:URL needs --model NAME (also used to load its tokenizer)")
    tok = request.tokenizer
    if tok is None:
        from ...extras import require

        require("transformers")
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(request.model_name)
    return OpenAIEngine(request.spec, request.model_name, tokenizer=tok,
                        **{k: request.options[k] for k in OPTIONS if k in request.options})


@hookimpl
def abc_register_rollout_engines(register: EngineRegister) -> None:
    register.add("openai", build, options=OPTIONS,
                 summary="an OpenAI-compatible completions server, token-id prompts (openai:URL)")
