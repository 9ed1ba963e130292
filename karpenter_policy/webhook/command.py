"""`karpenter-policy webhook`: options in, a running server out (and the start-up errors as exit code 2).

Start-up order: certificates (`--self-signed DIR` makes them when absent, and prints the caBundle), the catalog,
the policy context and pinning rules, the checker (warmed up: the solvers' tables built, the schema validators
compiled; then everything built so far is frozen out of the garbage collector's sweeps), the worker processes
(forked from that warm state, before any thread runs), then the socket. `/readyz` answers 200 from then on.

SIGTERM (or SIGINT) drains, logging each step: `/readyz` turns 503 and every answer carries `Connection: close`;
the server keeps serving for `--shutdown-delay` seconds (while the endpoints controller takes the pod out of the
Service); then it stops accepting, closes the idle keep-alive connections, waits — at most the drain timeout,
`--request-timeout` + `--admission-timeout` — until every accepted request is answered, ends the workers and
exits 0. SIGHUP is logged and ignored: the certificate reloads by itself when its files change, and so do the
policy context and pinning rules (`reload`: a version that does not load is refused, the last good one stays; at
start-up one that does not load stops the webhook, so a bad roll-out never takes traffic).

The log goes to stderr in `--log-format`: `text`, Karpenter's console format, or `json`, one object per line — the
controller's formats (:mod:`karpenter_policy.logformat`), the webhook's loggers shown as `webhook…` — from
`--log-level` up (`debug`, `info`, `warn`, `error`).
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from karpenter_policy import logformat
from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.options import OptionError, catalog_option, values_option
from karpenter_policy.webhook.certs import ensure_self_signed, service_names
from karpenter_policy.webhook.checks import DEFAULT_WEBHOOK_TIMEOUT_MS, Checker
from karpenter_policy.webhook.context import ContextError, ContextSource, PolicyContext
from karpenter_policy.webhook.flags import WebhookFlags
from karpenter_policy.webhook.handlers import Handlers
from karpenter_policy.webhook.metrics import Metrics
from karpenter_policy.webhook.pinning import PolicyPinner
from karpenter_policy.webhook.reload import ContextReloader
from karpenter_policy.webhook.server import HEALTHZ, METRICS, READYZ, Limits, WebhookServer, serve_in_thread
from karpenter_policy.webhook.solvercache import DEFAULT_CACHE_SIZE
from karpenter_policy.webhook.tls import DEFAULT_RELOAD_INTERVAL, CertificateReloader
from karpenter_policy.webhook.workers import DEFAULT_WORKERS, WorkerPool

log = logging.getLogger("karpenter_policy.webhook")


class StartupError(Exception):
    """The webhook cannot start (exit 2)."""


@dataclass(slots=True)
class WebhookOptions:
    cert_file: str | None = None
    key_file: str | None = None
    self_signed: str | None = None
    generate_only: bool = False
    dns_names: Sequence[str] = ()
    address: str = "0.0.0.0"
    port: int = 8443
    policies: Sequence[str] = ()
    constraints: str | None = None
    pinning: Sequence[str] = ()
    values: Any = None
    catalog_file: str | None = None
    region: str | None = None
    timeout_ms: int = DEFAULT_WEBHOOK_TIMEOUT_MS
    cache_size: int = DEFAULT_CACHE_SIZE
    limits: Limits = field(default_factory=Limits)
    reload_interval: float = DEFAULT_RELOAD_INTERVAL
    shutdown_delay: float = 5.0
    workers: int = DEFAULT_WORKERS
    log_format: str = logformat.TEXT
    log_level: str = logformat.DEFAULT_LEVEL

    @property
    def drain_timeout(self) -> float:
        """How long a drain waits for accepted requests: the longest one can take to arrive and be worked on."""
        return self.limits.request_timeout + self.limits.admission_timeout


class Webhook:
    """A built (not yet started) webhook server and its parts."""

    def __init__(self, options: WebhookOptions, catalog: Catalog | None = None) -> None:
        self.options = options
        self._draining = threading.Event()
        self._warm = threading.Event()
        self.ca_bundle: str | None = None
        if options.self_signed:
            files = ensure_self_signed(options.self_signed, options.dns_names or service_names())
            cert_file, key_file = str(files.cert), str(files.key)
            self.ca_bundle = files.ca_bundle()
        elif options.cert_file and options.key_file:
            cert_file, key_file = options.cert_file, options.key_file
        else:
            raise StartupError("give --tls-cert-file and --tls-private-key-file, or --self-signed DIR")
        try:
            self.catalog = catalog or catalog_option(options.catalog_file, options.region)
        except OptionError as error:
            raise StartupError(str(error)) from None
        if options.region and options.region != self.catalog.region:
            raise StartupError(f"--region {options.region} does not match the catalog's {self.catalog.region}")
        source = ContextSource(
            options.policies, options.constraints, options.pinning, options.values, self.catalog.region
        )
        self.reloader = ContextReloader(source, self._apply, None, options.reload_interval)
        try:
            context, pinner = self.reloader.load()
        except ContextError as error:
            raise StartupError(str(error)) from None
        self.context, self.pinner = context, pinner
        self.checker = self._checker(context)
        self.handlers = Handlers(self.checker, pinner)
        self.routes = self.handlers.routes()
        self.pool = WorkerPool(
            self.routes, options.workers, self.checker.cache_stats, lambda: self.metrics.worker_restarts.inc()
        )
        self.metrics = Metrics([*self.routes, HEALTHZ, READYZ, METRICS], self.pool.cache_stats)
        self.reloader.metrics = self.metrics
        try:
            self.tls = CertificateReloader(cert_file, key_file, self.metrics, options.reload_interval)
        except (OSError, ValueError) as error:
            raise StartupError(f"cannot load the serving certificate {cert_file} / key {key_file}: {error}") from None
        # What start-up built (the catalog, the solvers' tables, compiled schemas: ~60,000 objects) lives as long
        # as the process; a full collection would walk it all (≈ 30 ms, a latency spike) for nothing. Freezing
        # moves it out of the collector's generations.
        gc.collect()
        gc.freeze()
        self.pool.start()
        try:
            self.server = WebhookServer(
                (options.address, options.port),
                self.routes,
                self.pool,
                self.tls,
                self.metrics,
                options.limits,
                self.ready,
            )
        except OSError as error:
            self.pool.stop()
            raise StartupError(f"cannot listen on {options.address}:{options.port}: {error}") from None
        self._warm.set()

    def _checker(self, context: PolicyContext) -> Checker:
        """A warmed-up checker (solver tables built, schema validators compiled) for `context`."""
        options = self.options
        checker = Checker(self.catalog, timeout_ms=options.timeout_ms, context=context, cache_size=options.cache_size)
        checker.warm_up()
        return checker

    def _apply(self, context: PolicyContext, pinner: PolicyPinner) -> None:
        """Serve a reloaded context and pinning rules: a new checker and handlers, and worker processes forked
        with them (`WorkerPool.reload`: requests under way finish on the old ones)."""
        checker = self._checker(context)
        handlers = Handlers(checker, pinner)
        routes = handlers.routes()
        self.pool.reload(routes, checker.cache_stats)
        self.context, self.pinner, self.checker, self.handlers, self.routes = context, pinner, checker, handlers, routes

    @property
    def port(self) -> int:
        return self.server.port

    def ready(self) -> bool:
        return self._warm.is_set() and not self._draining.is_set()

    def start(self) -> threading.Thread:
        """Serve in a background thread (tests, benchmarks); `stop()` ends it."""
        self.tls.start()
        self.reloader.start()
        return serve_in_thread(self.server)

    def serve_forever(self) -> None:
        self.tls.start()
        self.reloader.start()
        self.server.serve_forever(poll_interval=0.5)

    def drain_then_stop(self) -> None:
        """Report not ready and answer with `Connection: close`; after `shutdown_delay` seconds stop serving
        (`serve_forever` returns; `finish` completes the drain)."""
        if self._draining.is_set():
            log.info("already draining")
            return
        log.info(
            "draining: /readyz answers 503, answers close their connections; serving %g s more",
            self.options.shutdown_delay,
        )
        self._draining.set()
        self.server.begin_drain()
        timer = threading.Timer(self.options.shutdown_delay, self.server.shutdown)
        timer.daemon = True
        timer.start()

    def finish(self, wait: float | None = None) -> int:
        """After `serve_forever` returned: stop accepting, close idle keep-alive connections, wait (at most `wait`,
        default the drain timeout) for every accepted request to be answered, end the workers. The number of
        connections cut off (0: every accepted request was answered)."""
        self.server.server_close()
        log.info("stopped accepting connections")
        closed = self.server.close_idle()
        open_now = self.server.open_connections()
        log.info("closed %d idle keep-alive connections; waiting for %d connections to finish", closed, open_now)
        timeout = self.options.drain_timeout if wait is None else wait
        left = self.server.wait_closed(timeout)
        if left:
            log.warning("%d connections still open after %g s: cut off", left, timeout)
        else:
            log.info("every accepted request was answered")
        self.reloader.stop()
        self.server.release()
        self.pool.stop()
        self.tls.stop()
        log.info("workers stopped")
        return left

    def stop(self) -> None:
        """Stop at once (tests, benchmarks): no shutdown delay, a short wait for open requests."""
        self._draining.set()
        self.server.begin_drain()
        self.server.shutdown()
        self.finish(wait=2.0)


def main(flags: WebhookFlags) -> int:
    """`karpenter-policy webhook` with its flags (`flags`); the exit code."""
    try:
        options = webhook_options(flags)
    except StartupError as error:
        print(f"karpenter-policy webhook: {error}", file=sys.stderr)
        return 2
    return run(options)


def run(options: WebhookOptions) -> int:
    """Build and serve until SIGTERM / SIGINT; the exit code."""
    logformat.configure(sys.stderr, options.log_format, logformat.level_of(options.log_level))
    if options.generate_only:
        if not options.self_signed:
            print("karpenter-policy webhook: --generate-only needs --self-signed DIR", file=sys.stderr)
            return 2
        files = ensure_self_signed(options.self_signed, options.dns_names or service_names())
        print(files.ca_bundle())
        return 0
    try:
        webhook = Webhook(options)
    except StartupError as error:
        print(f"karpenter-policy webhook: {error}", file=sys.stderr)
        return 2
    if webhook.ca_bundle is not None:
        print(f"caBundle: {webhook.ca_bundle}", flush=True)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        webhook.drain_then_stop()

    def on_hangup(signum: int, frame: FrameType | None) -> None:
        log.info(
            "received SIGHUP: ignored (the certificate, the policies, constraint sets and pinning rules reload by "
            "themselves when their files change)"
        )

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_hangup)
    log.info(
        "serving https://%s:%d (%s; context: %s; %d pinning rules)",
        options.address,
        webhook.port,
        ", ".join(sorted(webhook.handlers.routes())),
        webhook.reloader.source.describe(),
        len(webhook.pinner),
    )
    webhook.serve_forever()
    webhook.finish()
    log.info("stopped")
    return 0


def webhook_options(flags: WebhookFlags) -> WebhookOptions:
    """The server's configuration from the `webhook` flags: the `--values` file read, the limits gathered. Raises
    StartupError for a `--values` file that cannot be read."""
    try:
        values = values_option(flags.values_file or None)
    except OptionError as error:
        raise StartupError(str(error)) from None
    limits = Limits(
        max_body_bytes=flags.max_body_bytes,
        request_timeout=flags.request_timeout,
        idle_timeout=flags.idle_timeout,
        max_connections=flags.max_connections,
        max_connections_per_client=flags.max_connections_per_client,
        handshake_timeout=flags.handshake_timeout,
        admission_timeout=flags.admission_timeout,
    )
    return WebhookOptions(
        cert_file=flags.tls_cert_file or None,
        key_file=flags.tls_private_key_file or None,
        self_signed=flags.self_signed or None,
        generate_only=flags.generate_only,
        dns_names=flags.dns_names,
        address=flags.address,
        port=flags.port,
        policies=flags.policies,
        constraints=flags.constraints or None,
        pinning=flags.pinning,
        values=values,
        catalog_file=flags.catalog_file or None,
        region=flags.region or None,
        timeout_ms=flags.timeout_ms,
        cache_size=flags.solver_cache,
        limits=limits,
        reload_interval=flags.reload_interval,
        shutdown_delay=flags.shutdown_delay,
        workers=flags.workers,
        log_format=flags.log_format,
        log_level=flags.log_level,
    )
