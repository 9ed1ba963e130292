"""Issue #19: the webhook admits a Provisioner of a type the offerings source lacks in every region (g4ad, whose
zones are inferred from its kin's), where it denied it as "not offered" outside us-east-1 — over real TLS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from karpenter_policy.webhook.command import Webhook, WebhookOptions

from .support import Client

G4AD = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "amd-gpu"},
    "spec": {
        "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g4ad"]}],
        "providerRef": {"name": "default"},
    },
}


@pytest.fixture()
def us_west_2(tmp_path: Path) -> Iterator[Client]:
    server = Webhook(WebhookOptions(self_signed=str(tmp_path), address="127.0.0.1", port=0, region="us-west-2"))
    server.start()
    client = Client(server.port, tmp_path / "ca.crt")
    try:
        yield client
    finally:
        client.close()
        server.stop()


def test_the_webhook_admits_a_g4ad_provisioner_in_us_west_2(us_west_2: Client) -> None:
    response = us_west_2.review("/validate/provisioners", G4AD)
    assert response["allowed"] is True, response
    typo = {**G4AD, "spec": {**G4AD["spec"], "requirements": [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g4adx"]}]}}  # fmt: skip
    assert us_west_2.review("/validate/provisioners", typo)["allowed"] is False
