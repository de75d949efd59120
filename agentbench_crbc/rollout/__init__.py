"""Group rollout engine: prompts, action parsing, policy engines (transformers, vLLM, OpenAI, baselines)."""
