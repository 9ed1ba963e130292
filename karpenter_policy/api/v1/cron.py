"""The cron dialect of Karpenter v1's disruption budgets: github.com/robfig/cron/v3 v3.0.1's `ParseStandard` as
Karpenter calls it (kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool.go`, `Budget.IsActive`: the schedule
is parsed as ``"TZ=UTC " + schedule``), and robfig's `SpecSchedule.Next`.

What that means for a schedule, as robfig v3.0.1 `parser.go` and `spec.go` do it:

* five fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT —
  7 is *not* Sunday), each a comma list of ``*``/``?``, ``N``, ``N-M``, with an optional ``/step``; ``N/step``
  runs to the field's maximum; a ``*`` with a step of 1 (or none) keeps its "star" mark; names are matched
  case-insensitively;
* the descriptors ``@yearly``/``@annually``, ``@monthly``, ``@weekly`` (Sunday), ``@daily``/``@midnight``,
  ``@hourly`` and ``@every <duration>``;
* the day matches when both day of month and day of week match if either field is starred, when either matches
  otherwise (``0 0 1-31 * MON`` is every day);
* always UTC: a schedule's own ``TZ=``/``CRON_TZ=`` prefix comes after Karpenter's ``TZ=UTC`` and is read as a
  sixth field, so it fails to parse (the CRD's pattern admits it);
* `Next(t)` is the first activation strictly after `t`, or the zero time when none falls within five years of
  `t` (``0 0 31 2 *`` never fires).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final

from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration

_MONTH_NAMES: Final[Mapping[str, int]] = {
    name: number for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)
}
_DOW_NAMES: Final[Mapping[str, int]] = {
    name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}
#: Go's `strconv.Atoi` (base 10, optional sign, no underscores), range of a 64-bit int.
_GO_INT: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MAX: Final = 2**63 - 1
#: Go's `unicode.IsSpace` (what `strings.Fields` and `strings.TrimSpace` split and trim on).
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
    "\u2028\u2029\u202f\u205f\u3000"
#: The longest a schedule can go without firing: robfig's `Next` gives up after five years.
YEAR_LIMIT: Final = 5


class CronError(ValueError):
    """A schedule robfig's parser refuses; the message is robfig's."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: Mapping[str, int] | None


_MINUTES: Final = _Bounds(0, 59, None)
_HOURS: Final = _Bounds(0, 23, None)
_DOM: Final = _Bounds(1, 31, None)
_MONTHS: Final = _Bounds(1, 12, _MONTH_NAMES)
_DOW: Final = _Bounds(0, 6, _DOW_NAMES)


@dataclass(frozen=True, slots=True)
class Field:
    """One field's admitted values, and robfig's star mark (the field was ``*`` or ``?`` without a step > 1)."""

    values: frozenset[int]
    star: bool = False


def _all(bounds: _Bounds) -> Field:
    return Field(frozenset(range(bounds.low, bounds.high + 1)), star=True)


def _only(value: int) -> Field:
    return Field(frozenset({value}))


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed schedule (robfig's `SpecSchedule`, seconds always 0), or a constant delay (`@every`)."""

    minute: Field
    hour: Field
    day_of_month: Field
    month: Field
    day_of_week: Field
    every: timedelta | None = None

    def repeats_weekly(self) -> bool:
        """Whether the activations repeat every week: every month, every day of the month (then the day of the
        week decides alone, or every day matches)."""
        return self.every is not None or (
            len(self.month.values) == _MONTHS.high and len(self.day_of_month.values) == _DOM.high)

    def day_matches(self, day: date) -> bool:
        """robfig's `dayMatches`, with the month."""
        if day.month not in self.month.values:
            return False
        dom = day.day in self.day_of_month.values
        dow = (day.isoweekday() % 7) in self.day_of_week.values
        if self.day_of_month.star or self.day_of_week.star:
            return dom and dow
        return dom or dow

    def hits_on(self, day: date) -> Iterator[datetime]:
        """The activations on `day` (UTC), in order (none for `@every`)."""
        if self.every is not None or not self.day_matches(day):
            return
        minutes = sorted(self.minute.values)
        for hour in sorted(self.hour.values):
            for minute in minutes:
                yield datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)

    def runs_on(self, day: date) -> Iterator[tuple[datetime, datetime]]:
        """The activations on `day` as runs of consecutive minutes: (first, last) of each, in order."""
        if self.every is not None or not self.day_matches(day):
            return
        runs = _minute_runs(self.minute.values)
        for hour in sorted(self.hour.values):
            base = datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
            for first, last in runs:
                yield base + timedelta(minutes=first), base + timedelta(minutes=last)

    def next_after(self, moment: datetime) -> datetime | None:
        """robfig's `Next`: the first activation strictly after `moment`; None for its zero time (no activation
        within five years)."""
        start = _upcoming_second(moment)
        if self.every is not None:
            return start - timedelta(seconds=1) + self.every
        first_minute = start if start.second == 0 else start.replace(second=0) + timedelta(minutes=1)
        day = first_minute.date()
        limit = start.year + YEAR_LIMIT
        while day.year <= limit:
            for hit in self.hits_on(day):
                if hit >= first_minute:
                    return hit
            day += timedelta(days=1)
        return None

    def latest_at_or_before(self, moment: datetime, not_before: datetime) -> datetime | None:
        """The last activation at or before `moment` and strictly after `not_before`, or None."""
        day = moment.date()
        while day >= not_before.date():
            for hit in reversed(list(self.hits_on(day))):
                if hit <= moment:
                    return hit if hit > not_before else None
            day -= timedelta(days=1)
        return None


def _minute_runs(minutes: frozenset[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for minute in sorted(minutes):
        if runs and runs[-1][1] == minute - 1:
            runs[-1] = (runs[-1][0], minute)
        else:
            runs.append((minute, minute))
    return runs


def _upcoming_second(moment: datetime) -> datetime:
    """robfig's first step: `t.Add(1s - t.Nanosecond())`, in UTC."""
    utc = moment.astimezone(UTC)
    return utc.replace(microsecond=0) + timedelta(seconds=1)


def _go_fields(text: str) -> list[str]:
    """Go's `strings.Fields`."""
    return [part for part in re.split(f"[{re.escape(_GO_SPACE)}]+", text) if part]


def _go_atoi(text: str) -> int:
    if not _GO_INT.fullmatch(text) or abs(int(text)) > _INT64_MAX + (1 if text.startswith("-") else 0):
        raise CronError(f"failed to parse int from {text}: strconv.Atoi: parsing {text!r}: invalid syntax")
    number = int(text)
    if number < 0:
        raise CronError(f"negative number ({number}) not allowed: {text}")
    return number


def _int_or_name(text: str, bounds: _Bounds) -> int:
    if bounds.names is not None and text.lower() in bounds.names:
        return bounds.names[text.lower()]
    return _go_atoi(text)


def _range(expression: str, bounds: _Bounds) -> Field:
    """robfig's `getRange`."""
    range_and_step = expression.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = bounds.low, bounds.high, True
    else:
        start = _int_or_name(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expression}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _go_atoi(range_and_step[1])
        if single:
            end = bounds.high
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expression}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expression}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expression}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expression}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expression}")
    return Field(frozenset(range(start, end + 1, step)), star)


def _field(text: str, bounds: _Bounds) -> Field:
    """robfig's `getField`: the union of a comma list (empty items dropped)."""
    values: set[int] = set()
    star = False
    for expression in (part for part in text.split(",") if part):
        one = _range(expression, bounds)
        values |= one.values
        star = star or one.star
    return Field(frozenset(values), star)


_DESCRIPTORS: Final[Mapping[str, CronSchedule]] = {
    "@yearly": CronSchedule(_only(0), _only(0), _only(1), _only(1), _all(_DOW)),
    "@monthly": CronSchedule(_only(0), _only(0), _only(1), _all(_MONTHS), _all(_DOW)),
    "@weekly": CronSchedule(_only(0), _only(0), _all(_DOM), _all(_MONTHS), _only(0)),
    "@daily": CronSchedule(_only(0), _only(0), _all(_DOM), _all(_MONTHS), _all(_DOW)),
    "@hourly": CronSchedule(_only(0), _all(_HOURS), _all(_DOM), _all(_MONTHS), _all(_DOW)),
}
_ALIASES: Final[Mapping[str, str]] = {"@annually": "@yearly", "@midnight": "@daily"}
_EVERY: Final = "@every "


def _descriptor(text: str) -> CronSchedule:
    """robfig's `parseDescriptor` (exact names, case-sensitive)."""
    name = _ALIASES.get(text, text)
    if name in _DESCRIPTORS:
        return _DESCRIPTORS[name]
    if text.startswith(_EVERY):
        try:
            delay = parse_go_duration(text[len(_EVERY):])
        except GoDurationError as error:
            raise CronError(f"failed to parse duration {text}: {error}") from None
        # robfig's `Every`: at least a second, whole seconds.
        delay = max(delay, timedelta(seconds=1))
        delay -= timedelta(microseconds=delay.microseconds)
        return CronSchedule(_all(_MINUTES), _all(_HOURS), _all(_DOM), _all(_MONTHS), _all(_DOW), every=delay)
    raise CronError(f"unrecognized descriptor: {text}")


def parse_schedule(schedule: str) -> CronSchedule:
    """A budget's `schedule` as Karpenter v1.14.1 parses it (`cron.ParseStandard("TZ=UTC " + schedule)`); raises
    CronError with robfig's message."""
    spec = schedule.strip(_GO_SPACE)  # robfig trims what follows its TZ= prefix
    if spec.startswith("@"):
        return _descriptor(spec)
    fields = _go_fields(spec)
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return CronSchedule(
        minute=_field(fields[0], _MINUTES), hour=_field(fields[1], _HOURS), day_of_month=_field(fields[2], _DOM),
        month=_field(fields[3], _MONTHS), day_of_week=_field(fields[4], _DOW),
    )
