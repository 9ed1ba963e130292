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

from karpenter_policy.api.v1.budgets import REASONS, UNBOUNDED, Budget, BudgetError, active_windows, scaled_nodes

#: The range that shows every behaviour of budgets whose schedules repeat weekly, and of the others.
WEEK: Final = timedelta(days=7)
YEAR: Final = timedelta(days=366)
_TICK: Final = timedelta(microseconds=1)


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
    return allowances(budgets, start, end, total_nodes, (reason,))[reason]


Windows = Sequence[Sequence[tuple[datetime, datetime]]]
#: One stretch's allowance, deciding budgets and unreadable budgets (a Span without its bounds).
_State = tuple[int, tuple[int, ...], tuple[int, ...]]


def allowances(budgets: Sequence[Budget], start: datetime, end: datetime, total_nodes: int,
               reasons: Sequence[str] = REASONS, windows: Windows | None = None) -> dict[str, list[Span]]:
    """`spans` for each of `reasons`, in one pass; `windows`: each budget's `active_windows` over the range, when
    the caller has them."""
    unreadable = tuple(index for index, budget in enumerate(budgets) if _schedule_error(budget))
    if unreadable:
        return {reason: [Span(start, end, 0, (), unreadable)] for reason in reasons}
    values: list[int | None] = []
    for budget in budgets:
        try:
            values.append(scaled_nodes(budget.nodes, total_nodes))
        except BudgetError:
            values.append(None)
    if windows is None:
        windows = [active_windows(budget, start, end) for budget in budgets]
    # the sweep runs on whole microseconds from `start` (datetime's resolution)
    events: dict[int, list[tuple[int, int]]] = {0: [], _offset(start, end): []}
    for index, budget_windows in enumerate(windows):
        for opens, closes in budget_windows:
            events.setdefault(_offset(start, opens), []).append((index, 1))
            events.setdefault(_offset(start, closes), []).append((index, -1))
    applies = [[budget.applies_to(reason) for budget in budgets] for reason in reasons]
    moments = sorted(events)
    counts = [0] * len(budgets)
    decided: dict[tuple[int, ...], list[_State]] = {}  # the active budgets → each reason's state (few distinct)
    current: list[_State] = []
    opened = 0
    changes: list[tuple[int, list[_State]]] = []
    for here in moments[:-1]:
        for index, change in events[here]:
            counts[index] += change
        active = tuple(index for index, count in enumerate(counts) if count > 0)
        states = decided.get(active)
        if states is None:
            broken = tuple(index for index in active if values[index] is None)
            states = [(0, (), broken) if broken else _decided(values, applies[position], active)
                      for position in range(len(reasons))]
            decided[active] = states
        if states is not current:
            changes.append((here, states))
            current = states
    result: dict[str, list[Span]] = {}
    for position, reason in enumerate(reasons):
        spans_of_reason: list[Span] = []
        state: _State | None = None
        for here, states in changes:
            if states[position] != state:
                if state is not None:
                    spans_of_reason.append(_span(start, opened, here, state))
                state, opened = states[position], here
        if state is not None:
            spans_of_reason.append(_span(start, opened, moments[-1], state))
        result[reason] = spans_of_reason
    return result


def _offset(start: datetime, moment: datetime) -> int:
    return (moment - start) // _TICK


def _decided(values: Sequence[int | None], applies: Sequence[bool], active: Sequence[int]) -> _State:
    applying = [(values[index], index) for index in active if applies[index]]
    if not applying:
        return (UNBOUNDED, (), ())
    allowed = min(value for value, _ in applying if value is not None)
    return (allowed, tuple(index for value, index in applying if value == allowed), ())


def _span(start: datetime, opened: int, closed: int, state: _State) -> Span:
    return Span(start + opened * _TICK, start + closed * _TICK, *state)


def _schedule_error(budget: Budget) -> bool:
    if budget.always_active():
        return False
    try:
        budget.cron()
        budget.window()
    except BudgetError:
        return True
    return False
