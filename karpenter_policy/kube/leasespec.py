"""What a coordination.k8s.io/v1 Lease says, read defensively: anyone with write access to the Lease can put
anything in it, and leader election must neither crash on it nor take it for a free lease.

:func:`read_lease` turns the API's object into a :class:`LeaseRecord` (holder, duration, transitions, version),
or a :class:`MalformedLease` naming the first field that cannot be trusted, in a few fixed words
(:data:`REASONS`, for a metric's label and for logging each problem once). The rules are the API server's
validation of a Lease (``leaseDurationSeconds`` and ``leaseTransitions`` are int32, the first positive, the second
not negative; ``holderIdentity`` a string) plus what a reader needs (``spec`` an object, a resourceVersion).
A missing or null ``spec`` is an empty one (a lease nobody holds); a holder without a duration is malformed (a
replica of ours always writes one, and reading it as 0 — free at once — would let anyone take it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

INT32_MAX = 2**31 - 1

Reason = Literal["metadata", "spec", "holder", "duration", "transitions"]
REASONS: tuple[Reason, ...] = ("metadata", "spec", "holder", "duration", "transitions")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A well-formed Lease: `holder` ("" when nobody holds it), `duration` in seconds (None when nobody holds it
    and none is given), `transitions`, and the resourceVersion it was read at."""

    holder: str
    duration: int | None
    transitions: int
    version: str


@dataclass(frozen=True, slots=True)
class MalformedLease:
    """A Lease that cannot be trusted: `reason` (one of :data:`REASONS`), what was found, and its version ("" if
    that too is unreadable)."""

    reason: Reason
    detail: str
    version: str


def _int32(value: Any, minimum: int) -> int | None:
    """`value` as an int32 no smaller than `minimum`, else None (bools, floats, strings and huge numbers too)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if minimum <= value <= INT32_MAX else None


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int of more than 4,300 digits, nesting deeper than Python's stack
        text = "a value too large to show"
    return text if len(text) <= 60 else f"{text[:57]}..."


def read_lease(lease: Any) -> LeaseRecord | MalformedLease:
    """See the module docstring."""
    metadata = lease.get("metadata") if isinstance(lease, dict) else None
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    if not isinstance(version, str) or not version:
        return MalformedLease("metadata", f"resourceVersion {_shown(version)}", "")
    spec = lease.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        return MalformedLease("spec", f"spec {_shown(spec)}", version)
    holder = spec.get("holderIdentity")
    if holder is None:
        holder = ""
    if not isinstance(holder, str):
        return MalformedLease("holder", f"holderIdentity {_shown(holder)}", version)
    raw_duration = spec.get("leaseDurationSeconds")
    duration = _int32(raw_duration, 1)
    if duration is None and (raw_duration is not None or holder):
        return MalformedLease("duration", f"leaseDurationSeconds {_shown(raw_duration)}", version)
    raw_transitions = spec.get("leaseTransitions")
    transitions = 0 if raw_transitions is None else _int32(raw_transitions, 0)
    if transitions is None:
        return MalformedLease("transitions", f"leaseTransitions {_shown(raw_transitions)}", version)
    return LeaseRecord(holder, duration, transitions, version)


__all__ = ["INT32_MAX", "REASONS", "LeaseRecord", "MalformedLease", "Reason", "read_lease"]
