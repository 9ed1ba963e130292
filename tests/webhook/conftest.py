"""Fixtures: one webhook server per test session (real TLS on loopback, certificates from `--self-signed`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from karpenter_policy.webhook.command import Webhook, WebhookOptions

from .support import ROOT, Client

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # the constraint-set tampering of tests/api is reused
    sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("webhook-certs")


@pytest.fixture(scope="session")
def webhook(cert_dir: Path) -> Iterator[Webhook]:
    options = WebhookOptions(
        self_signed=str(cert_dir),
        address="127.0.0.1",
        port=0,
        policies=[str(ROOT / "examples" / "pinning" / "policies")],
    )
    server = Webhook(options)
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def client(webhook: Webhook, cert_dir: Path) -> Iterator[Client]:
    connection = Client(webhook.port, cert_dir / "ca.crt")
    yield connection
    connection.close()
