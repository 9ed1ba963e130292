"""A pod's `karpenter.sh/do-not-disrupt` as Karpenter v1.14.1 reads it (`api.v1.donotdisrupt`): the Go tests of
`IsDoNotDisruptActive`, kubernetes-sigs/karpenter v1.14.1 pkg/utils/pod/suite_test.go (Describe
"IsDoNotDisruptActive", lines 50–175), each named with its line, and the rule as a property. Each Go test that
checks an Event checks here what the Event carries: the `InvalidDoNotDisruptAnnotation` Warning's text
(`invalid_message`), the end a `DoNotDisruptUntil` names (`until`, `until_message`) and the `elapsed` that makes a
`DoNotDisruptGracePeriodElapsed` (published by the controller: tests/reconcile/test_v1_pod_do_not_disrupt.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.donotdisrupt import (
    DoNotDisrupt,
    do_not_disrupt,
    invalid_message,
    start_time,
    until_message,
)
from karpenter_policy.model.labels import DO_NOT_DISRUPT

NOW = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
TEN_MINUTES_AGO = "2026-11-30T09:50:00Z"


def _read(value: str | None, started: str | None = TEN_MINUTES_AGO) -> DoNotDisrupt:
    annotations = {} if value is None else {DO_NOT_DISRUPT: value}
    return do_not_disrupt(annotations, started, NOW)


def test_should_return_false_when_no_annotation_exists() -> None:
    """should return false when no annotation exists — suite_test.go:51."""
    assert not _read(None).active


def test_should_return_true_for_true_annotation() -> None:
    """should return true for 'true' annotation — suite_test.go:60."""
    held = _read("true")
    assert held.active and held.until is None and not held.invalid


def test_should_return_false_and_emit_event_for_invalid_duration_format() -> None:
    """should return false and emit event for invalid duration format — suite_test.go:72."""
    held = _read("invalid-format")
    assert not held.active
    assert invalid_message(held.invalid) == (
        'Invalid karpenter.sh/do-not-disrupt annotation: failed to parse "invalid-format" as a duration: '
        'time: invalid duration "invalid-format", ignoring annotation'
    )


def test_should_return_false_and_emit_event_for_zero_duration() -> None:
    """should return false and emit event for zero duration — suite_test.go:87."""
    held = _read("0s")
    assert not held.active
    assert invalid_message(held.invalid) == (
        'Invalid karpenter.sh/do-not-disrupt annotation: duration "0s" must be positive, ignoring annotation'
    )


def test_should_return_false_and_emit_event_for_negative_duration() -> None:
    """should return false and emit event for negative duration — suite_test.go:102."""
    held = _read("-5m")
    assert not held.active
    assert invalid_message(held.invalid) == (
        'Invalid karpenter.sh/do-not-disrupt annotation: duration "-5m" must be positive, ignoring annotation'
    )


def test_should_return_true_when_duration_has_not_expired() -> None:
    """should return true and emit disruptable-at event when duration has not expired — suite_test.go:117: held
    until the start plus the duration (the Event's time; here what the controller wakes up for)."""
    held = _read("15m")
    assert held.active and held.until == dt.datetime(2026, 11, 30, 10, 5, tzinfo=dt.UTC)


def test_should_return_false_when_duration_has_expired() -> None:
    """should return false and emit grace period elapsed event when duration has expired — suite_test.go:133."""
    held = _read("5m")
    assert not held.active and held.until is None and not held.invalid


def test_should_fail_safe_when_start_time_is_nil() -> None:
    """should fail safe when start time is nil — suite_test.go:150."""
    held = _read("5m", started=None)
    assert held.active and held.until is None


def test_should_not_emit_disruptable_at_event_for_indefinite_protection() -> None:
    """should not emit disruptable-at event for indefinite protection — suite_test.go:162: "true" has no end."""
    assert _read("true").until is None


def test_a_value_other_than_true_is_not_true() -> None:
    """Karpenter compares the string: "True" and "false" are not "true"; neither is a duration, so both are ignored
    as invalid (the Warning), not read as a boolean."""
    for value in ("True", "false", "yes", ""):
        held = _read(value)
        assert not held.active and held.invalid


def test_start_time_reads_the_status() -> None:
    """`status.startTime` when a string; None otherwise (no status, a pending pod)."""
    assert start_time({"status": {"startTime": TEN_MINUTES_AGO}}) == TEN_MINUTES_AGO
    assert start_time({"status": {}}) is None and start_time({}) is None and start_time({"status": 3}) is None


@given(duration=st.integers(min_value=1, max_value=10**7), age=st.integers(min_value=0, max_value=10**7))
@deterministic(200)
def test_a_duration_holds_while_the_pods_age_is_under_it(duration: int, age: int) -> None:
    """For any positive duration (seconds) and any age: held exactly while age < duration, until start + duration."""
    started = NOW - dt.timedelta(seconds=age)
    held = do_not_disrupt({DO_NOT_DISRUPT: f"{duration}s"}, started.strftime("%Y-%m-%dT%H:%M:%SZ"), NOW)
    assert held.active == (age < duration)
    assert held.until == (started + dt.timedelta(seconds=duration) if age < duration else None)


@pytest.mark.parametrize("value", ["5m", "2562047h", "9223372036854775807ns"])
def test_a_start_time_whose_end_no_date_can_hold_keeps_the_pod_held(value: str) -> None:
    """A `status.startTime` in year 9999 (a clock that disagrees) plus the duration is past any date: the pod is held,
    as Go's negative age is under any duration — never an OverflowError out of the disruption pass."""
    now = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    held = do_not_disrupt({DO_NOT_DISRUPT: value}, "9999-12-31T23:59:59Z", now)
    assert held.active and held.until is None and not held.invalid


def test_a_durations_events_carry_its_end_in_go_rfc3339_and_whether_it_elapsed() -> None:
    """pkg/utils/pod/events.go `DoNotDisruptUntilEvent` formats the end with `time.RFC3339` (whole seconds, `Z` for a
    time read from the API): "90s" and "1.5s" from a start ten minutes ago; "1h" still holds, "5m" has elapsed;
    "true", absent or invalid values have elapsed nothing."""
    held = _read("1h")
    assert held.active and held.until is not None and not held.elapsed
    assert until_message(held.until) == (
        "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-11-30T10:50:00Z")
    late = do_not_disrupt({DO_NOT_DISRUPT: "1.5s"}, "2026-11-30T09:59:59Z", NOW)
    assert late.active and late.until is not None
    assert until_message(late.until).endswith("at 2026-11-30T10:00:00Z")  # 10:00:00.5 written without its fraction
    assert _read("5m") == DoNotDisrupt(False, elapsed=True)
    assert not any(_read(value).elapsed for value in ("true", None, "0s", "soon"))
