"""Fixtures: one webhook server per test session (real TLS on loopback, certificates from `--self-signed`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from karpenter_policy.webhook.command import Webhook, WebhookOptions

from .support import ROOT, Client


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
