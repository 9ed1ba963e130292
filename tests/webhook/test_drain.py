"""`karpenter-policy webhook` stopping (issue #8, item 4), as a subprocess: SIGTERM drains — not ready, every
answer closes its connection, then the listener closes, idle keep-alive connections are closed, every accepted
request is answered, and the process exits 0, logging each step. SIGHUP is logged and ignored."""

from __future__ import annotations

import contextlib
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kube.support import GENEROUS, eventually

from .support import Client, cases, review_body
from .test_command import CLI, free_port

PROVISIONER = next(c.data for c in cases() if c.id == "check/positive/gpu-a10g.yaml#0")
BODY = review_body(PROVISIONER)
REQUEST = (
    b"POST /validate/provisioners?timeout=5s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
)
SHUTDOWN_DELAY = 1.5


@dataclass
class Served:
    process: subprocess.Popen[str]
    port: int
    ca: Path
    stderr: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def log(self) -> str:
        """What the webhook has logged so far."""
        return "".join(self.stderr)

    def whole_log(self) -> str:
        """Everything the webhook logged, once it has exited (its stderr read to the end)."""
        assert self.process.poll() is not None and self.reader is not None
        self.reader.join(timeout=GENEROUS)
        assert not self.reader.is_alive(), "the webhook's stderr did not end"
        return self.log()


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Served]:
    port = free_port()
    command = [
        *CLI,
        "--self-signed",
        str(tmp_path),
        "--address",
        "127.0.0.1",
        "--port",
        str(port),
        "--shutdown-delay",
        str(SHUTDOWN_DELAY),
        "--request-timeout",
        "5",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    result = Served(process, port, tmp_path / "ca.crt")
    reader = result.reader = threading.Thread(target=lambda: result.stderr.extend(process.stderr or []), daemon=True)
    reader.start()
    try:
        # Serving once it logs so: the certificate written, the workers warm, the socket listening.
        eventually(lambda: process.poll() is not None or "serving https://" in result.log(), 60, "the webhook serving")
        assert process.poll() is None, result.log()
        client = Client(port, result.ca, timeout=5)
        try:
            assert client.get("/readyz").status == 200
        finally:
            client.close()
        yield result
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        reader.join(timeout=5)


def _connect(served: Served) -> ssl.SSLSocket | None:
    """A TLS connection, or None when the server no longer accepts (the request is then never sent)."""
    context = ssl.create_default_context(cafile=str(served.ca))
    try:
        sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
        return context.wrap_socket(sock, server_hostname="localhost")
    except OSError:
        return None


def _answer(sock: ssl.SSLSocket) -> tuple[int, dict[str, str]] | None:
    """Status and headers of one answer (its body read), or None when the connection ends first."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(body) < int(headers.get("content-length", "0")):
            chunk = sock.recv(65536)
            if not chunk:
                return None
            body += chunk
        return int(lines[0].split(" ", 2)[1]), headers
    except OSError:
        return None


@dataclass
class Outcomes:
    answered: int = 0
    answered_after_sigterm: int = 0
    closed_after_sigterm: int = 0
    unanswered: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)  # an answer said `Connection: close`


def _keep_sending(served: Served, stop: threading.Event, sigterm: threading.Event, outcomes: Outcomes) -> None:
    """Requests back to back on a keep-alive connection, reopened when the server closes it."""
    sock: ssl.SSLSocket | None = None
    while not stop.is_set():
        if sock is None:
            sock = _connect(served)
            if sock is None:  # not accepted: nothing was sent; the sender's own pace between attempts
                time.sleep(0.02)
                continue
        after = sigterm.is_set()
        try:
            sock.sendall(REQUEST)
        except OSError as error:
            with outcomes.lock:
                outcomes.unanswered.append(f"send: {error!r} (after SIGTERM: {after})")
            sock.close()
            sock = None
            continue
        answer = _answer(sock)
        with outcomes.lock:
            if answer is None:
                outcomes.unanswered.append(f"no answer (sent after SIGTERM: {after})")
            else:
                assert answer[0] == 200
                outcomes.answered += 1
                if answer[1].get("connection") == "close":
                    outcomes.closing.set()
                if after:
                    outcomes.answered_after_sigterm += 1
                    outcomes.closed_after_sigterm += answer[1].get("connection") == "close"
        if answer is None or answer[1].get("connection") == "close":
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def test_sigterm_answers_every_accepted_request(served: Served) -> None:
    stop, sigterm, outcomes = threading.Event(), threading.Event(), Outcomes()
    senders = [threading.Thread(target=_keep_sending, args=(served, stop, sigterm, outcomes)) for _ in range(4)]
    idle = _connect(served)
    assert idle is not None
    idle.sendall(REQUEST)
    assert _answer(idle) is not None  # a keep-alive connection that now waits for a next request
    for sender in senders:
        sender.start()
    eventually(lambda: outcomes.answered >= len(senders), GENEROUS, "requests answered before SIGTERM")
    served.process.send_signal(signal.SIGTERM)
    # The signal is handled asynchronously: requests count as sent after SIGTERM once the drain shows, in an
    # answer that closes its connection (from then on every answer does).
    eventually(outcomes.closing.is_set, GENEROUS, "an answer with Connection: close")
    sigterm.set()
    # A request that begins during the delay and is still arriving when the listener closes.
    slow = _connect(served)
    assert slow is not None
    slow.sendall(REQUEST[: len(REQUEST) // 2])
    eventually(lambda: "stopped accepting connections" in served.log(), GENEROUS, "the listener closed")
    slow.sendall(REQUEST[len(REQUEST) // 2 :])
    slow_answer = _answer(slow)
    eventually(
        lambda: "karpenter_policy.webhook: workers stopped" in served.log() or served.process.poll() is not None,
        GENEROUS,
        "the drain's end",
    )
    stop.set()
    for sender in senders:
        sender.join()
    idle.settimeout(10)
    with contextlib.suppress(OSError):
        assert idle.recv(1024) == b""  # closed by the server, not left to the process's exit
    assert served.process.wait(timeout=30) == 0
    log = served.whole_log()
    assert slow_answer is not None and slow_answer[0] == 200, log
    assert slow_answer[1]["connection"] == "close"
    assert not outcomes.unanswered, (outcomes.unanswered, log)
    assert outcomes.answered_after_sigterm > 0
    assert outcomes.closed_after_sigterm == outcomes.answered_after_sigterm  # every one told to go elsewhere
    steps = [
        "received SIGTERM",
        "draining: /readyz answers 503",
        "stopped accepting connections",
        "closed 1 idle keep-alive connections",
        "every accepted request was answered",
        "workers stopped",
        "stopped\t",
    ]
    positions = [log.find(f"\twebhook\t{step}") for step in steps]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), log
    assert "Traceback" not in log


def test_sighup_is_logged_and_ignored(served: Served) -> None:
    served.process.send_signal(signal.SIGHUP)
    eventually(lambda: "received SIGHUP: ignored" in served.log(), GENEROUS, "the SIGHUP logged")
    client = Client(served.port, served.ca, timeout=10)
    assert client.get("/healthz").status == 200
    assert client.review("/validate/provisioners", PROVISIONER)["allowed"] is True
    client.close()
    assert served.process.poll() is None
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=30) == 0
    assert "received SIGHUP: ignored" in served.whole_log()
