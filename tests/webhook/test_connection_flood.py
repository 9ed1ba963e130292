"""Hostile connections (issue #8, item 2): idle TLS connections and silent TCP sockets, more of them than the
connection limit and reconnecting as soon as they are closed, do not lock well-behaved clients out — admission
requests and /healthz keep being answered — and a handshake that trickles in is cut off at its time limit."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube.support import GENEROUS, eventually

from karpenter_policy.webhook.command import Webhook, WebhookOptions
from karpenter_policy.webhook.server import IDLE, Limits

from .support import Client, cases, raw_tls, read_answer

LIMITS = Limits(max_connections=32, handshake_timeout=1.0, request_timeout=2.0)  # idle_timeout: the default 120 s
PROVISIONER = next(c.data for c in cases() if c.id == "check/positive/gpu-a10g.yaml#0")


@pytest.fixture(scope="module")
def capped(cert_dir: Path) -> Iterator[Webhook]:
    server = Webhook(WebhookOptions(self_signed=str(cert_dir), address="127.0.0.1", port=0, limits=LIMITS))
    server.start()
    yield server
    server.stop()


class Flood:
    """`idle` TLS connections that never send a request and `silent` TCP sockets that never send a byte, each
    reopened as soon as the server closes it, until stopped."""

    def __init__(self, port: int, ca: Path, idle: int, silent: int) -> None:
        self.port, self.context = port, ssl.create_default_context(cafile=str(ca))
        self.stop = threading.Event()
        self.opened = 0
        self.threads = [threading.Thread(target=self._hold, args=(True,)) for _ in range(idle)]
        self.threads += [threading.Thread(target=self._hold, args=(False,)) for _ in range(silent)]

    def _hold(self, tls: bool) -> None:
        while not self.stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
                if tls:
                    sock = self.context.wrap_socket(sock, server_hostname="localhost")
            except OSError:
                time.sleep(0.05)  # the flood's own pace between refused attempts
                continue
            self.opened += 1
            with sock:
                sock.settimeout(0.5)
                while not self.stop.is_set():  # until the server closes it
                    try:
                        if not sock.recv(1024):
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break

    def __enter__(self) -> Flood:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


@pytest.mark.slow
def test_well_behaved_clients_are_served_during_a_flood(capped: Webhook, cert_dir: Path) -> None:
    ca = cert_dir / "ca.crt"
    keep_alive = Client(capped.port, ca, timeout=10)
    assert keep_alive.review("/validate/provisioners", PROVISIONER)["allowed"] is True
    evictions = capped.metrics.evicted_connections._value.get
    before = evictions()
    with Flood(capped.port, ca, idle=40, silent=40) as flood:
        # The flood has filled the connection limit: the server closes connections to make room.
        eventually(
            lambda: flood.opened >= LIMITS.max_connections and evictions() > before,
            GENEROUS,
            "the flood filling the connection limit",
        )
        assert flood.opened >= LIMITS.max_connections
        failures: list[str] = []
        for attempt in range(15):
            probe = Client(capped.port, ca, timeout=10)  # the kubelet: a new connection per probe
            step = "healthz"
            try:
                status = probe.get("/healthz").status
                step = "review"
                if status != 200:
                    failures.append(f"healthz {attempt}: {status}")
                fresh = probe.review("/validate/provisioners", PROVISIONER)
                if fresh["allowed"] is not True:
                    failures.append(f"review {attempt}: {fresh}")
            except OSError as error:
                failures.append(f"new connection {attempt} ({step}): {error!r}")
            finally:
                probe.close()
            try:  # the API server's keep-alive connection (reopened by the client when closed)
                if keep_alive.review("/validate/provisioners", PROVISIONER)["allowed"] is not True:
                    failures.append(f"keep-alive {attempt}")
            except OSError as error:
                failures.append(f"keep-alive {attempt}: {error!r}")
                keep_alive.close()
            time.sleep(0.1)  # the probes' own pace: 15 rounds spread over the flood
        assert not failures, failures
    keep_alive.close()
    assert capped.metrics.evicted_connections._value.get() > 0


def _idle(server: Webhook, socks: list[ssl.SSLSocket]) -> bool:
    """Whether the server holds each of `socks` as an idle keep-alive connection (waiting for a next request)."""
    addresses = {sock.getsockname() for sock in socks}
    with server.server._lock:
        states = {c.client_address: c.state for c in server.server._connections}
    return all(states.get(address) == IDLE for address in addresses)


def test_the_cap_holds_and_idle_connections_make_room(capped: Webhook, cert_dir: Path) -> None:
    """At the limit, a new connection is served and the connection idle the longest is closed for it."""
    ca = cert_dir / "ca.crt"
    held = [raw_tls(capped.port, ca) for _ in range(LIMITS.max_connections)]
    try:
        for index, sock in enumerate(held):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_answer(sock)[0] == 200
            if index == 0:  # held[0] idle before the others send: idle the longest, however threads are scheduled
                eventually(lambda: _idle(capped, held[:1]), GENEROUS, "held[0] idle in the server")
        eventually(lambda: _idle(capped, held), GENEROUS, "every held connection idle in the server")
        with raw_tls(capped.port, ca) as extra:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_answer(extra)[0] == 200
        held[0].settimeout(5)
        assert held[0].recv(1024) == b""  # the oldest idle one made room
        held[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(held[-1])[0] == 200  # the others are still served
    finally:
        for sock in held:
            with contextlib.suppress(OSError):
                sock.close()


def test_a_trickled_handshake_is_cut_off(capped: Webhook) -> None:
    """Each byte of a ClientHello arriving just within the per-read time must not stretch the handshake."""
    hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64
    with socket.create_connection(("127.0.0.1", capped.port), timeout=10) as sock:
        started = time.monotonic()
        closed_after = None
        for byte in hello:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed_after = time.monotonic() - started
                break
            sock.settimeout(0.3)
            try:
                if sock.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "the server waited for the whole trickle"
    assert closed_after < LIMITS.handshake_timeout + 3  # generous: a loaded machine
