"""Go's `time.ParseDuration` (`api/v1/goduration.py`) at its edges: the largest int64 of nanoseconds and one past it,
in every spelling the CRD patterns admit, negative bounds, runs of digits too long for Python's `int()`, and a
property against exact arithmetic over the whole range (issue #27: a duration Go cannot hold passed silently)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.goduration import (
    MAX_DURATION,
    MAX_DURATION_SECONDS,
    GoDurationError,
    go_duration_nanoseconds,
    parse_go_duration,
)

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(("text", "nanoseconds"), [
    ("9223372036854775807ns", INT64_MAX),
    (MAX_DURATION, INT64_MAX),
    ("2562047h47m16s", 9_223_372_036 * 10**9),
    ("9223372036s", 9_223_372_036 * 10**9),
    ("2562047h", 2_562_047 * 3600 * 10**9),
    ("153722867m", 153_722_867 * 60 * 10**9),
    ("-9223372036854775808ns", -(2**63)),
    ("00000000000000000000000000000001s", 10**9),  # leading zeros are no digits too many
    ("1.5h", 5400 * 10**9),
    (".5s", 500_000_000),
    ("1h1m1.000000001s", 3661 * 10**9 + 1),
    ("1." + "0" * 5000 + "1s", 10**9),  # Go stops reading a fraction's digits once they no longer fit
])  # fmt: skip
def test_what_go_reads_is_read_to_the_nanosecond(text: str, nanoseconds: int) -> None:
    assert go_duration_nanoseconds(text) == nanoseconds


@pytest.mark.parametrize("text", [
    "9223372036854775808ns",  # max + 1 ns
    "2562047h47m16.854775808s",
    "2562047h47m17s",  # the first whole second past the max: what the CRD patterns admit
    "9223372037s",
    "2562048h",
    "153722868m",
    "-9223372036854775809ns",
    "99999999999999999999h",
    "9" * 5000 + "s",  # more digits than Python's int() converts: still Go's refusal, not a ValueError of another kind
    "1" + "0" * 4400 + "h",
    "1000000h" * 3,  # each term fits, the sum does not
])
def test_what_go_refuses_is_refused_with_gos_message(text: str) -> None:
    with pytest.raises(GoDurationError) as refused:
        go_duration_nanoseconds(text)
    assert str(refused.value) == f'time: invalid duration "{text}"'


def test_max_duration_seconds_is_the_last_whole_second_go_holds() -> None:
    assert go_duration_nanoseconds(f"{MAX_DURATION_SECONDS}s") <= INT64_MAX
    with pytest.raises(GoDurationError):
        go_duration_nanoseconds(f"{MAX_DURATION_SECONDS + 1}s")


def test_the_timedelta_keeps_microseconds() -> None:
    assert parse_go_duration(MAX_DURATION) == timedelta(microseconds=INT64_MAX // 1000)
    assert parse_go_duration("-1500ns") == timedelta(microseconds=-1)


UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


@given(terms=st.lists(st.tuples(st.integers(0, 2**64), st.sampled_from(sorted(UNITS))), min_size=1, max_size=4))
@deterministic(300)
def test_integer_terms_are_read_exactly_or_refused_past_int64(terms: list[tuple[int, str]]) -> None:
    text = "".join(f"{count}{unit}" for count, unit in terms)
    total = sum(count * UNITS[unit] for count, unit in terms)
    if total <= INT64_MAX:
        assert go_duration_nanoseconds(text) == total
    else:
        with pytest.raises(GoDurationError):
            go_duration_nanoseconds(text)


def test_a_remembered_answer_is_the_same_answer() -> None:
    """Answers are remembered by text (short ones only): asked again, a duration reads the same and a refusal is
    raised again with Go's message, a new error each time."""
    for _ in range(2):
        assert go_duration_nanoseconds("720h") == 720 * 3600 * 10**9
        with pytest.raises(GoDurationError, match='unknown unit "d" in duration "30d"') as refused:
            go_duration_nanoseconds("30d")
        with pytest.raises(GoDurationError, match="invalid duration") as long:
            go_duration_nanoseconds("9" * 100 + "s")  # not remembered: refused as the first time
    assert refused.value is not long.value
