"""The controller's HTTP endpoints on its metrics port: `/metrics`, `/healthz` and `/readyz` — and nothing else.

* `/metrics`: the Prometheus exposition of the controller's registry (Karpenter's metrics as its Go client writes
  them: `exposition`);
* `/healthz` (the liveness probe): 200 while every thread of the process runs — each controller's, the
  informers', the interruption poller's, the leader election's (which must also finish its rounds) — else 500 with
  why (the kubelet then restarts the container: a dead thread would otherwise leave a process that answers probes
  while pods stay pending, or a replica that can never lead again);
* `/readyz` (the readiness probe): 200 once the cluster state is synced and healthy (every informer listed, no
  watch failing), the constraint sets are loaded and the API server answers the leader election (silent for no
  longer than a lease duration) — a standby replica is ready without leading (the body says `leading` or
  `standby`; a leader past its renew deadline says `standby`) — else 503 with why;
* any other path: 404.

Served by a threaded `http.server` on its own thread; probes never wait on a controller. A client that sends
nothing is dropped after `idle_timeout` seconds, and at most `max_connections` are served at once (one more is
closed at once): whatever opens connections to the port, the process's threads stay bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from karpenter_policy.reconcile.exposition import exposition
from karpenter_policy.reconcile.runner import Health


class _BoundedServer(ThreadingHTTPServer):
    """A threaded server that serves at most `limit` connections at once and closes the others at once."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], limit: int) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(limit)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class ProbeServer:
    """See the module docstring. `health` is asked at every probe."""

    def __init__(
        self,
        address: str,
        port: int,
        registry: CollectorRegistry,
        health: Callable[[], Health],
        *,
        idle_timeout: float = 5.0,
        max_connections: int = 64,
    ) -> None:
        self.registry = registry
        self.health = health
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = idle_timeout  # the socket's: a silent or trickling client is dropped, its thread ends

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.answer(self)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
                return None  # probes every few seconds would flood the log

        self.httpd = _BoundedServer((address, port), Handler, max_connections)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="probes", daemon=True)

    def start(self) -> ProbeServer:
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(request, 200, exposition(self.registry), CONTENT_TYPE_LATEST)
            return
        if path not in ("/healthz", "/readyz"):
            self._send(request, 404, b"not found\n")
            return
        health = self.health()
        if path == "/healthz":
            ok = health.alive
            body = "ok" if ok else "; ".join(r for r in health.reasons if "thread" in r) or "not alive"
            self._send(request, 200 if ok else 500, f"{body}\n".encode())
            return
        ok = health.ready
        role = "leading" if health.leading else "standby"
        body = f"ok ({role})" if ok else "; ".join(health.reasons) or "not ready"
        self._send(request, 200 if ok else 503, f"{body}\n".encode())

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "text/plain") -> None:
        request.send_response(status)
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)


__all__ = ["ProbeServer"]
