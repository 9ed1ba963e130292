"""The HTTPS server: the standard library's threaded HTTP server, with TLS per connection, limits and routing.

Why `http.server.ThreadingHTTPServer` (a thread per connection) rather than asyncio or a framework: every request
is CPU-bound Python (JSON, schema, rules, a cached solver verdict) under the GIL, so an event loop would add no
throughput, only a second concurrency model; the API server keeps a few long-lived HTTP/1.1 connections per
webhook, which threads serve with no extra hop; and the standard library adds no dependency to audit. What it
lacks is added here and tested:

* TLS is set up in the connection's thread, not in the accept loop, so a slow or silent client cannot stall
  `accept` (each connection gets the reloader's current `SSLContext`: certificate rotation without a restart).
  The first byte is peeked before the handshake: a plain-HTTP request gets a plain `400 Bad Request` telling
  it to use HTTPS, as Go's servers do, instead of a handshake error.
* Time limits: the handshake must finish within `handshake_timeout`; a request must arrive completely (request
  line, headers, body) within `request_timeout` of its first byte, however slowly it trickles (each read gets
  only the time left); an idle keep-alive connection is closed after `idle_timeout` (longer than the 90 s Go
  clients keep idle connections, so the API server closes first and never writes into a closing socket).
* Size limits: `max_body_bytes` (checked against Content-Length before reading), the standard library's
  64 KiB request line and 100 header lines; chunked bodies are refused (the API server sends Content-Length).
* At most `max_connections` connections are served at once; more are closed at once.
* Every answer to bad input is a 4xx with a one-line plain-text reason; an unexpected error is logged, never
  sent (no traceback in a response) — see `handlers.guarded`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from karpenter_policy.webhook.handlers import Handlers, Route, guarded
from karpenter_policy.webhook.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from karpenter_policy.webhook.metrics import Metrics
from karpenter_policy.webhook.review import BadReview, parse_review, response_body
from karpenter_policy.webhook.tls import CertificateReloader

HEALTHZ, READYZ, METRICS = "/healthz", "/readyz", "/metrics"
TLS_HANDSHAKE_RECORD = 0x16
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 4 * 1024 * 1024  # an AdmissionReview holds object and oldObject, each ≤ 1.5 MiB in etcd
    request_timeout: float = 10.0
    idle_timeout: float = 120.0
    handshake_timeout: float = 5.0
    max_connections: int = 256
    linger_bytes: int = 256 * 1024  # read and dropped after an early error, so the client sees the answer
    linger_seconds: float = 0.5


class _DeadlineReader(io.RawIOBase):
    """Socket reads that give each request only the time left before its deadline (set at its first byte)."""

    def __init__(self, sock: socket.socket, limits: Limits) -> None:
        super().__init__()
        self.sock, self.limits = sock, limits
        self.deadline: float | None = None
        self.first_byte_at = 0.0

    def readable(self) -> bool:
        return True

    def next_request(self) -> None:
        self.deadline = None

    def readinto(self, buffer: Any) -> int:
        if self.deadline is None:
            timeout = self.limits.idle_timeout
        else:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError("request deadline passed")
        self.sock.settimeout(timeout)
        count = self.sock.recv_into(buffer)
        if count and self.deadline is None:
            self.deadline = time.monotonic() + self.limits.request_timeout
            self.first_byte_at = time.perf_counter()
        return count


class _Writer:
    """`wfile` for what the standard library itself writes (a `100 Continue`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def write(self, data: bytes) -> int:
        self.sock.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "karpenter-policy-webhook"
    sys_version = ""
    server: WebhookServer

    def setup(self) -> None:
        self.connection = self.request
        self.reader = _DeadlineReader(self.connection, self.server.limits)
        self.rfile = io.BufferedReader(self.reader, 65536)
        self.wfile = _Writer(self.connection)  # type: ignore[assignment]
        self.path_label = ""

    def finish(self) -> None:
        pass  # the server closes the TLS socket

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the standard library's signature
        log.debug("%s " + format, self.client_address[0], *args)

    # --- one request --------------------------------------------------------------------------------------

    def handle_one_request(self) -> None:
        self.reader.next_request()
        self.path_label = ""
        self.body_read = False
        self.command = ""  # parse_request sets it; an answer before that must not find it missing
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:
                self.close_connection = True
                return
            if len(self.raw_requestline) > 65536:
                self.close_connection = True
                self._reply(400, "the request line is longer than 65536 bytes", "bad_request")
                return
            if not self.parse_request():  # it answered through send_error
                return
            self._dispatch()
        except TimeoutError:
            self.close_connection = True
            if self.reader.deadline is not None:  # a request had begun: tell the client why it is cut off
                self._reply_quietly(
                    400, f"the request did not arrive within {self.server.limits.request_timeout:g} s", "timeout"
                )
        except (OSError, ValueError):  # reset, TLS error, closed while reading
            self.close_connection = True
        except Exception:  # a bug: logged with its traceback here, a one-line 500 there
            log.exception("request %s %s failed", self.command, self.path_label)
            self.close_connection = True
            self._reply_quietly(500, "internal error (logged by the webhook)", "error")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's parse errors (bad request line, too many headers, bad version) as plain text;
        its one 5xx (505 for HTTP/2+ versions) is bad input too, answered 400."""
        self.close_connection = True
        reason = message or HTTPStatus(code).phrase
        self._reply(code if code < 500 else 400, reason, "bad_request")

    def _dispatch(self) -> None:
        path = self.path.split("?", 1)[0]  # the API server appends ?timeout=5s
        self.path_label = path
        server = self.server
        route = server.routes.get(path)
        if route is not None:
            if self.command != "POST":
                return self._reply(405, f"{path} takes POST", "bad_request", allow="POST")
            body = self._body()
            if body is not None:
                self._admit(route, body)
            return None
        if path in (HEALTHZ, READYZ, METRICS):
            if self.command not in ("GET", "HEAD"):
                return self._reply(405, f"{path} takes GET", "bad_request", allow="GET, HEAD")
            if path == METRICS:
                return self._reply(200, server.metrics.exposition(), "ok", content_type=METRICS_CONTENT_TYPE)
            if path == READYZ and not server.ready():
                return self._reply(503, "not ready", "not_ready")
            return self._reply(200, "ok", "ok")
        return self._reply(404, f"no such path {path[:200]!r}; served: {', '.join(sorted(server.routes))}", "not_found")

    def _body(self) -> bytes | None:
        """The request body, or None after answering why it cannot be read."""
        limit = self.server.limits.max_body_bytes
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._reply(400, "chunked request bodies are not supported: send Content-Length", "bad_request")
            return None
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            self.close_connection = True
            self._reply(400, "Content-Length is required", "bad_request")
            return None
        try:
            length = int(raw_length)
            if length < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            self._reply(400, f"Content-Length {raw_length[:40]!r} is not a byte count", "bad_request")
            return None
        if length > limit:
            self.close_connection = True
            self._reply(400, f"the request body of {length} bytes is over the limit of {limit} bytes", "bad_request")
            return None
        body = self.rfile.read(length)
        if len(body) < length:  # the client went away mid-body
            self.close_connection = True
            return None
        self.body_read = True
        return body

    def _admit(self, route: Route, body: bytes) -> None:
        try:
            request = parse_review(body)
        except BadReview as error:
            self._reply(400, f"not an admission.k8s.io/v1 AdmissionReview request: {error}", "bad_request")
            return
        response = guarded(route, request)
        if not response.allowed:  # an audit trail of denials (admissions are counted in the metrics only)
            first = response.message.split("\n", 1)[0]
            log.info("denied %s %s (uid %s): %s", self.path_label, request.name or "-", request.uid, first[:300])
        self._reply(200, response_body(request.uid, response), response.verdict, content_type="application/json")

    # --- answers --------------------------------------------------------------------------------------------

    def _reply(
        self,
        status: int,
        body: str | bytes,
        verdict: str,
        *,
        content_type: str = "text/plain; charset=utf-8",
        allow: str | None = None,
    ) -> None:
        if not self.body_read and self._sent_a_body():  # what is left of it would be read as the next request
            self.close_connection = True
        data = body if isinstance(body, bytes) else (body + "\n").encode("utf-8", "replace")
        phrase = HTTPStatus(status).phrase
        head = f"HTTP/1.1 {status} {phrase}\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        if allow:
            head += f"Allow: {allow}\r\n"
        if self.close_connection:
            head += "Connection: close\r\n"
        self.connection.settimeout(self.server.limits.request_timeout)
        if self.command == "HEAD":
            data = b""
        self.connection.sendall(head.encode("latin-1") + b"\r\n" + data)
        started = self.reader.first_byte_at or time.perf_counter()
        self.server.metrics.observe(self.path_label, verdict, time.perf_counter() - started)
        if self.close_connection and status >= 400:
            self._linger()

    def _sent_a_body(self) -> bool:
        headers = getattr(self, "headers", None)
        if headers is None:
            return True  # the request did not parse: assume the worst
        return bool(headers.get("Transfer-Encoding")) or headers.get("Content-Length", "0").strip() not in ("", "0")

    def _reply_quietly(self, status: int, body: str, verdict: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._reply(status, body, verdict)

    def _linger(self) -> None:
        """After an error answer on a connection about to close: signal the end of the answer, then read (and
        drop) what the client is still sending, briefly, so that closing with unread input does not reset the
        connection before the client has read the answer (what Go's server does too)."""
        _drain(self.connection, self.server.limits)


class WebhookServer(ThreadingHTTPServer):
    """`ThreadingHTTPServer` with TLS per connection (see the module docstring)."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handlers: Handlers,
        tls: CertificateReloader,
        metrics: Metrics,
        limits: Limits | None = None,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.routes: dict[str, Route] = handlers.routes()
        self.tls = tls
        self.metrics = metrics
        self.limits = limits or Limits()
        self.ready: Callable[[], bool] = ready or (lambda: True)
        self._open = 0
        self._open_lock = threading.Lock()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def server_bind(self) -> None:  # HTTPServer's looks the host name up in DNS: not needed, and slow
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            if self._open >= self.limits.max_connections:
                self.metrics.rejected_connections.inc()
                self.shutdown_request(request)
                return
            self._open += 1
            self.metrics.open_connections.set(self._open)
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start: undo the count
            self._closed()
            raise

    def _closed(self) -> None:
        with self._open_lock:
            self._open -= 1
            self.metrics.open_connections.set(self._open)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            log.exception("connection from %s failed", client_address)
        finally:
            self.shutdown_request(request)
            self._closed()

    def finish_request(self, request: Any, client_address: Any) -> None:
        raw: socket.socket = request
        with contextlib.suppress(OSError):  # small answers go out at once, not after the client's delayed ACK
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(self.limits.handshake_timeout)
        try:
            first = raw.recv(1, socket.MSG_PEEK)
        except OSError:
            self.metrics.handshake_failures.inc()
            return
        if not first:
            return
        if first[0] != TLS_HANDSHAKE_RECORD:
            self.metrics.handshake_failures.inc()
            self.metrics.observe("", "bad_request", 0.0)
            _plain_http_answer(raw, self.limits)
            return
        connection = self.tls.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        try:
            try:
                connection.do_handshake()
            except (OSError, ssl.SSLError, ValueError):
                self.metrics.handshake_failures.inc()
                return
            _Handler(connection, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.error("error on the connection from %s", client_address, exc_info=True)


def _plain_http_answer(raw: socket.socket, limits: Limits) -> None:
    """What Go's TLS servers answer to plain HTTP, in plain HTTP."""
    body = b"Client sent an HTTP request to an HTTPS server: this port speaks HTTPS only.\n"
    head = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        raw.settimeout(limits.handshake_timeout)
        raw.sendall(head.encode("ascii") + body)
    except OSError:
        return
    _drain(raw, limits)


def _drain(sock: socket.socket, limits: Limits) -> None:
    """Half-close `sock` (the client sees the end of the answer), then read and drop up to `linger_bytes` for at
    most `linger_seconds`. (On a TLS socket `shutdown` drops the TLS layer: what is drained is not decrypted.)"""
    deadline = time.monotonic() + limits.linger_seconds
    remaining = limits.linger_bytes
    try:
        sock.shutdown(socket.SHUT_WR)
        while remaining > 0 and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)
    except (OSError, ValueError):
        pass


def serve_in_thread(server: WebhookServer) -> threading.Thread:
    """Start `server.serve_forever` in a daemon thread (tests, benchmarks)."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    return thread
