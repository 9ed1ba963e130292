"""Clients that trickle their requests (issue #27, item 6): 300 of them used to hold every connection slot — a
request under way was never closed to make room — and healthy requests failed 30 of 30 (with `failurePolicy:
Ignore`, admission was then silently skipped). Now one client address holds at most its share of the slots, and
a request still arriving after `receiving_grace` is closed to make room, oldest first: healthy requests keep
being answered while the trickle goes on. (A trickle from many addresses that reconnects as fast as it is closed
still competes with healthy clients for the freed slots: docs/hardening-webhook.md says so.)"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube.support import GENEROUS, eventually

from karpenter_policy.cli import webhook
from karpenter_policy.optionspec import from_flags
from karpenter_policy.webhook.command import Webhook, WebhookOptions, webhook_options
from karpenter_policy.webhook.flags import WebhookFlags
from karpenter_policy.webhook.server import Limits

from .support import Client, cases

LIMITS = Limits(
    max_connections=24, max_connections_per_client=8, receiving_grace=0.3, handshake_timeout=2.0, request_timeout=30.0
)
PROVISIONER = next(c.data for c in cases() if c.id == "check/positive/gpu-a10g.yaml#0")


@pytest.fixture(scope="module")
def small(cert_dir: Path) -> Iterator[Webhook]:
    server = Webhook(WebhookOptions(self_signed=str(cert_dir), address="0.0.0.0", port=0, limits=LIMITS))
    server.start()
    yield server
    server.stop()


class Trickle:
    """`count` connections, each from one of `sources` (loopback addresses), that begin a request and then send
    one body byte every 0.1 s — within every per-read timeout, never done — and, when `reconnect`, open a new
    one as soon as the server closes theirs."""

    def __init__(self, port: int, ca: Path, sources: list[str], count: int, reconnect: bool) -> None:
        self.port, self.context, self.reconnect = port, ssl.create_default_context(cafile=str(ca)), reconnect
        self.stop = threading.Event()
        self.started = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(sources[i % len(sources)],)) for i in range(count)]

    def _run(self, source: str) -> None:
        while not self.stop.is_set():
            try:
                raw = socket.create_connection(("127.0.0.1", self.port), timeout=2, source_address=(source, 0))
                sock = self.context.wrap_socket(raw, server_hostname="localhost")
                sock.sendall(b"POST /validate/provisioners HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
            except OSError:
                time.sleep(0.05)  # the trickle's own pace between refused attempts
                continue
            with self.lock:
                self.started += 1
            with sock:
                while not self.stop.wait(0.1):
                    try:
                        sock.sendall(b" ")
                    except OSError:
                        break
            if not self.reconnect:
                self.stop.wait()
                return

    def __enter__(self) -> Trickle:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def _served(server: Webhook, ca: Path, rounds: int) -> list[str]:
    failures: list[str] = []
    for attempt in range(rounds):
        client = Client(server.port, ca, timeout=10)  # a new connection, as the kubelet's probes and a new
        try:  # API server connection make
            if client.get("/healthz").status != 200:
                failures.append(f"healthz {attempt}")
            if client.review("/validate/provisioners", PROVISIONER)["allowed"] is not True:
                failures.append(f"review {attempt}")
        except OSError as error:
            failures.append(f"{attempt}: {error!r}")
        finally:
            client.close()
    return failures


@pytest.mark.parametrize(
    ("sources", "count", "reconnect"),
    [(["127.0.0.2"], 60, True), ([f"127.0.0.{i}" for i in range(2, 22)], 40, False)],
    ids=["one-address-reconnecting", "twenty-addresses"],
)
def test_trickling_clients_cannot_take_every_slot(
    small: Webhook, cert_dir: Path, sources: list[str], count: int, reconnect: bool
) -> None:
    """From one address (reconnecting as fast as it is closed), the trickle holds at most its share of the
    slots; from twenty addresses (more connections than slots), its requests are closed, oldest first, to make
    room for the healthy client's. Each healthy request is a new connection from 127.0.0.1."""
    ca = cert_dir / "ca.crt"
    with Trickle(small.port, ca, sources, count, reconnect) as trickle:
        eventually(lambda: trickle.started >= min(count, LIMITS.max_connections), GENEROUS, "the trickle under way")
        if not reconnect:
            eventually(lambda: _open(small) >= LIMITS.max_connections, GENEROUS, "the trickle filling every slot")
        time.sleep(LIMITS.receiving_grace)  # every trickling request now past its grace
        failures = _served(small, ca, 20)
        held = _open(small)
    assert not failures, failures
    assert held <= LIMITS.max_connections


def _open(server: Webhook) -> int:
    with server.server._lock:
        return len(server.server._connections)


def test_the_share_is_a_flag() -> None:
    given = webhook.make_context("webhook", ["--max-connections-per-client", "5"])
    assert webhook_options(from_flags(WebhookFlags, given.params)).limits.max_connections_per_client == 5
    default = webhook.make_context("webhook", [])
    assert webhook_options(from_flags(WebhookFlags, default.params)).limits.max_connections_per_client == 64
