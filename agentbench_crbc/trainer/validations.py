"""The validations a run keeps in its state, by tag: one typed record each (aggregates, no per-episode outcomes)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

__all__ = ["AFTER", "BEFORE", "UNTRAINED", "Validation", "Validations"]

#: The untrained model, before the imitation warm start (the learning curve's first point; not recorded).
UNTRAINED = "untrained"
#: The policy RL starts from (after the warm start, if any).
BEFORE = "before"
#: The final policy.
AFTER = "after"


@dataclass(frozen=True, slots=True)
class Validation:
    """One validation's aggregates: the update it ran after, each mode's numbers (``success``, ``n_episodes``,
    ``stderr``...; its episodes live in ``eval/update-NNNN.json``) and, before RL, the reference policies'."""

    update: int
    modes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reference: Mapping[str, Mapping[str, Any]] | None = None

    def success(self, mode: str) -> float | None:
        """Mode ``mode``'s success rate (``None``: not validated in that mode)."""
        return self.modes.get(mode, {}).get("success")

    def to_json(self) -> dict[str, Any]:
        """The object ``state.json`` holds: ``{"update": u, <mode>: {...}, ..., "reference": {...}}``."""
        out: dict[str, Any] = {"update": self.update, **{k: dict(v) for k, v in self.modes.items()}}
        if self.reference is not None:
            out["reference"] = {k: dict(v) for k, v in self.reference.items()}
        return out

    @classmethod
    def from_json(cls, entry: Any, where: str) -> Validation:
        """:meth:`to_json`'s object back.

        :raises ConfigError: not an object with an integer ``update`` and object values (one line, ``where`` first).
        """
        update = entry.get("update") if isinstance(entry, dict) else None
        if isinstance(update, bool) or not isinstance(update, int):
            raise ConfigError(f"{where} is not an object with an integer update; the checkpoint is not one the "
                              "trainer wrote")
        parts = {k: v for k, v in entry.items() if k != "update"}
        if not all(isinstance(v, dict) for v in parts.values()):
            raise ConfigError(f"{where}: a mode or the reference is not a JSON object; the checkpoint is not one the "
                              "trainer wrote")
        reference = parts.pop("reference", None)
        return cls(update, parts, reference)


class Validations:
    """The run's validations by tag (:data:`UNTRAINED`, :data:`BEFORE`, :data:`AFTER`, ``update-N`` on the way)."""

    __slots__ = ("_by_tag",)

    def __init__(self, by_tag: Mapping[str, Validation] | None = None) -> None:
        self._by_tag: dict[str, Validation] = dict(by_tag or {})

    def __contains__(self, tag: object) -> bool:
        return tag in self._by_tag

    def __getitem__(self, tag: str) -> Validation:
        return self._by_tag[tag]

    def __setitem__(self, tag: str, validation: Validation) -> None:
        self._by_tag[tag] = validation

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_tag)

    def __len__(self) -> int:
        return len(self._by_tag)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Validations) and self._by_tag == other._by_tag

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Validations({self._by_tag!r})"

    def get(self, tag: str) -> Validation | None:
        """Validation ``tag``, or ``None`` when it did not run."""
        return self._by_tag.get(tag)

    @property
    def untrained(self) -> Validation | None:
        """The untrained model's validation (a warm-started run's first), if it ran."""
        return self._by_tag.get(UNTRAINED)

    @property
    def before(self) -> Validation | None:
        """The validation before RL, if it ran."""
        return self._by_tag.get(BEFORE)

    @property
    def after(self) -> Validation | None:
        """The final validation, if it ran."""
        return self._by_tag.get(AFTER)

    def success(self, tag: str, mode: str) -> float | None:
        """Mode ``mode``'s success rate at validation ``tag`` (``None``: either did not run)."""
        v = self._by_tag.get(tag)
        return None if v is None else v.success(mode)

    def to_json(self) -> dict[str, Any]:
        """``{tag: Validation.to_json()}``, the ``evals`` object of ``state.json``."""
        return {tag: v.to_json() for tag, v in self._by_tag.items()}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Validations:
        """:meth:`to_json`'s object back.

        :raises ConfigError: a malformed entry (one line, ``where`` first, naming the tag).
        """
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: evals is not a JSON object")
        return cls({str(tag): Validation.from_json(v, f"{where}: evals[{tag!r}]") for tag, v in obj.items()})
