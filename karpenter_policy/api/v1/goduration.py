"""Go's `time.ParseDuration`, which reads a budget's `duration` (metav1.Duration) and robfig cron's `@every`:
an optional sign, then one or more decimal numbers each with a unit (ns, us, µs, ms, s, m, h), or a bare ``0``; a
value beyond Go's int64 nanoseconds (about 292 years) is refused, as Go refuses it. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Final

_UNIT_NANOSECONDS: Final[Mapping[str, int]] = {
    "ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
    "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000,
}
_TERM: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
_INT64_MAX: Final = 2**63 - 1


class GoDurationError(ValueError):
    """A text Go's `time.ParseDuration` refuses; the message is Go's."""


def parse_go_duration(text: str) -> timedelta:
    """`time.ParseDuration(text)` as a timedelta (to the microsecond); raises GoDurationError."""
    invalid = GoDurationError(f'time: invalid duration "{text}"')
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return timedelta(0)
    if not rest:
        raise invalid
    total = 0
    while rest:
        term = _TERM.match(rest)
        assert term is not None  # the pattern matches the empty string
        whole, fraction, unit = term.group(1), term.group(2), term.group(3)
        if not whole and not fraction:
            raise invalid
        if not unit:
            raise GoDurationError(f'time: missing unit in duration "{text}"')
        if unit not in _UNIT_NANOSECONDS:  # Go's unit is the whole run of non-digits
            raise GoDurationError(f'time: unknown unit "{unit}" in duration "{text}"')
        scale = _UNIT_NANOSECONDS[unit]
        value = int(whole or "0") * scale
        if fraction:
            value += int(fraction) * scale // 10 ** len(fraction)
        total += value
        if total > _INT64_MAX + (1 if negative else 0):
            raise invalid
        rest = rest[term.end():]
    nanoseconds = -total if negative else total
    return timedelta(microseconds=nanoseconds // 1_000 if nanoseconds >= 0 else -((-nanoseconds) // 1_000))
