"""What `api/v1/budgetcheck.py` says of a NodePool's disruption budgets: each rule of the `budgets` family fires on
the budgets that earn it, with a witness (a moment and the budget that decides), and stays quiet on the budgets
that do not — the usual, sound ones included (Karpenter's documented example, a maintenance freeze under a
10 % budget, the default)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.budgetcheck import (
    ASSUMED_NODES,
    NodeCount,
    budget_violations,
    pool_budgets,
    week,
)
from karpenter_policy.api.v1.budgets import UNBOUNDED
from karpenter_policy.api.violations import (
    BUDGET_BLOCKS_DRIFT,
    BUDGET_OVERLAP,
    BUDGET_REASON_UNBOUNDED,
    BUDGET_UNREADABLE,
    BUDGET_WINDOW_TOO_SHORT,
    Violation,
)

MONDAY = datetime(2026, 11, 30, tzinfo=UTC)
OFFICE_FREEZE = {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}


def nodepool(*budgets: dict[str, Any] | None, limits: int | None = None, **template: str) -> dict[str, Any]:
    """A NodePool with `budgets` (None alone: the field left out)."""
    disruption: dict[str, Any] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}
    if budgets != (None,):
        disruption["budgets"] = list(budgets)
    spec: dict[str, Any] = {"disruption": disruption, "template": {"spec": dict(template)}}
    if limits is not None:
        spec["limits"] = {"nodes": str(limits)}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "web"}, "spec": spec}


def found(data: dict[str, Any], nodes: int | None = None) -> list[Violation]:
    return budget_violations(pool_budgets(data, nodes), MONDAY)


def rules(data: dict[str, Any]) -> list[str]:
    return [violation.rule for violation in found(data)]


@pytest.mark.parametrize("data", [
    nodepool(None),  # the CRD's default: one budget of 10 %
    nodepool({"nodes": "10%"}),
    nodepool({"nodes": "10%"}, OFFICE_FREEZE),  # a freeze in office hours, 10 % otherwise
    # Karpenter's documented example (website/content/en/docs/concepts/disruption.md, v1.14.1)
    nodepool({"nodes": "20%", "reasons": ["Empty", "Drifted"]}, {"nodes": "5"},
             {"nodes": "0", "schedule": "@daily", "duration": "10m", "reasons": ["Underutilized"]}),
    nodepool({"nodes": "1"}, {"nodes": "0", "schedule": "0 0 1 * *", "duration": "720h"}),  # monthly, leaves the 31st
], ids=["default", "ten-percent", "office-freeze", "karpenter-docs", "monthly"])
def test_sound_budgets_have_no_finding(data: dict[str, Any]) -> None:
    assert found(data) == []


# budget-unreadable

@pytest.mark.parametrize(("schedule", "said"), [
    ("TZ=Europe/Paris 0 9 * * *", "without a TZ= prefix"),
    ("CRON_TZ=UTC 0 9 * * *", "expected exactly 5 fields, found 6"),
    ("0 2 * * 7", "end of range (7) above maximum (6)"),
    ("0 0 * * tue-mon", "beginning of range (2) beyond end of range (1)"),
    ("@dailyish", "unrecognized descriptor"),
])
def test_a_schedule_robfig_refuses_blocks_everything(schedule: str, said: str) -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "1", "schedule": schedule, "duration": "2h", "reasons": ["Drifted"]})
    (violation,) = found(data)
    assert violation.rule == BUDGET_UNREADABLE
    assert violation.path == ("spec", "disruption", "budgets", 1, "schedule")
    assert said in violation.message and "fails closed" in violation.message
    pool = pool_budgets(data)
    assert all(span.allowed == 0 for spans in week(pool, MONDAY).values() for span in spans)


def test_a_count_beyond_int32_is_what_karpenter_keeps() -> None:
    wrapped, blocked = found(nodepool({"nodes": "4294967296"}))
    assert wrapped.rule == BUDGET_UNREADABLE and "32-bit integer, 0" in wrapped.message
    assert blocked.rule == BUDGET_BLOCKS_DRIFT  # 0, always: drift too


def test_a_readable_schedule_is_not_unreadable() -> None:
    assert BUDGET_UNREADABLE not in rules(nodepool({"nodes": "1", "schedule": "0 2 * * 0", "duration": "2h"}))


# budget-blocks-drift

@pytest.mark.parametrize(("expire", "said"), [
    ("Never", "an unpatched fleet is certain"), ("720h", "only expiry replaces them (expireAfter: 720h"),
])
def test_drift_blocked_at_all_times(expire: str, said: str) -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "0", "reasons": ["Drifted"]}, expireAfter=expire)
    (violation,) = found(data)
    assert violation.rule == BUDGET_BLOCKS_DRIFT and violation.path == ("spec", "disruption", "budgets", 1)
    assert "at any time (every schedule repeats weekly)" in violation.message
    assert 'e.g. at Mon 2026-11-30 00:00 UTC, budgets[1] (nodes: "0", always) allows 0' in violation.message
    assert said in violation.message
    assert violation.related == (("spec", "template", "spec", "expireAfter"),)


def test_windows_that_cover_all_time_block_drift_too() -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "0", "schedule": "@daily", "duration": "24h", "reasons": ["Drifted"]})
    assert rules(data) == [BUDGET_BLOCKS_DRIFT]


def test_drift_allowed_for_a_minute_a_week_is_not_blocked() -> None:
    data = nodepool({"nodes": "10%"},
                    {"nodes": "0", "schedule": "1 0 * * mon", "duration": "167h59m", "reasons": ["Drifted"]})
    assert BUDGET_BLOCKS_DRIFT not in rules(data)


def test_a_yearly_schedule_is_looked_at_for_a_year() -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "0", "schedule": "0 0 1 1 *", "duration": "8784h",
                                       "reasons": ["Drifted"]})
    (violation,) = found(data)
    assert violation.rule == BUDGET_BLOCKS_DRIFT and "in the year from Mon 2026-11-30" in violation.message


# budget-window-too-short

def test_a_window_shorter_than_a_replacement() -> None:
    data = nodepool({"nodes": "1"}, {"nodes": "0", "schedule": "5 2 * * *", "duration": "23h55m"})
    (violation,) = found(data)
    assert violation.rule == BUDGET_WINDOW_TOO_SHORT and violation.path == ("spec", "disruption", "budgets", 1)
    assert "allowed only 5m at a time (e.g. Mon 2026-11-30 02:00 UTC to Mon 2026-11-30 02:05 UTC)" in (
        violation.message)
    assert "≈ 8m: launch ≈ 3m, drain ≈ 5m, estimated" in violation.message
    assert "at most 1 node starts per window" in violation.message


def test_the_termination_grace_period_bounds_the_drain() -> None:
    data = nodepool({"nodes": "1"}, {"nodes": "0", "schedule": "0 3 * * *", "duration": "23h30m"},
                    terminationGracePeriod="1h")
    (violation,) = found(data)
    assert violation.rule == BUDGET_WINDOW_TOO_SHORT
    assert "allowed only 30m at a time" in violation.message and "drain ≤ terminationGracePeriod 1h" in (
        violation.message)
    assert BUDGET_WINDOW_TOO_SHORT not in rules(
        nodepool({"nodes": "1"}, {"nodes": "0", "schedule": "0 3 * * *", "duration": "23h30m"}))


def test_a_window_as_long_as_a_replacement_is_enough() -> None:
    data = nodepool({"nodes": "1"}, {"nodes": "0", "schedule": "10 2 * * *", "duration": "23h50m"})
    assert found(data) == []


# budget-reason-unbounded

def test_a_reason_no_budget_names_is_unbounded_not_ten_percent() -> None:
    data = nodepool({"nodes": "1", "reasons": ["Drifted"]})
    (violation,) = found(data)
    assert violation.rule == BUDGET_REASON_UNBOUNDED and violation.path == ("spec", "disruption", "budgets")
    assert "no budget applies to Empty and Underutilized" in violation.message
    assert "the 10 % default applies only when budgets is left out" in violation.message
    spans = week(pool_budgets(data), MONDAY)
    assert [span.allowed for span in spans["Empty"]] == [UNBOUNDED]
    assert [span.allowed for span in spans["Drifted"]] == [1]


def test_outside_the_schedules_nothing_limits() -> None:
    (violation,) = found(nodepool(OFFICE_FREEZE))
    assert violation.rule == BUDGET_REASON_UNBOUNDED
    assert violation.message.startswith(
        "at Mon 2026-11-30 00:00 UTC no budget for Empty, Underutilized and Drifted is active")


def test_an_empty_list_limits_nothing() -> None:
    (violation,) = found(nodepool())
    assert violation.rule == BUDGET_REASON_UNBOUNDED and "an empty list of budgets" in violation.message


def test_every_reason_limited_all_the_time_is_not_unbounded() -> None:
    data = nodepool({"nodes": "2", "reasons": ["Drifted"]}, {"nodes": "10%", "reasons": ["Empty", "Underutilized"]})
    assert found(data) == []


# budget-overlap

def test_a_budget_meant_to_open_a_window_never_decides() -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "100%", "schedule": "0 22 * * *", "duration": "4h"}, limits=20)
    (violation,) = found(data)
    assert violation.rule == BUDGET_OVERLAP and violation.path == ("spec", "disruption", "budgets", 2 - 1)
    assert violation.related == (("spec", "disruption", "budgets", 0),)
    assert 'budgets[0] (nodes: "10%", always) allows 2 where this one allows 20, of 20 nodes (spec.limits.nodes)' in (
        violation.message)
    assert "e.g. at Sun 2026-11-29 22:00 UTC" not in violation.message  # the witness is within the range
    assert "e.g. at Mon 2026-11-30 00:00 UTC" in violation.message


def test_a_budget_that_decides_some_of_the_time_is_no_overlap() -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "1", "schedule": "0 22 * * *", "duration": "4h"}, limits=20)
    assert found(data) == []


def test_overlap_depends_on_the_node_count() -> None:
    data = nodepool({"nodes": "10%"}, {"nodes": "3", "schedule": "0 22 * * *", "duration": "4h"})
    assert BUDGET_OVERLAP in [v.rule for v in found(data, nodes=10)]  # 10 % of 10 is 1 < 3
    assert found(data, nodes=50) == []  # 10 % of 50 is 5 > 3


# the node count

@pytest.mark.parametrize(("limits", "given", "expected"), [
    (20, None, NodeCount(20, "spec.limits.nodes")), (20, 7, NodeCount(20, "spec.limits.nodes")),
    (None, 7, NodeCount(7, "--nodes")), (None, None, NodeCount(ASSUMED_NODES, "assumed; --nodes N to change")),
])
def test_the_node_count_and_whence(limits: int | None, given: int | None, expected: NodeCount) -> None:
    assert pool_budgets(nodepool({"nodes": "10%"}, limits=limits), given).count == expected


def test_the_week_is_karpenter_s_allowance_per_reason() -> None:
    data = nodepool({"nodes": "10%"}, OFFICE_FREEZE | {"reasons": ["Drifted"]}, limits=30)
    spans = week(pool_budgets(data), MONDAY)
    assert [span.allowed for span in spans["Empty"]] == [3]
    drifted = spans["Drifted"]
    assert (drifted[0].allowed, drifted[0].end) == (3, MONDAY + timedelta(hours=9))
    assert (drifted[1].allowed, drifted[1].deciding, drifted[1].length) == (0, (1,), timedelta(hours=8))
    assert len(drifted) == 11


# the reasons Karpenter never uses for a NodePool (pkg/controllers/disruption/consolidation.go, emptiness.go)

def test_a_reason_consolidation_never_uses_needs_no_budget() -> None:
    when_empty = nodepool({"nodes": "1", "reasons": ["Drifted"]}, {"nodes": "10%", "reasons": ["Empty"]})
    when_empty["spec"]["disruption"]["consolidationPolicy"] = "WhenEmpty"
    assert found(when_empty) == []
    never = nodepool({"nodes": "1", "reasons": ["Drifted"]})
    never["spec"]["disruption"]["consolidateAfter"] = "Never"
    assert found(never) == []
    assert pool_budgets(never).unused == dict.fromkeys(("Empty", "Underutilized"), "consolidateAfter: Never")
    assert rules(nodepool({"nodes": "1", "reasons": ["Drifted"]})) == [BUDGET_REASON_UNBOUNDED]


def test_a_wrapped_count_is_reported_beside_the_other_findings() -> None:
    data = nodepool({"nodes": "4294967297", "reasons": ["Drifted"]})
    assert [(v.rule, v.path[-1]) for v in found(data)] == [
        (BUDGET_UNREADABLE, "nodes"), (BUDGET_REASON_UNBOUNDED, "budgets")]
    assert "32-bit integer, 1: while this budget is active it allows 1" in found(data)[0].message


# whatever crosses the boundary: never an exception

_texts = st.one_of(st.text(max_size=12), st.sampled_from(
    ["* * * * *", "@daily", "@every 90s", "0 0 31 2 *", "TZ=UTC 0 0 * * *", "1h", "0m", "-1h", "99999h", "10%",
     "100%", "0", "4294967297", "1e3", "Never"]))
_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _texts, st.lists(_texts, max_size=3),
                    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@deterministic(150)
@given(entries=st.one_of(_values, st.lists(st.dictionaries(
    st.sampled_from(["nodes", "schedule", "duration", "reasons"]), _values, max_size=4), max_size=4)),
    disruption=st.dictionaries(st.sampled_from(["consolidateAfter", "consolidationPolicy"]), _values, max_size=2),
    limits=_values)
def test_any_shape_of_budgets_is_answered_without_an_exception(entries: Any, disruption: dict[str, Any],
                                                                limits: Any) -> None:
    data = {"spec": {"disruption": {**disruption, "budgets": entries}, "limits": {"nodes": limits}}}
    for violation in found(data):
        assert isinstance(violation, Violation) and violation.message
    assert set(week(pool_budgets(data), MONDAY)) == {"Empty", "Underutilized", "Drifted"}


def test_a_static_nodepool_counts_its_replicas_and_is_only_drifted() -> None:
    static = nodepool({"nodes": "1", "reasons": ["Drifted"]}, limits=50)
    static["spec"]["replicas"] = 6
    pool = pool_budgets(static, 3)
    assert pool.count == NodeCount(6, "spec.replicas")
    assert set(pool.unused) == {"Empty", "Underutilized"}
    assert found(static) == []  # drift.go, staticdrift.go: only Drifted disrupts a static NodePool
