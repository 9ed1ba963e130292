"""A NodePool's disruption allowance over time, per reason: Karpenter v1.14.1's `MustGetAllowedDisruptions`
(`budgets.py`) at every instant of a range, as spans of constant allowance, each naming the budgets that decide
it (the most restrictive active one: Karpenter takes the minimum). Pure: the caller passes the range.

A budget Karpenter cannot read makes every reason's allowance 0 while it is evaluated: a schedule robfig refuses
always, a `nodes` value only while its budget is active (`Budget.GetAllowedDisruptions` reads `nodes` only then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from karpenter_policy.api.v1.budgets import UNBOUNDED, Budget, BudgetError, active_windows, scaled_nodes

#: The range that shows every behaviour of budgets whose schedules repeat weekly, and of the others.
WEEK: Final = timedelta(days=7)
YEAR: Final = timedelta(days=366)


@dataclass(frozen=True, slots=True)
class Span:
    """``[start, end)`` in which Karpenter allows `allowed` disruptions for the reason (UNBOUNDED: no active budget
    applies); `deciding`: the indices of the budgets that give it (every one at the minimum); `unreadable`: the
    indices of budgets Karpenter cannot read, evaluated here (the allowance is then 0)."""

    start: datetime
    end: datetime
    allowed: int
    deciding: tuple[int, ...] = ()
    unreadable: tuple[int, ...] = ()

    @property
    def length(self) -> timedelta:
        """How long the span lasts."""
        return self.end - self.start


def horizon(budgets: Sequence[Budget]) -> timedelta:
    """How far to look to see every behaviour: a week when every schedule repeats weekly, a year otherwise."""
    for budget in budgets:
        if budget.always_active():
            continue
        try:
            if not budget.cron().repeats_weekly():
                return YEAR
        except BudgetError:
            continue
    return WEEK


def spans(budgets: Sequence[Budget], reason: str, start: datetime, end: datetime, total_nodes: int) -> list[Span]:
    """The allowance for `reason` over ``[start, end)``, as consecutive spans (merged where nothing changes)."""
    unreadable = tuple(index for index, budget in enumerate(budgets) if _schedule_error(budget))
    if unreadable:
        return [Span(start, end, 0, (), unreadable)]
    values: list[int | None] = []
    for budget in budgets:
        try:
            values.append(scaled_nodes(budget.nodes, total_nodes))
        except BudgetError:
            values.append(None)
    events: dict[datetime, list[tuple[int, int]]] = {start: [], end: []}
    for index, budget in enumerate(budgets):
        for opens, closes in active_windows(budget, start, end):
            events.setdefault(opens, []).append((index, 1))
            events.setdefault(closes, []).append((index, -1))
    moments = sorted(events)
    active: dict[int, int] = {}
    result: list[Span] = []
    for here, following in zip(moments, moments[1:], strict=False):
        for index, change in events[here]:
            active[index] = active.get(index, 0) + change
        span = _span(budgets, values, reason, [i for i, count in active.items() if count > 0], here, following)
        if result and (result[-1].allowed, result[-1].deciding, result[-1].unreadable) == (
                span.allowed, span.deciding, span.unreadable) and result[-1].end == span.start:
            result[-1] = Span(result[-1].start, span.end, span.allowed, span.deciding, span.unreadable)
        else:
            result.append(span)
    return result


def _schedule_error(budget: Budget) -> bool:
    if budget.always_active():
        return False
    try:
        budget.cron()
        budget.window()
    except BudgetError:
        return True
    return False


def _span(budgets: Sequence[Budget], values: Sequence[int | None], reason: str, active: list[int],
          start: datetime, end: datetime) -> Span:
    broken = tuple(sorted(index for index in active if values[index] is None))
    if broken:
        return Span(start, end, 0, (), broken)
    applying = {index: values[index] for index in active if budgets[index].applies_to(reason)}
    if not applying:
        return Span(start, end, UNBOUNDED)
    allowed = min(value for value in applying.values() if value is not None)
    return Span(start, end, allowed, tuple(sorted(i for i, value in applying.items() if value == allowed)))
