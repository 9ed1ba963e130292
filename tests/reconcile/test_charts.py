"""The simulation reports' axes: value ticks at round numbers (whole numbers for counts, cents for dollars), the
time axis in seconds, minutes or hours as the run's length asks."""

from __future__ import annotations

import math

import pytest

from karpenter_policy.simulate.charts import time_label, time_ticks, value_label, value_ticks


def _round(step: float) -> bool:
    """1, 2, 2.5 or 5 × a power of ten."""
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5))


@pytest.mark.parametrize(("highest", "whole", "expected"), [
    (54, True, [0, 10, 20, 30, 40, 50, 60]),  # was 0, 13.5, 27, 40.5, 54
    (3.84, False, [0, 1, 2, 3, 4]),  # was 0.00, 0.96, 1.92, 2.88, 3.84
    (0.459, False, [0, 0.1, 0.2, 0.3, 0.4, 0.5]),
    (9.22, False, [0, 2, 4, 6, 8, 10]),
    (7, True, [0, 2, 4, 6, 8]),
    (1, True, [0, 1]),
    (0, True, [0, 1]),  # nothing to draw: an axis all the same
])
def test_value_ticks_fall_on_round_numbers_above_the_highest_value(
    highest: float, whole: bool, expected: list[float]
) -> None:
    assert value_ticks(highest, whole) == expected


@pytest.mark.parametrize("highest", [0.013, 0.7, 1.0, 3.3, 17, 46, 99.9, 101, 227, 5000, 123456])
@pytest.mark.parametrize("whole", [False, True])
def test_any_value_gets_at_most_six_round_intervals_reaching_it(highest: float, whole: bool) -> None:
    ticks = value_ticks(highest, whole)
    step = ticks[1] - ticks[0]
    assert ticks[0] == 0 and ticks[-1] >= highest and ticks[-2] < highest
    assert len(ticks) - 1 <= 6 and _round(step)
    assert all(math.isclose(b - a, step) for a, b in zip(ticks, ticks[1:], strict=False))
    if whole:
        assert all(t == int(t) for t in ticks)


def test_value_labels_say_dollars_with_cents_only_when_the_step_needs_them() -> None:
    assert [value_label(v, 1.0, "$") for v in value_ticks(3.84)] == ["$0", "$1", "$2", "$3", "$4"]
    assert [value_label(v, 0.1, "$") for v in (0, 0.1, 0.2)] == ["$0.00", "$0.10", "$0.20"]
    assert [value_label(v, 2.5, "") for v in (0, 2.5, 5)] == ["0.0", "2.5", "5.0"]
    assert [value_label(v, 10, "") for v in (0, 10, 20)] == ["0", "10", "20"]


@pytest.mark.parametrize(("end", "expected"), [
    (20, ["0", "5 s", "10 s", "15 s", "20 s"]),
    (182, ["0", "1 min", "2 min", "3 min"]),
    (600, ["0", "2 min", "4 min", "6 min", "8 min", "10 min"]),
    (3600, ["0", "10 min", "20 min", "30 min", "40 min", "50 min", "1 h"]),
    (7200, ["0", "30 min", "1 h", "1 h 30 min", "2 h"]),  # the soak: was 0 s, 1800 s, … 7200 s
    (43200, ["0", "2 h", "4 h", "6 h", "8 h", "10 h", "12 h"]),
])
def test_the_time_axis_counts_in_seconds_minutes_or_hours(end: float, expected: list[str]) -> None:
    ticks = time_ticks(end)
    step = ticks[1] - ticks[0]
    assert [time_label(t, step) for t in ticks] == expected
