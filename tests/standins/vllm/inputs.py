"""``vllm.inputs.TokensPrompt`` of the stand-in: a plain dict (``prompt_token_ids``, ``multi_modal_data``)."""

from __future__ import annotations

__all__ = ["TokensPrompt"]


class TokensPrompt(dict):  # type: ignore[type-arg]
    """vLLM's token-id prompt (a TypedDict there)."""
