"""The HTTPS server: the standard library's threaded HTTP server, with TLS per connection, limits and routing.

Why `http.server.ThreadingHTTPServer` (a thread per connection) rather than asyncio or a framework: the API
server keeps a few long-lived HTTP/1.1 connections per webhook, which threads serve with no extra hop; the
admission work itself runs in worker processes (`workers`), so a connection's thread only parses and waits;
and the standard library adds no dependency to audit. What it lacks is added here and tested
(docs/hardening-webhook.md is the user's account):

* A new connection waits in `_WaitingRoom` (one thread polling them all) until its first byte arrives; only
  then does it get a thread of its own. TLS is set up in that thread, not in the accept loop, so a slow or
  silent client cannot stall `accept` (each connection gets the reloader's current `SSLContext`: certificate
  rotation without a restart).
  The first byte is peeked before the handshake: a plain-HTTP request gets a plain `400 Bad Request` telling
  it to use HTTPS, as Go's servers do, instead of a handshake error.
* Time limits, each a total, however slowly bytes trickle in: the first byte and the whole handshake within
  `handshake_timeout`; a new connection's first request must begin within `request_timeout`; a request must
  arrive completely (request line, headers, body) within `request_timeout` of its first byte; an idle
  keep-alive connection is closed after `idle_timeout` (longer than the 90 s Go clients keep idle connections,
  so the API server closes first and never writes into a closing socket).
* Admission deadline: the work for a request must be done by `min(?timeout= of the API server,
  admission_timeout)` minus a margin (`deadline_seconds`), counted from the request's first byte; past it the
  server answers itself (`handlers.deadline_response`).
* Size and syntax: `max_body_bytes`, checked against Content-Length before reading (and before `100 Continue`)
  and, for a chunked body, as its chunks arrive: a body over it is answered 413, and what the client still sends
  is read and dropped (up to `oversized_drain_bytes`, within the request's time) so that it reads the answer
  instead of a reset; the standard library's 64 KiB request line and 100 header lines; Content-Length must be
  ASCII digits and appear once (not `+2`, `1_0`), and not with Transfer-Encoding; malformed or folded header
  lines are refused; JSON numbers are read strictly (`review.parse_json`).
* At most `max_connections` connections are open at once, and at most `max_connections_per_client` from one
  client address. When one more arrives over either, the connection least likely to be a client at work (of
  all, or of that client's) is closed to make room: first one that has sent nothing yet, then one that finished
  its handshake but sent no request, then the keep-alive connection idle the longest, then one still in its
  handshake, then one whose request has been arriving for over `receiving_grace` (a client trickling its bytes)
  — oldest first; connections younger than `receiving_grace` in their state come after all of these (a client
  that just connected, or whose last answer just went out — a kubelet's probe between its two requests — is spared
  while older ones hold slots), and a connection whose request has arrived whole,
  or began arriving within `receiving_grace`, is never closed. So a flood of idle, silent or
  trickling connections cannot lock out the API server or the kubelet's probes (each probe is a new
  connection). Only when every connection is at work is the new one closed.
* Drain (`begin_drain`, `close_idle`, `wait_closed`): every answer from then on carries `Connection: close`;
  once the listener is closed, idle keep-alive connections are closed and the server waits for every accepted
  request to be answered.
* Every answer to bad input is a 4xx with a one-line plain-text reason; an unexpected error is logged, never
  sent (no traceback in a response) — see `handlers.guarded`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import select
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs

from karpenter_policy.webhook.handlers import Route, deadline_response
from karpenter_policy.webhook.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from karpenter_policy.webhook.metrics import Metrics
from karpenter_policy.webhook.review import AdmissionResponse, BadReview, parse_review, response_body
from karpenter_policy.webhook.tls import CertificateReloader

HEALTHZ, READYZ, METRICS = "/healthz", "/readyz", "/metrics"
TLS_HANDSHAKE_RECORD = 0x16
log = logging.getLogger(__name__)

_CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")
_GO_DURATION = re.compile(r"(?:([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|m|s|ms|us|µs|ns))+")
_GO_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|ms|m|s|us|µs|ns)")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 4 * 1024 * 1024  # an AdmissionReview holds object and oldObject, each ≤ 1.5 MiB in etcd
    request_timeout: float = 10.0
    idle_timeout: float = 120.0
    handshake_timeout: float = 5.0
    max_connections: int = 256
    max_connections_per_client: int = 64  # a quarter: one address (a flood's) cannot take every slot
    receiving_grace: float = 1.0  # a request still arriving after this long may be closed to make room
    oversized_drain_bytes: int = 16 * 1024 * 1024  # of a body over the limit, read and dropped to answer 413
    admission_timeout: float = 10.0  # the cap on a request's deadline (the API server allows at most 30 s)
    linger_bytes: int = 256 * 1024  # read and dropped after an early error, so the client sees the answer
    linger_seconds: float = 0.5


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration as the API server writes `?timeout=` (`5s`, `1m30s`, `500ms`), else None."""
    if not _GO_DURATION.fullmatch(text):
        return None
    return sum(float(number) * _GO_UNITS[unit] for number, unit in _GO_DURATION_PART.findall(text))


def deadline_seconds(query: str, limits: Limits) -> float:
    """How long the admission work of a request may take: the API server's `?timeout=` (when it parses and is
    positive) capped by `limits.admission_timeout`, less a margin for the answer to travel back (a quarter of
    it, at most 0.5 s)."""
    values = parse_qs(query).get("timeout", [])
    asked = go_duration(values[0]) if values else None
    budget = min(asked, limits.admission_timeout) if asked else limits.admission_timeout
    return budget - min(0.5, budget / 4)


class Admitter(Protocol):
    """Runs a route's handler on a request; None when it is not done by the deadline (`workers.WorkerPool`)."""

    def run(self, path: str, body: bytes, deadline: float) -> AdmissionResponse | None: ...


# --- connections --------------------------------------------------------------------------------------------

# A connection's state; the order is the order in which connections are closed to make room for a new one.
# RECEIVING: a request has begun but has not arrived whole; BUSY: it has, and is being answered.
SILENT, NO_REQUEST, IDLE, HANDSHAKE, RECEIVING, BUSY = range(6)


@dataclass(eq=False, slots=True)
class _Connection:
    sock: socket.socket  # the accepted socket, then the TLS socket over it
    state: int
    since: float
    client_address: Any
    closed_by_server: bool = False

    def abort(self) -> None:
        """Shut the socket down under its thread: a blocked read returns at once. (The base class's shutdown:
        the TLS socket's own drops its TLS object, which its thread may be using.)"""
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)


def _wait_for(sock: socket.socket, writable: bool, seconds: float) -> bool:
    """Whether `sock` is or becomes readable (writable) within `seconds` (poll: no descriptor-number limit)."""
    if sock.fileno() < 0:
        return False
    poller = select.poll()
    poller.register(sock, select.POLLOUT if writable else select.POLLIN)
    return bool(poller.poll(max(seconds, 0.0) * 1000))


class _WaitingRoom:
    """New connections until their first byte arrives, watched by one thread with `poll`: a connection that sends
    nothing costs no thread of its own (a flood of silent sockets would otherwise cost a thread start each time
    one is reopened). A connection whose first byte arrives goes to `on_ready` (which gives it a thread); one
    still silent after `timeout` seconds goes to `on_expired`."""

    def __init__(
        self, on_ready: Callable[[_Connection], None], on_expired: Callable[[_Connection], None], timeout: float
    ) -> None:
        self.on_ready, self.on_expired, self.timeout = on_ready, on_expired, timeout
        self._members: dict[int, _Connection] = {}
        self._poller = select.poll()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._poller.register(self._wake_read, select.POLLIN)
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="webhook-waiting-room", daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"x")

    def add(self, connection: _Connection) -> None:
        with self._lock:
            self._members[connection.sock.fileno()] = connection
            self._poller.register(connection.sock, select.POLLIN)
        self._wake()  # a poll under way does not see the new member

    def remove(self, connection: _Connection) -> bool:
        """Take `connection` out if it is still waiting (True), so that nothing else happens to it here."""
        with self._lock:
            fd = connection.sock.fileno()
            if self._members.get(fd) is not connection:
                return False
            del self._members[fd]
            self._poller.unregister(fd)
            return True

    def _run(self) -> None:
        last_sweep = time.monotonic()
        while not self._stopped:
            events = self._poller.poll(100)
            ready: list[_Connection] = []
            expired: list[_Connection] = []
            now = time.monotonic()
            with self._lock:
                for fd, _ in events:
                    if fd == self._wake_read:
                        with contextlib.suppress(BlockingIOError, OSError):
                            os.read(self._wake_read, 4096)
                    elif (connection := self._members.pop(fd, None)) is not None:
                        self._poller.unregister(fd)
                        ready.append(connection)
                if now - last_sweep >= 0.1:
                    last_sweep = now
                    for fd, connection in list(self._members.items()):
                        if now - connection.since >= self.timeout:
                            del self._members[fd]
                            self._poller.unregister(fd)
                            expired.append(connection)
            for connection in ready:
                self.on_ready(connection)
            for connection in expired:
                self.on_expired(connection)

    def stop(self) -> None:
        """End the thread; the connections still waiting are expired."""
        self._stopped = True
        self._wake()
        self._thread.join()
        with self._lock:
            left = list(self._members.values())
            self._members.clear()
        for connection in left:
            self.on_expired(connection)
        os.close(self._wake_read)
        os.close(self._wake_write)


class _DeadlineReader(io.RawIOBase):
    """Socket reads that give each request only the time left before its deadline (set at its first byte); a
    new connection's first request must begin within `request_timeout`, a later one within `idle_timeout`."""

    def __init__(self, sock: socket.socket, limits: Limits, on_first_byte: Callable[[], None]) -> None:
        super().__init__()
        self.sock, self.limits, self.on_first_byte = sock, limits, on_first_byte
        self.deadline: float | None = None
        self.first_byte_at = 0.0
        self.first_byte_monotonic = 0.0
        self.requests = 0

    def readable(self) -> bool:
        return True

    def next_request(self) -> None:
        self.deadline = None

    def readinto(self, buffer: Any) -> int:
        if self.deadline is None:
            timeout = self.limits.idle_timeout if self.requests else self.limits.request_timeout
        else:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError("request deadline passed")
        self.sock.settimeout(timeout)
        count = self.sock.recv_into(buffer)
        if count and self.deadline is None:
            self.first_byte_monotonic = time.monotonic()
            self.deadline = self.first_byte_monotonic + self.limits.request_timeout
            self.first_byte_at = time.perf_counter()
            self.requests += 1
            self.on_first_byte()
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
    request: _Connection  # the standard library's "request" is the connection, with its state

    def setup(self) -> None:
        self.tracked = self.request
        self.connection = self.tracked.sock
        self.reader = _DeadlineReader(
            self.connection, self.server.limits, lambda: self.server.set_state(self.tracked, RECEIVING)
        )
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
        self.expects_continue = False
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
            if problem := self._header_problem():
                self.close_connection = True
                self._reply(400, problem, "bad_request")
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
        finally:
            if not self.close_connection:
                self.server.set_state(self.tracked, IDLE)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's parse errors (bad request line, too many headers, bad version) as plain text;
        its one 5xx (505 for HTTP/2+ versions) is bad input too, answered 400."""
        self.close_connection = True
        reason = message or HTTPStatus(code).phrase
        self._reply(code if code < 500 else 400, reason, "bad_request")

    def _header_problem(self) -> str:
        """Why the header block is not strict HTTP/1.1 ("" when it is): a line that is not `name: value`, a
        folded line, Content-Length twice."""
        headers = self.headers
        if headers.defects or headers.get_payload():
            return "a malformed header line (expected `Name: value`, no space before the colon)"
        if any("\r" in value or "\n" in value for value in headers.values()):
            return "folded header lines are not allowed"
        if len(headers.get_all("Content-Length") or ()) > 1:
            return "Content-Length is given more than once"
        return ""

    def _dispatch(self) -> None:
        path, _, query = self.path.partition("?")  # the API server appends ?timeout=5s
        self.path_label = path
        server = self.server
        route = server.routes.get(path)
        if route is not None:
            if self.command != "POST":
                server.set_state(self.tracked, BUSY)
                return self._reply(405, f"{path} takes POST", "bad_request", allow="POST")
            body = self._body()
            server.set_state(self.tracked, BUSY)  # arrived whole (or answered): no longer a slow sender
            if body is not None:
                self._admit(route, body, deadline_seconds(query, server.limits))
            return None
        server.set_state(self.tracked, BUSY)
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
        encoding = self.headers.get("Transfer-Encoding")
        if encoding is not None:
            if encoding.strip(" \t").lower() != "chunked" or self.headers.get("Content-Length") is not None:
                self.close_connection = True
                self._reply(400, f"Transfer-Encoding {encoding[:40]!r} is not supported: send chunked or "
                            "Content-Length, not both", "bad_request")
                return None
            self._continue()
            return self._chunked_body(limit)
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            self.close_connection = True
            self._reply(400, "Content-Length is required", "bad_request")
            return None
        if not _CONTENT_LENGTH.fullmatch(raw_length.strip(" \t")):  # int() would take "+2", "1_0", "٣"
            self.close_connection = True
            self._reply(400, f"Content-Length {raw_length[:40]!r} is not a byte count", "bad_request")
            return None
        length = int(raw_length)
        if length > limit:
            self._too_large(f"the request body of {length} bytes is over the limit of {limit} bytes", length)
            return None
        self._continue()
        body = self.rfile.read(length)
        if len(body) < length:  # the client went away mid-body
            self.close_connection = True
            return None
        self.body_read = True
        return body

    def _chunked_body(self, limit: int) -> bytes | None:
        """A chunked body (RFC 9112 section 7.1), read while it stays within `limit`: a 413 as soon as the chunks
        add up to more, before the rest is read. None after answering why it cannot be read."""
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1026)
            if not line.endswith(b"\n"):  # the client went away, or a size line longer than any real one
                self.close_connection = True
                if line:
                    self._reply(400, "a chunk size line is malformed or too long", "bad_request")
                return None
            digits = line.split(b";", 1)[0].strip(b" \t\r\n")
            if not digits or len(digits) > 16 or not all(c in b"0123456789abcdefABCDEF" for c in digits):
                self.close_connection = True
                self._reply(400, f"chunk size {digits[:40]!r} is not hexadecimal", "bad_request")
                return None
            chunk = int(digits, 16)
            if chunk == 0:
                break
            size += chunk
            if size > limit:
                self._too_large(f"the chunked request body is over the limit of {limit} bytes", None)
                return None
            data = self.rfile.read(chunk)
            if len(data) < chunk or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                self.close_connection = True
                return None
            parts.append(data)
        while True:  # trailer fields, up to the empty line
            line = self.rfile.readline(65537)
            if not line.endswith(b"\n") or len(line) > 65536:
                self.close_connection = True
                return None
            if line in (b"\r\n", b"\n"):
                break
        self.body_read = True
        return b"".join(parts)

    def _too_large(self, reason: str, length: int | None) -> None:
        """Answer 413 and close. With `Expect: 100-continue` the client has sent no body yet; otherwise what it
        sends (up to `oversized_drain_bytes` within the request's time) is read and dropped after the answer, so
        that the client, busy writing, reads the 413 instead of a reset connection."""
        self.close_connection = True
        limits = self.server.limits
        linger = (limits.linger_bytes, limits.linger_seconds)
        if not self.expects_continue:
            # The drain reads the raw socket (TLS records: each adds a header and a tag to its ≤ 16 KiB of body),
            # so it reads the declared length plus that framing; stopping short of it resets the connection while
            # the client still writes, and the client sees the reset instead of the 413.
            framed = length + length // 32 + 64 * 1024 if length is not None else limits.oversized_drain_bytes
            most = min(framed, limits.oversized_drain_bytes)
            seconds = (self.reader.deadline or time.monotonic()) - time.monotonic()
            linger = (max(most, limits.linger_bytes), max(seconds, limits.linger_seconds))
        self._reply(413, reason, "bad_request", linger=linger)

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue`: the standard library answers `100 Continue` at once; here it is sent only when
        the body is about to be read (`_continue`), so a body over the limit is refused before it is sent."""
        self.expects_continue = True
        return True

    def _continue(self) -> None:
        if self.expects_continue:
            self.expects_continue = False
            self.connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _admit(self, route: Route, body: bytes, seconds: float) -> None:
        try:
            request = parse_review(body)
        except BadReview as error:
            self._reply(400, f"not an admission.k8s.io/v1 AdmissionReview request: {error}", "bad_request")
            return
        deadline = (self.reader.first_byte_monotonic or time.monotonic()) + seconds
        response = self.server.admitter.run(self.path_label, body, deadline)
        if response is None:
            self.server.metrics.deadline_exceeded.labels(self.server.metrics.label(self.path_label)).inc()
            response = deadline_response(route, seconds)
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
        linger: tuple[int, float] | None = None,
    ) -> None:
        if not self.body_read and self._sent_a_body():  # what is left of it would be read as the next request
            self.close_connection = True
        if self.server.draining:  # the client is to go elsewhere: this replica is stopping
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
            limits = self.server.limits
            _drain(self.connection, *(linger or (limits.linger_bytes, limits.linger_seconds)))

    def _sent_a_body(self) -> bool:
        headers = getattr(self, "headers", None)
        if headers is None:
            return True  # the request did not parse: assume the worst
        return bool(headers.get("Transfer-Encoding")) or headers.get("Content-Length", "0").strip() not in ("", "0")

    def _reply_quietly(self, status: int, body: str, verdict: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._reply(status, body, verdict)


class WebhookServer(ThreadingHTTPServer):
    """`ThreadingHTTPServer` with TLS per connection and the connection management of the module docstring."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        routes: dict[str, Route],
        admitter: Admitter,
        tls: CertificateReloader,
        metrics: Metrics,
        limits: Limits | None = None,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.routes = routes
        self.admitter = admitter
        self.tls = tls
        self.metrics = metrics
        self.limits = limits or Limits()
        self.ready: Callable[[], bool] = ready or (lambda: True)
        self.draining = False
        self._connections: set[_Connection] = set()  # open and not closed to make room
        self._running = 0  # connection threads still running (closed-to-make-room ones included)
        self._lock = threading.Condition()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self._waiting = _WaitingRoom(self._start_thread, self._expire, self.limits.handshake_timeout)

    def server_bind(self) -> None:  # HTTPServer's looks the host name up in DNS: not needed, and slow
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    # --- admission of connections ---------------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        tracked = _Connection(request, SILENT, time.monotonic(), client_address)
        host = _host(client_address)
        with self._lock:
            own = [c for c in self._connections if _host(c.client_address) == host]
            full = len(own) >= self.limits.max_connections_per_client and not self._make_room(own)
            if full or (len(self._connections) >= self.limits.max_connections and not self._make_room()):
                self.metrics.rejected_connections.inc()
                self.shutdown_request(request)
                return
            self._connections.add(tracked)
            self._running += 1
            self.metrics.open_connections.set(len(self._connections))
        self._waiting.add(tracked)  # a thread once its first byte arrives

    def _start_thread(self, tracked: _Connection) -> None:
        try:
            thread = threading.Thread(target=self._serve_connection, args=(tracked,), name="webhook-connection")
            thread.daemon = True
            thread.start()
        except BaseException:  # the thread did not start: undo the count
            self._expire(tracked)
            raise

    def _expire(self, tracked: _Connection) -> None:
        """A connection that sent nothing within the handshake time (or that no thread could be started for)."""
        self.metrics.handshake_failures.inc()
        self.shutdown_request(tracked.sock)
        self._forget(tracked)

    def _make_room(self, among: list[_Connection] | None = None) -> bool:
        """Close the connection, of `among` (default: all), least likely to be a client at work (the order of the
        module doc); called with the lock held. One whose bytes are already waiting in the kernel counts as at
        work (its thread has not got to them yet), as does a request that began less than `receiving_grace`
        ago. False when every connection is at work."""
        now = time.monotonic()
        grace = self.limits.receiving_grace

        def young(connection: _Connection) -> bool:  # just connected, just began its request, or just answered
            return now - connection.since < grace  # (a keep-alive client between two requests is at work too)

        candidates = self._connections if among is None else among
        for victim in sorted(candidates, key=lambda c: (young(c), c.state, c.since)):
            if victim.state == BUSY or (victim.state == RECEIVING and young(victim)):
                continue
            if victim.state not in (HANDSHAKE, RECEIVING) and _wait_for(victim.sock, False, 0):
                continue
            victim.closed_by_server = True
            if victim.state == SILENT and self._waiting.remove(victim):  # no thread of its own: closed here
                self.shutdown_request(victim.sock)
                self._running -= 1
                self._lock.notify_all()
            else:
                victim.abort()
            self._connections.discard(victim)
            self.metrics.evicted_connections.inc()
            return True
        return False

    def set_state(self, tracked: _Connection, state: int) -> None:
        with self._lock:
            tracked.state, tracked.since = state, time.monotonic()

    def _forget(self, tracked: _Connection) -> None:
        with self._lock:
            self._connections.discard(tracked)
            self._running -= 1
            self.metrics.open_connections.set(len(self._connections))
            self._lock.notify_all()

    def _serve_connection(self, tracked: _Connection) -> None:
        try:
            self._serve_tls(tracked)
        except Exception:
            log.exception("connection from %s failed", tracked.client_address)
        finally:
            with contextlib.suppress(OSError):
                tracked.sock.close()
            self._forget(tracked)

    def _serve_tls(self, tracked: _Connection) -> None:
        raw: socket.socket = tracked.sock
        with contextlib.suppress(OSError):  # small answers go out at once, not after the client's delayed ACK
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = tracked.since + self.limits.handshake_timeout  # from accept: it is still SILENT
        raw.settimeout(max(deadline - time.monotonic(), 0.001))
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
        with self._lock:
            if tracked.closed_by_server:
                return
            connection = self.tls.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            tracked.sock, tracked.state = connection, HANDSHAKE
        if not _handshake(connection, deadline):
            self.metrics.handshake_failures.inc()
            return
        self.set_state(tracked, NO_REQUEST)
        _Handler(tracked, tracked.client_address, self)  # type: ignore[arg-type]  # see `_Handler.request`

    # --- draining -------------------------------------------------------------------------------------------

    def begin_drain(self) -> None:
        """Every answer from now on carries `Connection: close`."""
        self.draining = True

    def close_idle(self) -> int:
        """Close the keep-alive connections that wait for a next request (after the listener is closed: no new
        request can come but on them); the number closed."""
        with self._lock:
            idle = [c for c in self._connections if c.state == IDLE]
            for connection in idle:
                connection.closed_by_server = True
                connection.abort()
        return len(idle)

    def open_connections(self) -> int:
        with self._lock:
            return self._running

    def wait_closed(self, timeout: float) -> int:
        """Wait until every connection's thread has ended, at most `timeout` seconds; how many are still open."""
        end = time.monotonic() + timeout
        with self._lock:
            while self._running and (left := end - time.monotonic()) > 0:
                self._lock.wait(left)
            return self._running

    def release(self) -> None:
        """After the drain: end the waiting room's thread (connections still silent are closed)."""
        self._waiting.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.error("error on the connection from %s", client_address, exc_info=True)


def _host(client_address: Any) -> str:
    """The client's address without its port: what the per-client share counts by."""
    return str(client_address[0]) if isinstance(client_address, tuple) and client_address else str(client_address)


def _handshake(connection: ssl.SSLSocket, deadline: float) -> bool:
    """The TLS handshake, done by `deadline` however slowly the client's bytes trickle in."""
    connection.setblocking(False)
    try:
        while True:
            try:
                connection.do_handshake()
                return True
            except ssl.SSLWantReadError:
                writable = False
            except ssl.SSLWantWriteError:
                writable = True
            left = deadline - time.monotonic()
            if left <= 0 or not _wait_for(connection, writable, left):
                return False
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False
    finally:
        with contextlib.suppress(OSError):
            connection.setblocking(True)


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
    _drain(raw, limits.linger_bytes, limits.linger_seconds)


def _drain(sock: socket.socket, most_bytes: int, seconds: float) -> None:
    """After an error answer on a connection about to close: half-close `sock` (the client sees the end of the
    answer), then read and drop up to `most_bytes` for at most `seconds`, so that closing with unread input does
    not reset the connection before the client has read the answer (what Go's server does too). (On a TLS
    socket `shutdown` drops the TLS layer: what is drained is not decrypted.)"""
    deadline = time.monotonic() + seconds
    remaining = most_bytes
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
