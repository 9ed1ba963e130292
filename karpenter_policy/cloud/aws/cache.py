"""A small thread-safe cache whose entries expire after a TTL measured on an injectable clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from karpenter_policy.cloud.provider import Clock

_V = TypeVar("_V")


class TtlCache(Generic[_V]):
    """``get_or_load(key, load)``: the cached value while fresh, else ``load()`` (stored unless it raised)."""

    def __init__(self, clock: Clock, ttl: float) -> None:
        self._clock = clock
        self._ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, _V]] = {}

    def get_or_load(self, key: Hashable, load: Callable[[], _V]) -> _V:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > now:
                return entry[1]
        value = load()
        with self._lock:
            self._entries[key] = (now + self._ttl, value)
        return value

    def invalidate(self, key: Hashable | None = None) -> None:
        """Forget ``key`` (every key when None)."""
        with self._lock:
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)


__all__ = ["TtlCache"]
