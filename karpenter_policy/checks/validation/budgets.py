"""Disruption budgets of the Karpenter v1 NodePools in `check` (docs/budgets.md): each valid NodePool's budgets
reasoned about by `api.v1.budgetcheck` — findings of the `budgets` rules at the budget's file:line, each with a
witness — and its allowance per reason over one week, the timeline `check --output markdown` shows (and
`--output json`, as `budgets`).

The week is the one holding `BudgetView.week_of` (today when None), from its Monday 00:00 in the view's time zone;
the findings look from the same moment. The node count is the NodePool's `spec.limits.nodes` when it has one, else
`--nodes`, else assumed (`budgetcheck.ASSUMED_NODES`): the timeline says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from karpenter_policy.api.v1.budgetcheck import PoolBudgets, budget_violations, pool_budgets, week
from karpenter_policy.api.v1.budgets import UNBOUNDED
from karpenter_policy.api.v1.budgettimeline import Span
from karpenter_policy.api.v1.crds import NODEPOOL_API_VERSION, NODEPOOL_KIND
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.options import BudgetView
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.checks.validation.policies import place


@dataclass(frozen=True, slots=True)
class NodePoolTimeline:
    """One NodePool's week: where it is, its budgets as read, and the allowance per reason from `start` to `end`."""

    name: str
    file: str
    line: int
    pool: PoolBudgets
    start: datetime
    end: datetime
    spans: Mapping[str, list[Span]]


    def to_json(self) -> dict[str, object]:
        """The week as `check --output json` writes it: each reason's spans in UTC, `allowed` null for no limit."""
        return {
            "nodepool": self.name,
            "file": self.file,
            "line": self.line,
            "nodes": self.pool.count.nodes,
            "nodes_from": self.pool.count.source,
            "budgets_written": self.pool.written,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "reasons": {
                reason: (
                    {"used": False, "why": self.pool.unused[reason]} if reason in self.pool.unused else {
                        "used": True,
                        "spans": [{
                            "start": _iso(span.start),
                            "end": _iso(span.end),
                            "allowed": None if span.allowed == UNBOUNDED else span.allowed,
                            "deciding": list(span.deciding),
                            "unreadable": list(span.unreadable),
                        } for span in spans],
                    })
                for reason, spans in self.spans.items()
            },
        }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """What the budget checks found, the timelines, and the zone they are shown in."""

    findings: list[Finding]
    timelines: list[NodePoolTimeline]
    timezone: ZoneInfo


def week_range(view: BudgetView, today: date) -> tuple[datetime, datetime]:
    """Monday 00:00 to the next Monday 00:00, in the view's time zone, of the week holding `view.week_of` (else
    `today`), in UTC."""
    zone = ZoneInfo(view.timezone)
    day = view.week_of or today
    monday = day - timedelta(days=day.weekday())
    following = monday + timedelta(days=7)
    return (datetime(monday.year, monday.month, monday.day, tzinfo=zone).astimezone(UTC),
            datetime(following.year, following.month, following.day, tzinfo=zone).astimezone(UTC))


def is_nodepool(data: Any) -> bool:
    """A `karpenter.sh/v1` NodePool."""
    return isinstance(data, Mapping) and data.get("apiVersion") == NODEPOOL_API_VERSION and (
        data.get("kind") == NODEPOOL_KIND)


def check_budgets(documents: Iterable[Document], view: BudgetView, today: date) -> BudgetReport:
    """The budget findings and the timeline of each NodePool among `documents` (valid ones: the schema has
    checked their budgets' shapes)."""
    start, end = week_range(view, today)
    findings: list[Finding] = []
    timelines: list[NodePoolTimeline] = []
    for doc in documents:
        if not is_nodepool(doc.data):
            continue
        pool = pool_budgets(doc.data, view.nodes)
        findings += [place(doc, violation) for violation in budget_violations(pool, start)]
        metadata = doc.data.get("metadata")
        name = str(metadata.get("name")) if isinstance(metadata, Mapping) else ""
        line, _ = doc.position(())
        timelines.append(NodePoolTimeline(name, doc.file, line, pool, start, end, week(pool, start, end)))
    return BudgetReport(findings, timelines, ZoneInfo(view.timezone))
