"""A small thread-safe cache whose entries expire after a TTL measured on an injectable clock.

With ``keep_stale`` an entry whose reload fails with a :class:`~karpenter_policy.cloud.CloudError` stays in use
(the failure is logged) and the reload is tried again after ``stale_retry`` seconds: a throttled or briefly
unreachable API does not stop a controller that already knows a recent answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import Clock

log = logging.getLogger(__name__)
_V = TypeVar("_V")


class TtlCache(Generic[_V]):
    """``get_or_load(key, load)``: the cached value while fresh, else ``load()`` (stored unless it raised)."""

    def __init__(self, clock: Clock, ttl: float, *, keep_stale: bool = False, stale_retry: float = 30.0) -> None:
        self._clock = clock
        self._ttl = ttl
        self._keep_stale = keep_stale
        self._stale_retry = stale_retry
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, _V]] = {}

    def get_or_load(self, key: Hashable, load: Callable[[], _V]) -> _V:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > now:
                return entry[1]
        try:
            value = load()
        except CloudError as error:
            if not self._keep_stale or entry is None:
                raise
            log.warning("using the previous answer, the refresh failed: %s", error)
            with self._lock:
                self._entries[key] = (now + self._stale_retry, entry[1])
            return entry[1]
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
