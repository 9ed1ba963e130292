"""The charts of the simulation reports, drawn as inline SVG: a frame whose value axis has ticks at round numbers
(1, 2, 2.5 or 5 × a power of ten; whole numbers for counts, cents for dollars when they matter) and whose time axis
counts in seconds, minutes or hours as the run's length asks; step lines (a value holds until the next sample),
dashed lines, dots and dashed vertical markers, each element carrying the words the page shows under the pointer
(`data-value`); a legend of the colours above. No script, no network, the same bytes for the same data."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 560, 220  # a chart's size, unless told
LEFT, RIGHT, TOP, BOTTOM = 56, 36, 12, 30  # the margins around the plot: tick labels left and below
#: Candidate steps of the time axis, in seconds: round seconds, minutes, hours.
TIME_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
#: Most intervals on an axis.
MOST_INTERVALS = 6


def time_step(end: float) -> int:
    """The round step (seconds) that cuts 0..`end` into at most `MOST_INTERVALS` intervals."""
    return next((step for step in TIME_STEPS if end / step <= MOST_INTERVALS), TIME_STEPS[-1])


def time_ticks(end: float) -> list[int]:
    step = time_step(end)
    return [i * step for i in range(int(end // step) + 1)]


def time_label(seconds: float, step: int) -> str:
    """A tick of the time axis: `45 s` while the step is under a minute, else `30 min`, `1 h`, `1 h 30 min`."""
    if seconds == 0:
        return "0"
    if step < 60:
        return f"{seconds:g} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def value_ticks(highest: float, whole: bool = False) -> list[float]:
    """Ticks from 0 to a round number at or above `highest`, at the smallest round step (1, 2, 2.5 or 5 × 10^k;
    a whole number when `whole`) that needs at most `MOST_INTERVALS` intervals."""
    highest = highest if highest > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(highest / MOST_INTERVALS))
    steps = [m * power * scale for scale in (1, 10) for m in (1, 2, 2.5, 5)]
    fitting = [s for s in steps if math.ceil(highest / s - 1e-9) <= MOST_INTERVALS and not (whole and s % 1)]
    step = fitting[0] if fitting else max(1.0, steps[-1])
    count = math.ceil(highest / step - 1e-9)
    return [round(i * step, 10) for i in range(count + 1)]


def value_label(value: float, step: float, unit: str) -> str:
    """A tick of the value axis: `12`, `2.5`; dollars as `$3` or, with a step under a dollar, `$0.50`."""
    if unit == "$":
        return f"${value:,.0f}" if step >= 1 else f"${value:,.2f}"
    places = next(d for d in range(4) if abs(step * 10**d - round(step * 10**d)) < 1e-9 or d == 3)
    return f"{value:,.{places}f}"


@dataclass(frozen=True, slots=True)
class Line:
    """A series: its name (`data-series`), legend label, colour and (time, value) points in time order; drawn as
    a step line (a value holds until the next point) or, `straight`, point to point (a running total); `dashed`
    for a reference (a static group)."""

    name: str
    label: str
    colour: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False
    straight: bool = False


@dataclass(frozen=True, slots=True)
class Dot:
    """A point of a dot chart, with the words shown under the pointer."""

    at: float
    value: float
    text: str


@dataclass(frozen=True, slots=True)
class Marker:
    """A moment marked across the plot (a spot interruption): a dashed vertical line."""

    at: float
    text: str


@dataclass(frozen=True, slots=True)
class Frame:
    """Data to pixels in a chart of `width` × `height`: time 0..`end` left to right, value 0..`top` bottom to
    top."""

    end: float
    top: float
    width: int = WIDTH
    height: int = HEIGHT

    def x(self, at: float) -> float:
        return LEFT + (self.width - LEFT - RIGHT) * (at / self.end if self.end else 0.0)

    def y(self, value: float) -> float:
        return self.height - BOTTOM - (self.height - TOP - BOTTOM) * (value / self.top if self.top else 0.0)


def legend(items: Sequence[tuple[str, str, bool]]) -> str:
    """The colours of a chart: (label, colour, dashed) each."""
    keys = "".join(
        f'<span><i class="{"dash" if dashed else "key"}" style="--colour:{colour}"></i>{escape(label)}</span>'
        for label, colour, dashed in items
    )
    return f'<div class="legend">{keys}</div>'


def _axes(frame: Frame, ticks: Sequence[float], unit: str) -> list[str]:
    bottom, right = frame.height - BOTTOM, frame.width - RIGHT
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    parts = []
    for value in ticks:
        y = frame.y(value)
        if value:
            parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value_label(value, step, unit)}</text>')
    seconds = time_step(frame.end)
    for at in time_ticks(frame.end):
        x = frame.x(at)
        parts.append(f'<line class="tick" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 17}" text-anchor="middle">{time_label(at, seconds)}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}"/>')
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>')
    return parts


def path(frame: Frame, points: Sequence[tuple[float, float]], straight: bool = False) -> str:
    """`points` as an SVG path: a step line (each value holds until the next point, the last until the end of
    the frame) or, `straight`, segments from point to point."""
    parts: list[str] = []
    previous: float | None = None
    for at, value in points:
        x, y = frame.x(at), frame.y(value)
        if previous is not None and not straight:
            parts.append(f"L{x:.1f},{previous:.1f}")
        parts.append(f"{'M' if not parts else 'L'}{x:.1f},{y:.1f}")
        previous = y
    if previous is not None and not straight:
        parts.append(f"L{frame.x(frame.end):.1f},{previous:.1f}")
    return "".join(parts)


def chart(
    title: str,
    end: float,
    lines: Sequence[Line] = (),
    *,
    unit: str = "",
    whole: bool = False,
    markers: Sequence[Marker] = (),
    marker_colour: str = "#000",
    dots: Sequence[Dot] = (),
    dot_colour: str = "#000",
    note: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """A titled chart over 0..`end` seconds: `lines` as step lines, `dots` (class `pod`), `markers` (class
    `interruption`); the value axis from 0 to a round number above every value (`unit` "$" for dollars; `whole`
    for counts)."""
    highest = max([v for line in lines for _, v in line.points] + [d.value for d in dots], default=0.0)
    ticks = value_ticks(highest, whole)
    frame = Frame(end or 1.0, ticks[-1], width, height)
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">', *_axes(frame, ticks, unit)]
    for line in lines:
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        d = path(frame, line.points, line.straight)
        parts.append(f'<path class="series" data-series="{escape(line.name)}" d="{d}" fill="none" '
                     f'stroke="{line.colour}" stroke-width="2"{dash}/>')
    for dot in dots:
        parts.append(f'<circle class="pod" cx="{frame.x(dot.at):.1f}" cy="{frame.y(dot.value):.1f}" r="3" '
                     f'fill="{dot_colour}" fill-opacity="0.6" data-value="{escape(dot.text)}"/>')
    for marker in markers:
        x = frame.x(marker.at)
        parts.append(f'<line class="interruption" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{height - BOTTOM}" '
                     f'stroke="{marker_colour}" stroke-dasharray="3 3" stroke-width="1.5" '
                     f'data-value="{escape(marker.text)}"/>')
    parts.append("</svg>")
    keys = [(line.label, line.colour, line.dashed) for line in lines]
    keys += [("spot interruption", marker_colour, True)] if markers else []
    return (f'<figure><h3>{escape(title)}</h3>{legend(keys) if keys else ""}'
            f'{f"<p class=note>{escape(note)}</p>" if note else ""}{"".join(parts)}</figure>')


__all__ = ["Dot", "Frame", "Line", "Marker", "chart", "legend", "path", "time_label", "time_ticks", "value_ticks"]
