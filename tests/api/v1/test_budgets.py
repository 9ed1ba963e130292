"""Karpenter v1's budget arithmetic (`api/v1/budgets.py`, `cron.py`): Karpenter's own budget tests ported as data
(tests/data/karpenter-v1-budgets/, each case naming its Go line), robfig cron's dialect, and properties — the
allowance is the minimum over the active budgets naming the reason, a percentage rounds up, and the windows agree
with `IsActive` at every instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.budgets import (
    DRIFTED,
    EMPTY,
    REASONS,
    UNBOUNDED,
    UNDERUTILIZED,
    Budget,
    BudgetError,
    active_windows,
    allowance,
    allowed_disruptions,
    budgets_of,
    scaled_nodes,
)
from karpenter_policy.api.v1.budgettimeline import WEEK, YEAR, Span, horizon, spans
from karpenter_policy.api.v1.cron import CronError, parse_schedule
from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration

DATA = Path(__file__).parent.parent.parent / "data" / "karpenter-v1-budgets" / "nodepool_budgets_test.yaml"
SUITE: dict[str, Any] = yaml.safe_load(DATA.read_text())


def _budget(fields: dict[str, Any]) -> Budget:
    return Budget(nodes=fields.get("nodes", "10%"), schedule=fields.get("schedule"),
                  duration=fields.get("duration"),
                  reasons=tuple(fields["reasons"]) if fields.get("reasons") is not None else None)


def _budgets(case: dict[str, Any]) -> list[Budget]:
    written = [dict(entry) for entry in SUITE["base"]]
    for index, fields in (case.get("set") or {}).items():
        written[int(index)].update(fields)
    for entry in written:
        entry.update(case.get("set_all") or {})
    written += case.get("append") or []
    return [_budget(entry) for entry in written[: case.get("only", len(written))]]


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize("case", SUITE["cases"], ids=lambda case: f"{SUITE['go_file']}:{case['line']}")
def test_karpenter_budget_case(case: dict[str, Any]) -> None:
    budgets = _budgets(case)
    now = _at(case.get("now", SUITE["now"]))
    total = SUITE["total_nodes"]
    if "allowed" in case:
        for reason, expected in case["allowed"].items():
            answer = allowance(budgets, reason, now, total)
            assert answer.errors == ()
            assert answer.nodes == expected, reason
        return
    budget = budgets[case["budget"]]
    if "active" in case:
        assert budget.is_active(now) is case["active"]
    if "error" in case:
        with pytest.raises(BudgetError) as raised:
            budget.allowed(now, total)
        if isinstance(case["error"], str):
            assert case["error"] in str(raised.value)
        # GetAllowedDisruptions returns 0 with its error; the NodePool's allowance is then 0 for every reason.
        for reason in REASONS:
            assert allowed_disruptions([budget], reason, now, total) == case.get("value", 0)
    elif "value" in case:
        assert budget.allowed(now, total) == case["value"]


# robfig cron v3.0.1's dialect as Karpenter parses it ("TZ=UTC " + schedule).

@pytest.mark.parametrize(("schedule", "moment", "expected"), [
    ("@daily", "2026-03-04T10:00:00Z", "2026-03-05T00:00:00Z"),
    ("@midnight", "2026-03-04T00:00:00Z", "2026-03-05T00:00:00Z"),  # strictly after
    ("@hourly", "2026-03-04T10:00:00.5Z", "2026-03-04T11:00:00Z"),
    ("@weekly", "2026-03-04T10:00:00Z", "2026-03-08T00:00:00Z"),  # Sunday
    ("@monthly", "2026-03-04T10:00:00Z", "2026-04-01T00:00:00Z"),
    ("@annually", "2026-03-04T10:00:00Z", "2027-01-01T00:00:00Z"),
    ("0 9 * * mon-fri", "2026-03-06T09:00:00Z", "2026-03-09T09:00:00Z"),  # Friday → Monday
    ("*/20 1 * * *", "2026-03-04T01:41:00Z", "2026-03-05T01:00:00Z"),
    ("5/20 1 * * *", "2026-03-04T01:06:00Z", "2026-03-04T01:25:00Z"),  # N/step runs to the maximum
    ("0 0 1-31 * MON", "2026-03-04T10:00:00Z", "2026-03-05T00:00:00Z"),  # both restricted: either matches
    ("0 0 13 * FRI", "2026-03-04T10:00:00Z", "2026-03-06T00:00:00Z"),
    ("0 0 */1 * FRI", "2026-03-04T10:00:00Z", "2026-03-06T00:00:00Z"),  # */1 keeps the star: both must match
    ("0 0 29 2 *", "2026-03-04T10:00:00Z", "2028-02-29T00:00:00Z"),
    ("0 0 31 2 *", "2026-03-04T10:00:00Z", None),  # never: robfig's zero time
    ("  0 0 * * 0  ", "2026-03-04T10:00:00Z", "2026-03-08T00:00:00Z"),  # trimmed, as after the TZ= prefix
])
def test_next_activation_is_robfig_next(schedule: str, moment: str, expected: str | None) -> None:
    hit = parse_schedule(schedule).next_after(_at(moment))
    assert hit == (None if expected is None else _at(expected))


@pytest.mark.parametrize(("schedule", "message"), [
    ("TZ=Europe/Paris 0 9 * * *", "expected exactly 5 fields, found 6"),  # after Karpenter's own TZ=UTC
    ("CRON_TZ=UTC 0 9 * * *", "expected exactly 5 fields, found 6"),
    ("0 9 * * 7", "end of range (7) above maximum (6)"),  # 7 is not Sunday in robfig
    ("0 24 * * *", "end of range (24) above maximum (23)"),
    ("0 0 0 * *", "beginning of range (0) below minimum (1)"),
    ("*/0 * * * *", "step of range should be a positive number"),
    ("1-2-3 * * * *", "too many hyphens"),
    ("1/2/3 * * * *", "too many slashes"),
    ("x * * * *", "failed to parse int from x"),
    ("@every", "unrecognized descriptor: @every"),
    ("@Daily", "unrecognized descriptor: @Daily"),
    ("", "expected exactly 5 fields, found 0"),
    ("0 0 * * * *", "expected exactly 5 fields, found 6"),
])
def test_schedules_robfig_refuses(schedule: str, message: str) -> None:
    with pytest.raises(CronError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_schedule(schedule)


def test_a_schedule_that_never_fires_is_always_active() -> None:
    budget = Budget(nodes="0", schedule="0 0 31 2 *", duration="1h")
    moment = _at("2026-07-01T12:00:00Z")
    assert budget.is_active(moment)
    assert active_windows(budget, moment, moment + timedelta(days=7)) == [(moment, moment + timedelta(days=7))]


def test_every_descriptor_is_active_iff_its_delay_fits_the_duration() -> None:
    moment = _at("2026-07-01T12:00:00Z")
    assert Budget(nodes="0", schedule="@every 30m", duration="1h").is_active(moment)
    assert not Budget(nodes="0", schedule="@every 2h", duration="1h").is_active(moment)


# Go's time.ParseDuration and intstr's rounding.

@pytest.mark.parametrize(("text", "expected"), [
    ("1h", timedelta(hours=1)), ("1h30m0s", timedelta(hours=1, minutes=30)), ("90m", timedelta(minutes=90)),
    ("0", timedelta(0)), ("0m", timedelta(0)), ("1.5h", timedelta(minutes=90)), ("-2m", timedelta(minutes=-2)),
])
def test_go_durations(text: str, expected: timedelta) -> None:
    assert parse_go_duration(text) == expected


@pytest.mark.parametrize("text", ["", "h", "1", "1x", "1hm", ".h", "9999999999999h"])
def test_go_refuses_durations(text: str) -> None:
    with pytest.raises(GoDurationError):
        parse_go_duration(text)


@pytest.mark.parametrize(("nodes", "total", "expected"), [
    ("10%", 5, 1), ("10%", 0, 0), ("10%", 10, 1), ("10%", 11, 2), ("5%", 10, 1), ("0%", 100, 0),
    ("100%", 7, 7), ("3", 1, 3), ("010", 0, 10), ("4294967296", 9, 0), ("2147483648", 9, -2147483648),
])
def test_nodes_scale_as_intstr_rounding_up(nodes: str, total: int, expected: int) -> None:
    assert scaled_nodes(nodes, total) == expected


@pytest.mark.parametrize("nodes", ["1000a%", "a", "", "99999999999999999999"])
def test_unreadable_nodes_fail_closed_for_every_reason(nodes: str) -> None:
    moment = _at("2026-07-01T12:00:00Z")
    budgets = [Budget(nodes="5"), Budget(nodes=nodes, reasons=(DRIFTED,))]
    for reason in REASONS:
        answer = allowance(budgets, reason, moment, 100)
        assert answer.errors and answer.enforced == 0


def test_budgets_as_the_api_server_stores_them() -> None:
    assert budgets_of(None) == (Budget(nodes="10%"),)
    assert budgets_of({"consolidateAfter": "0s"}) == (Budget(nodes="10%"),)
    assert budgets_of({"budgets": []}) == ()
    moment = _at("2026-07-01T12:00:00Z")
    assert allowed_disruptions(budgets_of({"budgets": []}), EMPTY, moment, 10) == UNBOUNDED
    only_none = budgets_of({"budgets": [{"nodes": "0", "reasons": []}]})
    assert allowed_disruptions(only_none, EMPTY, moment, 10) == UNBOUNDED  # applies to no reason
    written = budgets_of({"budgets": [{"nodes": "1", "reasons": ["Drifted"], "schedule": "@daily",
                                       "duration": "1h"}, {}]})
    assert written == (Budget("1", "@daily", "1h", (DRIFTED,)), Budget("10%"))


# Properties.

_FIELD_VALUES = {
    "minute": st.sampled_from(["*", "0", "30", "*/15", "0-10", "5,35", "10/20"]),
    "hour": st.sampled_from(["*", "0", "9", "22", "*/6", "8-17", "1,13"]),
    "dom": st.sampled_from(["*", "1", "15", "1-7", "*/10", "?"]),
    "month": st.sampled_from(["*", "1", "jan-jun", "*/2", "7"]),
    "dow": st.sampled_from(["*", "0", "MON-FRI", "sat,sun", "3", "?"]),
}
schedules = st.one_of(
    st.sampled_from(["@hourly", "@daily", "@weekly", "@monthly", "@yearly"]),
    st.tuples(*_FIELD_VALUES.values()).map(" ".join),
)
durations = st.sampled_from(["0m", "1m", "30m", "1h", "90m", "6h", "24h", "48h", "200h"])
budget_lists = st.lists(st.builds(
    Budget,
    nodes=st.one_of(st.integers(0, 30).map(str), st.integers(0, 100).map(lambda p: f"{p}%")),
    schedule=schedules, duration=durations,
    reasons=st.one_of(st.none(), st.lists(st.sampled_from(REASONS), unique=True).map(tuple)),
), max_size=5)
moments = st.datetimes(datetime(2025, 1, 1), datetime(2027, 12, 31), timezones=st.just(UTC))


@deterministic(200)
@given(budgets=budget_lists, moment=moments, total=st.integers(0, 500), reason=st.sampled_from(REASONS))
def test_allowance_is_the_minimum_over_active_budgets(budgets: list[Budget], moment: datetime, total: int,
                                                      reason: str) -> None:
    allowed = allowed_disruptions(budgets, reason, moment, total)
    active = [budget for budget in budgets if budget.applies_to(reason) and budget.is_active(moment)]
    assert allowed == min((scaled_nodes(budget.nodes, total) for budget in active), default=UNBOUNDED)
    for budget in active:  # a percentage never allows fewer than its exact share (it rounds up), nor a node more
        if budget.nodes.endswith("%"):
            share = int(budget.nodes[:-1]) * total / 100
            assert share <= scaled_nodes(budget.nodes, total) < share + 1


@deterministic(150)
@given(schedule=schedules, duration=durations, moment=moments, offsets=st.lists(st.integers(0, 7 * 24 * 60),
                                                                                min_size=1, max_size=8))
def test_windows_agree_with_is_active(schedule: str, duration: str, moment: datetime, offsets: list[int]) -> None:
    budget = Budget(nodes="1", schedule=schedule, duration=duration)
    start = moment.replace(second=0, microsecond=0)
    windows = active_windows(budget, start, start + timedelta(days=7))
    for offset in offsets:
        at = start + timedelta(minutes=offset, seconds=offset % 60)
        if at >= start + timedelta(days=7):
            continue
        assert budget.is_active(at) == any(opens <= at < closes for opens, closes in windows), at


def test_reasons_each_read_their_own_budgets() -> None:
    budgets = [Budget(nodes="0", reasons=(DRIFTED,)), Budget(nodes="20%", reasons=(UNDERUTILIZED, EMPTY))]
    moment = _at("2026-07-01T12:00:00Z")
    assert [allowed_disruptions(budgets, reason, moment, 12) for reason in REASONS] == [3, 3, 0]


@deterministic(120)
@given(budgets=budget_lists, moment=moments, total=st.integers(0, 200), reason=st.sampled_from(REASONS),
       offsets=st.lists(st.integers(0, 7 * 24 * 3600 - 1), min_size=1, max_size=6))
def test_timeline_spans_agree_with_karpenter_at_every_instant(budgets: list[Budget], moment: datetime, total: int,
                                                               reason: str, offsets: list[int]) -> None:
    start = moment.replace(second=0, microsecond=0)
    timeline = spans(budgets, reason, start, start + WEEK, total)
    assert timeline[0].start == start and timeline[-1].end == start + WEEK
    assert all(left.end == right.start for left, right in zip(timeline, timeline[1:], strict=False))
    for offset in offsets:
        at = start + timedelta(seconds=offset)
        (span,) = [span for span in timeline if span.start <= at < span.end]
        assert span.allowed == allowed_disruptions(budgets, reason, at, total), at
        assert all(budgets[index].is_active(at) and budgets[index].applies_to(reason) for index in span.deciding)


def test_an_unreadable_schedule_blocks_every_reason_all_the_time() -> None:
    budgets = [Budget(nodes="5"), Budget(nodes="1", schedule="TZ=Europe/Paris 0 2 * * *", duration="2h",
                                         reasons=(DRIFTED,))]
    start = _at("2026-11-30T00:00:00Z")
    for reason in REASONS:
        assert spans(budgets, reason, start, start + WEEK, 10) == [
            Span(start, start + WEEK, 0, (), (1,))]


def test_horizon_is_a_week_unless_a_schedule_names_days_of_the_month_or_months() -> None:
    assert horizon([Budget(), Budget("0", "0 9 * * mon-fri", "8h")]) == WEEK
    assert horizon([Budget("0", "@monthly", "8h")]) == YEAR
    assert horizon([Budget("0", "0 0 * 12 *", "24h")]) == YEAR
