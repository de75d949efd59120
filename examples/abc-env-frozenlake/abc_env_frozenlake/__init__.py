"""FrozenLake as a text environment family of agentbench-crbc (an example of a third-party family)."""

from __future__ import annotations

__all__: list[str] = []
