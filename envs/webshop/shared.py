"""One lazily built value per owner object, shared by the whole process (the search index, the browser server)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["SharedPerOwner"]

K = TypeVar("K")
V = TypeVar("V")


class SharedPerOwner(Generic[K, V]):
    """``get(owner)`` builds ``factory(owner)`` once (thread-safe) and forgets it when the owner is collected."""

    def __init__(self, factory: Callable[[K], V]) -> None:
        self._factory = factory
        self._values: weakref.WeakKeyDictionary[K, V] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, owner: K) -> V:
        with self._lock:
            value = self._values.get(owner)
            if value is None:
                value = self._values[owner] = self._factory(owner)
            return value
