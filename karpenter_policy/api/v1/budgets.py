"""Karpenter v1's disruption-budget arithmetic (kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool.go`:
`NodePool.GetAllowedDisruptionsByReason`, `NodePool.MustGetAllowedDisruptions`, `Budget.GetAllowedDisruptions`,
`Budget.IsActive`, `GetIntStrFromValue`), and the windows in which each budget is active. Pure: no I/O, no clock
(the caller passes the time).

As Karpenter computes it:

* a budget without `schedule` and `duration` is always active; otherwise it is active at `now` when its schedule
  (`cron.py`, UTC) fires in ``(now - duration, now]`` — each activation opens a window ``[hit, hit + duration)``;
  a schedule that never fires within five years (``0 0 31 2 *``) is *always* active (robfig returns its zero time,
  which is not after `now`); a zero duration is never active;
* an active budget allows `nodes` disruptions: a count, or a percentage of the NodePool's nodes **rounded up**
  (`intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)`: 10 % of 5 nodes is 1); a count is read by Go's
  `strconv.Atoi` and stored as an int32 (`intstr.FromInt` wraps beyond 2³¹); an inactive budget allows
  `MaxInt32` (unbounded);
* a reason's allowance is the minimum over the budgets that name it or name no reason; none → `MaxInt32`;
* a budget Karpenter cannot read (a schedule robfig refuses, a `nodes` value that is not a count or a percentage)
  is an error *for every reason of the NodePool*, and the disruption controller reads an error as 0: the NodePool
  is never disrupted, voluntarily ("fail closed");
* `budgets` left out is defaulted by the API server to one budget of 10 % (the CRD's default); an explicit empty
  list is kept, and allows everything.

Which nodes count (Karpenter: the NodePool's initialized, not-terminating nodes) is the caller's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from karpenter_policy.api.v1.cron import YEAR_LIMIT, CronError, CronSchedule, parse_schedule
from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration

EMPTY: Final = "Empty"
UNDERUTILIZED: Final = "Underutilized"
DRIFTED: Final = "Drifted"
#: `DisruptionReason`'s values, in the order Karpenter's disruption methods run them.
REASONS: Final[tuple[str, ...]] = (EMPTY, UNDERUTILIZED, DRIFTED)
#: What an inactive budget, or no budget, allows (`math.MaxInt32`).
UNBOUNDED: Final = 2**31 - 1
#: The CRD's default when `budgets` is left out.
DEFAULT_NODES: Final = "10%"
_GO_ATOI: Final = re.compile(r"[+-]?[0-9]+")
_PERCENT: Final = re.compile(r"[+-]?[0-9]+%")
_INT64: Final = 2**63


class BudgetError(ValueError):
    """A budget Karpenter cannot read (its error message); Karpenter then allows 0 disruptions."""


@dataclass(frozen=True, slots=True)
class Budget:
    """One entry of `spec.disruption.budgets`, as written: `reasons` None means every reason."""

    nodes: str = DEFAULT_NODES
    schedule: str | None = None
    duration: str | None = None
    reasons: tuple[str, ...] | None = None

    def applies_to(self, reason: str) -> bool:
        """`budget.Reasons == nil || lo.Contains(budget.Reasons, reason)`."""
        return self.reasons is None or reason in self.reasons

    def cron(self) -> CronSchedule:
        """The parsed schedule; raises BudgetError as IsActive's "invariant violated, invalid cron"."""
        try:
            return parse_schedule(self.schedule or "")
        except CronError as error:
            raise BudgetError(f"invariant violated, invalid cron, {error}") from None

    def window(self) -> timedelta:
        """The parsed duration (zero when absent, as `lo.FromPtr`); raises BudgetError."""
        if self.duration is None:
            return timedelta(0)
        try:
            return parse_go_duration(self.duration)
        except GoDurationError as error:
            raise BudgetError(str(error)) from None

    def always_active(self) -> bool:
        """No schedule and no duration."""
        return self.schedule is None and self.duration is None

    def is_active(self, now: datetime) -> bool:
        """`Budget.IsActive`: the schedule's next activation after ``now - duration`` is not after `now`."""
        if self.always_active():
            return True
        schedule, window = self.cron(), self.window()
        utc_now = now.astimezone(UTC)
        hit = schedule.next_after(utc_now - window)
        return hit is None or hit <= utc_now

    def allowed(self, now: datetime, total_nodes: int) -> int:
        """`Budget.GetAllowedDisruptions`: UNBOUNDED when inactive; raises BudgetError (Karpenter returns 0)."""
        if not self.is_active(now):
            return UNBOUNDED
        return scaled_nodes(self.nodes, total_nodes)


def scaled_nodes(nodes: str, total_nodes: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent(GetIntStrFromValue(nodes), total, roundUp=true)`."""
    if _GO_ATOI.fullmatch(nodes) and -_INT64 <= int(nodes) < _INT64:
        return _int32(int(nodes))  # intstr.FromInt keeps an int32
    if not nodes.endswith("%"):
        raise BudgetError("invalid value for IntOrString: invalid type: string is not a percentage")
    if not _PERCENT.fullmatch(nodes) or not -_INT64 <= int(nodes[:-1]) < _INT64:
        raise BudgetError(f'invalid value for IntOrString: invalid value "{nodes}": strconv.Atoi: parsing '
                          f'"{nodes[:-1]}": invalid syntax')
    percent = int(nodes[:-1])
    return -((-percent * total_nodes) // 100)  # math.Ceil(percent * total / 100)


def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@dataclass(frozen=True, slots=True)
class Allowance:
    """`GetAllowedDisruptionsByReason`'s answer: the allowance, and the errors of unreadable budgets."""

    nodes: int
    errors: tuple[str, ...] = ()

    @property
    def enforced(self) -> int:
        """What the disruption controller acts on (`MustGetAllowedDisruptions`): 0 on any error."""
        return 0 if self.errors else self.nodes


def allowance(budgets: Sequence[Budget], reason: str, now: datetime, total_nodes: int) -> Allowance:
    """`NodePool.GetAllowedDisruptionsByReason`: the minimum over the budgets for `reason`; every budget's error
    is kept, whatever its reasons."""
    allowed, errors = UNBOUNDED, []
    for budget in budgets:
        try:
            value = budget.allowed(now, total_nodes)
        except BudgetError as error:
            errors.append(str(error))
            value = 0
        if budget.applies_to(reason):
            allowed = min(allowed, value)
    return Allowance(allowed, tuple(errors))


def allowed_disruptions(budgets: Sequence[Budget], reason: str, now: datetime, total_nodes: int) -> int:
    """How many of the NodePool's nodes Karpenter may be disrupting for `reason` at `now`
    (`MustGetAllowedDisruptions`), before subtracting those already disrupting or NotReady."""
    return allowance(budgets, reason, now, total_nodes).enforced


def budgets_of(disruption: Mapping[str, Any] | None) -> tuple[Budget, ...]:
    """The budgets of a NodePool's `spec.disruption` as the API server stores them: left out → the CRD's default
    (one budget of 10 %); an entry's missing `nodes` → 10 % (the field's default). Values of a wrong shape are
    kept as text, so Karpenter's parse decides (the schema check reports the shape)."""
    if not isinstance(disruption, Mapping) or disruption.get("budgets") is None:
        return (Budget(),)
    written = disruption["budgets"]
    if not isinstance(written, list):
        return (Budget(),)
    return tuple(budget_of(entry) for entry in written if isinstance(entry, Mapping))


def budget_of(entry: Mapping[str, Any]) -> Budget:
    """One written budget."""
    reasons = entry.get("reasons")
    return Budget(
        nodes=_text(entry.get("nodes"), DEFAULT_NODES),
        schedule=None if entry.get("schedule") is None else _text(entry["schedule"], ""),
        duration=None if entry.get("duration") is None else _text(entry["duration"], ""),
        # `reasons: []` decodes to an empty, non-nil slice: the budget then applies to no reason.
        reasons=tuple(str(reason) for reason in reasons) if isinstance(reasons, list) else None,
    )


def _text(value: Any, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def active_windows(budget: Budget, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """The maximal intervals within ``[start, end)`` in which `budget` is active (`is_active`), merged and in
    order; raises BudgetError for an unreadable budget."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    if budget.always_active():
        return [(start, end)] if start < end else []
    schedule, window = budget.cron(), budget.window()
    if window <= timedelta(0):
        return []
    if schedule.every is not None:  # @every d: Next(now - window) = now - window + d, active iff d <= window
        return [(start, end)] if schedule.every <= window and start < end else []
    if schedule.next_after(start - window) is None:  # never fires: robfig's zero time, active for ever
        return [(start, end)] if start < end else []
    return _merged(_hit_windows(schedule, window, start, end), start, end)


def _hit_windows(schedule: CronSchedule, window: timedelta, start: datetime,
                 end: datetime) -> Iterable[tuple[datetime, datetime]]:
    """Each activation's window, in order of opening: the last activation at or before `start` (the one whose
    window reaches furthest into the range), then those after it. Consecutive minutes open overlapping windows
    when the window is a minute or more: one window per run then."""
    lookback = min(window, timedelta(days=366 * (YEAR_LIMIT + 4)))
    latest = schedule.latest_at_or_before(start, start - lookback)
    if latest is not None:
        yield latest, latest + window
    day = start.date()
    per_run = window >= timedelta(minutes=1)
    while day <= end.date():
        if per_run:
            for first, last in schedule.runs_on(day):
                if last > start and first < end:
                    opens = max(first, start + timedelta(seconds=1)) if first <= start else first
                    yield _ceil_minute(opens), last + window
        else:
            for hit in schedule.hits_on(day):
                if start < hit < end:
                    yield hit, hit + window
        day += timedelta(days=1)


def _ceil_minute(moment: datetime) -> datetime:
    floor = moment.replace(second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(minutes=1)


def _merged(windows: Iterable[tuple[datetime, datetime]], start: datetime,
            end: datetime) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for opens, closes in windows:
        opens, closes = max(opens, start), min(closes, end)
        if opens >= closes:
            continue
        if merged and opens <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
        else:
            merged.append((opens, closes))
    return merged
