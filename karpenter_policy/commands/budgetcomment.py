"""The disruption-budget timeline in `check --output markdown` (docs/budgets.md): for each Karpenter v1 NodePool,
a table of the week, one row per stretch in which the allowance of every reason (Empty, Underutilized, Drifted)
stays the same — how many of its nodes Karpenter may be disrupting, and the budget that decides it — in the time
zone asked for (`--timezone`; Karpenter itself reads schedules in UTC). In `diff --output markdown`, the NodePools
whose budgets changed: the stretches of the week whose allowance differs, BASE → HEAD."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from karpenter_policy.api.v1.budgets import REASONS, UNBOUNDED
from karpenter_policy.api.v1.budgettimeline import Span
from karpenter_policy.checks.reporters import displayable
from karpenter_policy.checks.validation.budgets import BudgetReport, NodePoolTimeline
from karpenter_policy.commands.costcomment import markdown_text

#: Rows shown per NodePool; the rest are counted.
MAX_ROWS = 40


def budget_lines(report: BudgetReport) -> list[str]:
    """The timeline section: a heading, then a folded table per NodePool (nothing without NodePools)."""
    if not report.timelines:
        return []
    zone = report.timezone
    first = report.timelines[0].start.astimezone(zone)
    lines = [f"#### Disruption budgets, week of {first:%a %Y-%m-%d} ({zone.key})", ""]
    for timeline in report.timelines:
        lines += _nodepool_lines(timeline, zone)
    return lines


def _nodepool_lines(timeline: NodePoolTimeline, zone: ZoneInfo) -> list[str]:
    pool = timeline.pool
    where = markdown_text(f"{displayable(timeline.file)}:{timeline.line}")
    source = "" if pool.written else ", the default budget (nodes: 10%)"
    summary = f"NodePool <code>{markdown_text(timeline.name)}</code> ({where}): {pool.count.describe()}{source}"
    rows = _rows(timeline)
    lines = [f"<details><summary>{summary}</summary>", "",
             "| from | until | " + " | ".join(REASONS) + " |", "|---|---|" + "---|" * len(REASONS)]
    for start, end, cells in rows[:MAX_ROWS]:
        until = "next Mon 00:00" if end == timeline.end else _clock(end, zone)
        lines.append(f"| {_clock(start, zone)} | {until} | " + " | ".join(cells) + " |")
    if len(rows) > MAX_ROWS:
        lines += ["", f"… and {len(rows) - MAX_ROWS} more changes this week."]
    lines += ["", "</details>", ""]
    return lines


def _rows(timeline: NodePoolTimeline) -> list[tuple[datetime, datetime, list[str]]]:
    """One row per stretch where no reason's allowance (nor the budget deciding it) changes."""
    moments = sorted({moment for spans in timeline.spans.values() for span in spans
                      for moment in (span.start, span.end)})
    rows: list[tuple[datetime, datetime, list[str]]] = []
    for start, end in zip(moments, moments[1:], strict=False):
        cells = [_cell(reason, _at(timeline.spans[reason], start), timeline) for reason in REASONS]
        if rows and rows[-1][2] == cells:
            rows[-1] = (rows[-1][0], end, cells)
        else:
            rows.append((start, end, cells))
    return rows


def _at(spans: Sequence[Span], moment: datetime) -> Span:
    return next(span for span in spans if span.start <= moment < span.end)


def _cell(reason: str, span: Span, timeline: NodePoolTimeline) -> str:
    if reason in timeline.pool.unused:
        return f"not used ({timeline.pool.unused[reason]})"
    if span.unreadable:
        return "0 (unreadable: " + ", ".join(f"budgets[{index}]" for index in span.unreadable) + ")"
    if span.allowed == UNBOUNDED:
        return "no limit"
    if not timeline.pool.written:
        return f"{span.allowed} (default)"
    return f"{span.allowed} (" + ", ".join(f"budgets[{index}]" for index in span.deciding) + ")"


def _clock(moment: datetime, zone: ZoneInfo) -> str:
    return f"{moment.astimezone(zone):%a %H:%M}"


@dataclass(frozen=True, slots=True)
class BudgetChange:
    """A NodePool whose budgets differ between BASE and HEAD (None: not on that side, or not valid there)."""

    name: str
    base: NodePoolTimeline | None
    head: NodePoolTimeline | None


def budget_changes(base: Sequence[NodePoolTimeline], head: Sequence[NodePoolTimeline]) -> list[BudgetChange]:
    """The NodePools, by name, whose budgets as read (or node count, or reasons in use) differ between the sides."""
    before = {timeline.name: timeline for timeline in base}
    after = {timeline.name: timeline for timeline in head}
    changes = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is None or new is None or old.pool != new.pool:
            changes.append(BudgetChange(name, old, new))
    return changes


def budget_change_lines(changes: Sequence[BudgetChange], zone: ZoneInfo) -> list[str]:
    """`diff`'s section: per changed NodePool, the stretches of the week whose allowance differs (BASE → HEAD)."""
    if not changes:
        return []
    first = next(timeline for change in changes for timeline in (change.head, change.base) if timeline is not None)
    lines = [f"#### Disruption budgets changed, week of {first.start.astimezone(zone):%a %Y-%m-%d} ({zone.key})", ""]
    for change in changes:
        if change.head is None:
            lines += [f"- NodePool <code>{markdown_text(change.name)}</code>: not in HEAD (or invalid there)", ""]
            continue
        if change.base is None:
            lines += _nodepool_lines(change.head, zone)
            continue
        lines += _change_lines(change.base, change.head, zone)
    return lines


def _change_lines(base: NodePoolTimeline, head: NodePoolTimeline, zone: ZoneInfo) -> list[str]:
    where = markdown_text(f"{displayable(head.file)}:{head.line}")
    summary = f"NodePool <code>{markdown_text(head.name)}</code> ({where}): {head.pool.count.describe()}"
    before, after = _rows(base), _rows(head)
    moments = sorted({moment for rows in (before, after) for row in rows for moment in row[:2]})
    rows: list[tuple[datetime, datetime, list[str]]] = []
    for start, end in zip(moments, moments[1:], strict=False):
        old, new = _row_at(before, start), _row_at(after, start)
        if old == new:
            continue
        cells = [was if was == now else f"{was} → {now}" for was, now in zip(old, new, strict=True)]
        if rows and rows[-1][2] == cells and rows[-1][1] == start:
            rows[-1] = (rows[-1][0], end, cells)
        else:
            rows.append((start, end, cells))
    if not rows:
        return [f"- {summary}: budgets rewritten, the same allowance at every moment of the week", ""]
    lines = [f"<details open><summary>{summary}: BASE → HEAD</summary>", "",
             "| from | until | " + " | ".join(REASONS) + " |", "|---|---|" + "---|" * len(REASONS)]
    for start, end, cells in rows[:MAX_ROWS]:
        until = "next Mon 00:00" if end == head.end else _clock(end, zone)
        lines.append(f"| {_clock(start, zone)} | {until} | " + " | ".join(cells) + " |")
    if len(rows) > MAX_ROWS:
        lines += ["", f"… and {len(rows) - MAX_ROWS} more changes this week."]
    return [*lines, "", "</details>", ""]


def _row_at(rows: Sequence[tuple[datetime, datetime, list[str]]], moment: datetime) -> list[str]:
    return next(cells for start, end, cells in rows if start <= moment < end)
