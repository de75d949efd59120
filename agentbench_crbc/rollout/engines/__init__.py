"""Rollout engines: the engine registry and factory, model loading, and the hf, vLLM, OpenAI and baseline engines."""

__all__: list[str] = []
