"""Named anchor-extractor registries, one per environment family (callables returning hashable state keys)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

from .errors import DuplicateNameError, UnknownNameError

__all__ = ["AnchorExtractor", "AnchorRegistry"]

#: An extractor's arguments are the family's own (the env, or an observation and an engine view).
AnchorExtractor = Callable[..., Hashable]


class AnchorRegistry(dict[str, AnchorExtractor]):
    """The anchor extractors of one environment family, by name; a plain dict with checked add and lookup."""

    def __init__(self, family: str, builtins: Mapping[str, AnchorExtractor]) -> None:
        super().__init__(builtins)
        self.family = family

    def register(self, name: str, fn: AnchorExtractor) -> None:
        """Make ``fn(env) -> hashable`` selectable as ``gymnasium.make(..., anchor=name)``."""
        if name in self:
            raise DuplicateNameError(f"a {self.family} anchor extractor named {name!r} exists; pick another name")
        self[name] = fn

    def extractor(self, name: str) -> AnchorExtractor:
        """The extractor registered as ``name``; an unknown name lists the registered ones."""
        try:
            return self[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.family} anchor {name!r}; choose one of {', '.join(sorted(self))}") from None
