"""Go's `time.ParseDuration` (Go 1.22 `time/format.go`), which reads every Karpenter v1 duration —
`consolidateAfter`, `expireAfter` (`NillableDuration.UnmarshalJSON`), `terminationGracePeriod` and a budget's
`duration` (metav1.Duration) — and robfig cron's `@every`: an optional sign, then one or more decimal numbers each
with a unit (ns, us, µs, ms, s, m, h), or a bare ``0``. A value beyond Go's int64 nanoseconds (`MAX_DURATION`,
2562047h47m16.854775807s, about 292 years) is refused, as Go refuses it, with Go's message; digits past what Go reads
of a fraction are ignored, as Go ignores them, and a run of digits of any length is refused without being converted
whole. Pure.
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
_UINT_OVERFLOW: Final = 2**63  # `1<<63`: what Go's uint64 accumulator may reach before it calls overflow

#: Go's `time.Duration(math.MaxInt64)` as `Duration.String()` writes it: the longest duration Karpenter can hold.
MAX_DURATION: Final = "2562047h47m16.854775807s"
#: The same in whole seconds, the most `time.Duration(n) * time.Second` holds without wrapping.
MAX_DURATION_SECONDS: Final = _INT64_MAX // 1_000_000_000


class GoDurationError(ValueError):
    """A text Go's `time.ParseDuration` refuses; the message is Go's."""


def _leading_int(digits: str) -> int | None:
    """Go's `leadingInt`: the value of a run of digits, None past `1<<63` (Go's "bad [0-9]*")."""
    significant = digits.lstrip("0")
    if len(significant) > 19:  # at least 10**19 > 1<<63: never converted whole (Python's int() limit)
        return None
    value = int(significant or "0")
    return value if value <= _UINT_OVERFLOW else None


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's `leadingFraction`: the digits read while they fit (the rest ignored) and the power of ten they make."""
    value, scale = 0, 1.0
    for digit in digits:
        if value > _INT64_MAX // 10:
            break
        following = value * 10 + ord(digit) - 48
        if following > _UINT_OVERFLOW:
            break
        value, scale = following, scale * 10
    return value, scale


def parse_go_duration(text: str) -> timedelta:
    """`time.ParseDuration(text)` as a timedelta (to the microsecond); raises GoDurationError."""
    return timedelta(microseconds=_to_microseconds(go_duration_nanoseconds(text)))


#: Bound of `_PARSED` (cleared when full: distinct texts cannot grow it).
_PARSED_MAX: Final = 4096
#: `go_duration_nanoseconds`' answers by text (objects repeat the same durations): the nanoseconds, or the message
#: of the GoDurationError it raises; only texts of at most `_REMEMBERED_LENGTH` characters.
_PARSED: dict[str, int | str] = {}
_REMEMBERED_LENGTH: Final = 64


def go_duration_nanoseconds(text: str) -> int:
    """`time.ParseDuration(text)` in nanoseconds, exactly as Go's int64 holds it; raises GoDurationError."""
    parsed = _PARSED.get(text)
    if parsed is None:
        try:
            parsed = _nanoseconds(text)
        except GoDurationError as error:
            parsed = str(error)
        if len(text) <= _REMEMBERED_LENGTH:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[text] = parsed
    if isinstance(parsed, str):
        raise GoDurationError(parsed)
    return parsed


def _nanoseconds(text: str) -> int:
    invalid = GoDurationError(f'time: invalid duration "{text}"')
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        term = _TERM.match(rest)
        assert term is not None  # the pattern matches the empty string
        whole, fraction, unit = term.group(1), term.group(2), term.group(3)
        if not whole and not fraction:
            raise invalid
        value = _leading_int(whole)
        if value is None:
            raise invalid
        if not unit:
            raise GoDurationError(f'time: missing unit in duration "{text}"')
        if unit not in _UNIT_NANOSECONDS:  # Go's unit is the whole run of non-digits
            raise GoDurationError(f'time: unknown unit "{unit}" in duration "{text}"')
        scale = _UNIT_NANOSECONDS[unit]
        if value > _UINT_OVERFLOW // scale:
            raise invalid
        value *= scale
        if fraction:
            digits, power = _leading_fraction(fraction)
            if digits > 0:
                value += int(float(digits) * (float(scale) / power))  # Go's float64 arithmetic, truncated
                if value > _UINT_OVERFLOW:
                    raise invalid
        total += value
        if total > _UINT_OVERFLOW:
            raise invalid
        rest = rest[term.end():]
    if negative:
        return -total
    if total > _INT64_MAX:
        raise invalid
    return total


def _to_microseconds(nanoseconds: int) -> int:
    """Nanoseconds truncated toward zero to microseconds."""
    return nanoseconds // 1_000 if nanoseconds >= 0 else -((-nanoseconds) // 1_000)
