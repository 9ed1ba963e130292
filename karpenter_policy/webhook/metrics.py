"""Prometheus metrics of the webhook (prometheus-client), in a registry of its own per server.

* `karpenter_policy_webhook_requests_total{path, verdict}` — requests answered.
* `karpenter_policy_webhook_request_duration_seconds{path, verdict}` — from the first byte of the request to
  the last byte of the answer (histogram; buckets from 0.25 ms to 5 s: the API server gives up at 5 s).
* `karpenter_policy_webhook_tls_handshake_failures_total` — connections that did not complete a handshake
  (plain HTTP on the TLS port counts, and gets its HTTP 400).
* `karpenter_policy_webhook_certificate_reloads_total{result}` and
  `karpenter_policy_webhook_certificate_expiry_timestamp_seconds` — rotation (alert when expiry nears).
* `karpenter_policy_webhook_context_reloads_total{result}` — the policy context and pinning rules reloaded
  after their files changed (`ok`), or refused (`error`: the last good version stays).
* `karpenter_policy_webhook_open_connections`, `karpenter_policy_webhook_rejected_connections_total` (closed at
  once: every connection had a request under way), `karpenter_policy_webhook_evicted_connections_total` (idle
  or silent connections closed to make room for a new one).
* `karpenter_policy_webhook_deadline_exceeded_total{path}` — requests answered by the server because their
  work did not finish by the deadline; `karpenter_policy_webhook_worker_restarts_total` — workers replaced.
* `karpenter_policy_webhook_solver_cache_{hits,misses}_total`, `..._entries` — read at scrape time.
* the process's own: `process_*`, `python_info`, `python_gc_*` (`karpenter_policy.processmetrics`).

`path` is one of the served paths or `other` (any path a client invents would otherwise make a new series);
`verdict` is `allowed`, `patched`, `denied`, `bad_request`, `not_found`, `timeout` or `ok` (probes, metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from karpenter_policy.processmetrics import register_process_metrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER_PATH = "other"
disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series next to every counter: nothing here reads them

BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _CacheCollector(Collector):
    def __init__(self, stats: Callable[[], tuple[int, int, int]]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        hits, misses, entries = self.stats()
        yield CounterMetricFamily("karpenter_policy_webhook_solver_cache_hits", "Solver verdicts looked up.", hits)
        yield CounterMetricFamily("karpenter_policy_webhook_solver_cache_misses", "Solver verdicts computed.", misses)
        yield GaugeMetricFamily("karpenter_policy_webhook_solver_cache_entries", "Solver verdicts cached.", entries)


class Metrics:
    """The webhook's metrics; `paths` are the label values `path` may take besides `other`."""

    def __init__(self, paths: Iterable[str], cache_stats: Callable[[], tuple[int, int, int]] | None = None) -> None:
        self.registry = CollectorRegistry()
        register_process_metrics(self.registry)
        self.paths = frozenset(paths)
        self.requests = Counter(
            "karpenter_policy_webhook_requests",
            "Requests answered, per path and verdict.",
            ["path", "verdict"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "karpenter_policy_webhook_request_duration_seconds",
            "Time from a request's first byte to its answer's last byte, per path and verdict.",
            ["path", "verdict"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.handshake_failures = Counter(
            "karpenter_policy_webhook_tls_handshake_failures",
            "Connections that did not complete a TLS handshake (plain HTTP included).",
            registry=self.registry,
        )
        self.reloads = Counter(
            "karpenter_policy_webhook_certificate_reloads",
            "Serving certificate reloads after the files changed, per result (ok, error).",
            ["result"],
            registry=self.registry,
        )
        self.context_reloads = Counter(
            "karpenter_policy_webhook_context_reloads",
            "Policy context and pinning rules reloaded after their files changed, per result (ok; error: refused, "
            "the last good version stays).",
            ["result"],
            registry=self.registry,
        )
        self.expiry = Gauge(
            "karpenter_policy_webhook_certificate_expiry_timestamp_seconds",
            "When the serving certificate in use expires (Unix time).",
            registry=self.registry,
        )
        self.open_connections = Gauge(
            "karpenter_policy_webhook_open_connections", "Connections being served.", registry=self.registry
        )
        self.rejected_connections = Counter(
            "karpenter_policy_webhook_rejected_connections",
            "Connections closed at once: the connection limit was reached and every connection was at work.",
            registry=self.registry,
        )
        self.evicted_connections = Counter(
            "karpenter_policy_webhook_evicted_connections",
            "Idle or silent connections closed to make room for a new one at the connection limit.",
            registry=self.registry,
        )
        self.deadline_exceeded = Counter(
            "karpenter_policy_webhook_deadline_exceeded",
            "Requests whose admission work did not finish by their deadline (answered by the server).",
            ["path"],
            registry=self.registry,
        )
        self.worker_restarts = Counter(
            "karpenter_policy_webhook_worker_restarts",
            "Worker processes replaced (killed at a deadline, or ended).",
            registry=self.registry,
        )
        if cache_stats is not None:
            self.registry.register(_CacheCollector(cache_stats))

    def label(self, path: str) -> str:
        return path if path in self.paths else OTHER_PATH

    def observe(self, path: str, verdict: str, seconds: float) -> None:
        label = self.label(path)
        self.requests.labels(label, verdict).inc()
        self.latency.labels(label, verdict).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
