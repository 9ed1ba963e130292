"""A pod's `karpenter.sh/do-not-disrupt` as Karpenter v1.14.1 reads it (`pkg/utils/pod/scheduling.go`
`IsDoNotDisruptActive`, `parseDoNotDisrupt`): "true" holds the pod for ever; a positive Go duration ("5m", "1h")
holds it while its age from `status.startTime` is under the duration (no startTime: held, failing safe); any other
value — not a duration, zero or negative — is ignored, with the `InvalidDoNotDisruptAnnotation` Warning's text
(`pkg/utils/pod/events.go`); a duration's reading carries the texts of the Normal `DoNotDisruptUntil` (while it holds)
and `DoNotDisruptGracePeriodElapsed` (once it ran out) Events. Karpenter v0.31 (Provisioners) reads only "true";
that reading is not here. Pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.v1.goduration import GoDurationError, go_duration_nanoseconds
from karpenter_policy.model.labels import DO_NOT_DISRUPT

__all__ = [
    "ELAPSED_MESSAGE", "DoNotDisrupt", "do_not_disrupt", "go_rfc3339", "invalid_message", "start_time", "until_message",
]


@dataclass(frozen=True, slots=True)
class DoNotDisrupt:
    """What the annotation says now: `active` (the pod is held), `until` (a duration's end while it holds, None
    otherwise), `invalid` (Go's error for a value Karpenter ignores, "" otherwise) and `elapsed` (a duration that has
    run out since the pod's startTime: what v1.14.1's `DoNotDisruptGracePeriodElapsed` Event says)."""

    active: bool
    until: dt.datetime | None = None
    invalid: str = ""
    elapsed: bool = False


_ABSENT = DoNotDisrupt(False)
_FOR_EVER = DoNotDisrupt(True)
_ELAPSED = DoNotDisrupt(False, elapsed=True)


def _parse(value: str) -> int:
    """`parseDoNotDisrupt`: the duration in nanoseconds; GoDurationError with Go's wrapped text."""
    try:
        nanoseconds = go_duration_nanoseconds(value)
    except GoDurationError as error:
        raise GoDurationError(f'failed to parse "{value}" as a duration: {error}') from None
    if nanoseconds <= 0:
        raise GoDurationError(f'duration "{value}" must be positive')
    return nanoseconds


def do_not_disrupt(annotations: Mapping[str, str], start_time: str | None, now: dt.datetime) -> DoNotDisrupt:
    """`IsDoNotDisruptActive` for a pod with these annotations and `status.startTime` (RFC 3339), at `now`."""
    value = annotations.get(DO_NOT_DISRUPT)
    if value is None:
        return _ABSENT
    if value == "true":
        return _FOR_EVER
    try:
        nanoseconds = _parse(value)
    except GoDurationError as error:
        return DoNotDisrupt(False, invalid=str(error))
    if not start_time:
        return _FOR_EVER
    try:
        started = dt.datetime.fromisoformat(start_time.replace("Z", "+00:00"))
    except ValueError:
        return _FOR_EVER  # a startTime the API server would not have written: no start known, fail safe
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.UTC)
    try:
        until = started + dt.timedelta(microseconds=nanoseconds // 1_000)
    except OverflowError:  # a startTime near year 9999 (a clock that disagrees): the end is past any date held here
        return _FOR_EVER
    return DoNotDisrupt(True, until) if now < until else _ELAPSED


def start_time(pod: Mapping[str, Any]) -> str | None:
    """A pod's `status.startTime` (None: not set, or not a string)."""
    status = pod.get("status")
    value = status.get("startTime") if isinstance(status, Mapping) else None
    return value if isinstance(value, str) else None


def invalid_message(error: str) -> str:
    """The `InvalidDoNotDisruptAnnotation` Warning's message for Go's error text."""
    return f"Invalid karpenter.sh/do-not-disrupt annotation: {error}, ignoring annotation"


def go_rfc3339(moment: dt.datetime) -> str:
    """`moment` as Go's `Format(time.RFC3339)` writes a time read from the API (UTC): whole seconds, `Z`."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def until_message(until: dt.datetime) -> str:
    """The `DoNotDisruptUntil` Event's message (pkg/utils/pod/events.go `DoNotDisruptUntilEvent`)."""
    return f"The karpenter.sh/do-not-disrupt grace period will elapse at {go_rfc3339(until)}"


#: The `DoNotDisruptGracePeriodElapsed` Event's message (pkg/utils/pod/events.go).
ELAPSED_MESSAGE = "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"
