"""Prometheus metrics exposed exactly as Karpenter's Go client exposes them, where prometheus-client would not.

Two kinds of metric differ between the clients:

* **counters**: Go exposes a counter under the name it was given (`karpenter_nodes_created 3`); prometheus-client
  always appends `_total` (`karpenter_nodes_created_total`), so every dashboard and alert written for Karpenter
  would find nothing. :class:`ExactCounter` is a labelled counter exposed under its own name, `# TYPE … counter`;
* **summaries**: Go reports quantiles over a sliding window (Karpenter's objectives 0, 0.5, 0.9, 0.99 and 1, over
  the last 10 minutes, Go's default); prometheus-client's Summary has only a count and a sum.
  :class:`WindowedSummary` keeps the observations of the window (at most `limit` per label set, the oldest dropped
  first) and reports their quantiles (NaN with none, as Go), and the count and sum of every observation.

:func:`exposition` writes a registry in the text format (0.0.4), these two kinds as Go writes them, the others as
prometheus-client does (histogram buckets, gauges and our `karpenter_policy_*_total` counters).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

#: Karpenter's summary objectives (`metrics.SummaryObjectives`).
QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)
#: Go's default window of a summary's quantiles (`prometheus.DefMaxAge`).
MAX_AGE = 600.0


def _key(name: str, labelnames: tuple[str, ...], values: tuple[str, ...]) -> tuple[str, ...]:
    """The label values of one series of a family (ValueError when they do not match its label names)."""
    if len(values) != len(labelnames):
        raise ValueError(f"{name} takes labels {labelnames}, not {values}")
    return tuple(str(v) for v in values)


class _ExactFamily(Metric):
    """A counter family whose samples carry the family's own name (see :func:`exposition`)."""


class _Child:
    """One label set of an :class:`ExactCounter`."""

    __slots__ = ("_counter", "_key")

    def __init__(self, counter: ExactCounter, key: tuple[str, ...]) -> None:
        self._counter, self._key = counter, key

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        with self._counter.lock:
            self._counter.values[self._key] = self._counter.values.get(self._key, 0.0) + amount


class ExactCounter(Collector):
    """A counter exposed under its own name (see the module docstring): `labels(*values).inc()`, or `inc()` when it
    has no labels. A label set appears once it was used (`labels(...)` alone makes it appear at 0, as Go's
    `WithLabelValues(...).Add(0)`)."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str] = (), registry: CollectorRegistry | None = None
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.values: dict[tuple[str, ...], float] = {} if self.labelnames else {(): 0.0}  # Go shows it at 0
        self.lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> _Child:
        """The child of that label set (created at 0)."""
        key = _key(self.name, self.labelnames, values)
        with self.lock:
            self.values.setdefault(key, 0.0)
        return _Child(self, key)

    def inc(self, amount: float = 1.0) -> None:
        """Add `amount` to the counter without labels."""
        self.labels().inc(amount)

    def value(self, *values: str) -> float:
        """The count of a label set (0 when never used)."""
        with self.lock:
            return self.values.get(tuple(values), 0.0)

    def describe(self) -> Iterable[Metric]:
        """The family, for the registry's check of duplicate names: its own name only, as exposed — not the
        `_total` and `_created` a prometheus-client counter would also take, so that v0.31's
        `karpenter_nodes_terminated` and v1.14.1's `karpenter_nodes_terminated_total` are two metrics, as Karpenter's
        two versions have them."""
        return [_ExactFamily(self.name, self.documentation, "unknown")]

    def collect(self) -> Iterable[Metric]:
        """The family with a sample per label set, exactly as counted."""
        family = _ExactFamily(self.name, self.documentation, "counter")
        with self.lock:
            items = sorted(self.values.items())
        for key, value in items:
            family.add_sample(self.name, dict(zip(self.labelnames, key, strict=True)), value)
        yield family


class _Window:
    __slots__ = ("count", "observed", "total")

    def __init__(self, limit: int) -> None:
        self.observed: deque[tuple[float, float]] = deque(maxlen=limit)  # (when, value)
        self.count = 0
        self.total = 0.0


class _Observer:
    __slots__ = ("_key", "_summary")

    def __init__(self, summary: WindowedSummary, key: tuple[str, ...]) -> None:
        self._summary, self._key = summary, key

    def observe(self, value: float) -> None:
        self._summary.observe_at(self._key, value)


class WindowedSummary(Collector):
    """A summary with Karpenter's quantiles over a sliding window (see the module docstring). `clock`: monotonic
    seconds (the controller's: a simulation's window is in virtual time)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_age: float = MAX_AGE,
        limit: int = 10_000,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.clock = clock
        self.max_age = max_age
        self.limit = limit
        self._windows: dict[tuple[str, ...], _Window] = {}
        self._lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> _Observer:
        """An observer of that label set."""
        return _Observer(self, _key(self.name, self.labelnames, values))

    def observe(self, value: float) -> None:
        """Observe a value of the summary without labels."""
        self.observe_at((), value)

    def observe_at(self, key: tuple[str, ...], value: float) -> None:
        """Observe a value of the label set `key`, stamped with the clock (the window keeps the latest ones)."""
        with self._lock:
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = _Window(self.limit)
            window.observed.append((self.clock(), value))
            window.count += 1
            window.total += value

    def describe(self) -> Iterable[Metric]:
        """The family, for the registry."""
        return [Metric(self.name, self.documentation, "summary")]

    def collect(self) -> Iterable[Metric]:
        """The family: each label set's quantiles over the observations within `max_age`, and the count and sum of
        every observation."""
        family = Metric(self.name, self.documentation, "summary")
        oldest = self.clock() - self.max_age
        with self._lock:
            for key, window in sorted(self._windows.items()):
                while window.observed and window.observed[0][0] < oldest:
                    window.observed.popleft()
                values = sorted(value for _, value in window.observed)
                labels = dict(zip(self.labelnames, key, strict=True))
                for q in QUANTILES:
                    family.add_sample(self.name, {**labels, "quantile": _quantile_text(q)}, quantile(values, q))
                family.add_sample(f"{self.name}_sum", labels, window.total)
                family.add_sample(f"{self.name}_count", labels, float(window.count))
        yield family


def quantile(ordered: Sequence[float], q: float) -> float:
    """The `q` quantile of values in ascending order: the value of rank ⌈q·n⌉ (the least for 0, the greatest for
    1); NaN for no value."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _quantile_text(q: float) -> str:
    return "0" if q == 0 else "1" if q == 1 else repr(q)


class _One(Collector):
    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterable[Metric]:
        yield self.metric


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in the text format (see the module docstring)."""
    parts = []
    for metric in registry.collect():
        if isinstance(metric, _ExactFamily):
            gauge = Metric(metric.name, metric.documentation, "gauge")
            gauge.samples = metric.samples
            typed = f"# TYPE {metric.name} ".encode()
            parts.append(generate_latest(_One(gauge)).replace(typed + b"gauge\n", typed + b"counter\n", 1))
        else:
            parts.append(generate_latest(_One(metric)))
    return b"".join(parts)


__all__ = ["MAX_AGE", "QUANTILES", "ExactCounter", "WindowedSummary", "exposition", "quantile"]
