"""Episode running: rollout types, prompts, action parsing and the group runner."""

__all__: list[str] = []
