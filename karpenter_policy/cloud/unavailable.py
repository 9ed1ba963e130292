"""Offerings that recently failed for lack of capacity: marked for a while, then tried again.

Karpenter's unavailable-offerings cache: an (instance type, zone, capacity type) marked after an
insufficient-capacity error or a spot interruption is skipped for a TTL (3 minutes), so the next launch goes
elsewhere instead of failing the same way. Thread-safe; time comes from an injectable clock.
"""

from __future__ import annotations

import threading

from karpenter_policy.cloud.provider import UNAVAILABLE_OFFERING_TTL, Clock

OfferingKey = tuple[str, str, str]  # (instance type, zone, capacity type)


class UnavailableOfferings:
    """A TTL set of offerings (instance type, zone, capacity type), each with the reason it was marked."""

    def __init__(self, clock: Clock, ttl: float = UNAVAILABLE_OFFERING_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._lock = threading.Lock()
        self._until: dict[OfferingKey, tuple[float, str]] = {}

    def mark(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        """Unavailable from now for the TTL (a second mark extends it)."""
        with self._lock:
            self._until[(instance_type, zone, capacity_type)] = (self._clock() + self._ttl, reason)

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (instance_type, zone, capacity_type) in self.active()

    def reason(self, instance_type: str, zone: str, capacity_type: str) -> str | None:
        """Why the offering is unavailable, or None when it is available."""
        return self.active().get((instance_type, zone, capacity_type))

    def active(self) -> dict[OfferingKey, str]:
        """The offerings unavailable now, with their reasons (expired marks are dropped)."""
        now = self._clock()
        with self._lock:
            for key in [key for key, (until, _) in self._until.items() if until <= now]:
                del self._until[key]
            return {key: reason for key, (_, reason) in self._until.items()}


__all__ = ["OfferingKey", "UnavailableOfferings"]
