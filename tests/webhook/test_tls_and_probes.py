"""TLS and operations: the certificate is verified against the generated CA (and refused without it), the server
picks up a rotated certificate without a restart (and keeps the old one while the files do not load), and the
probes and Prometheus metrics answer."""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509

from karpenter_policy.webhook.certs import CertificateFiles, ensure_self_signed, issue_serving_certificate
from karpenter_policy.webhook.command import Webhook, WebhookOptions

from .support import Client, cases


def served_certificate(port: int, ca_file: Path) -> x509.Certificate:
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_the_certificate_is_verified(webhook: Webhook, cert_dir: Path) -> None:
    certificate = served_certificate(webhook.port, cert_dir / "ca.crt")
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "karpenter-policy-webhook.karpenter-policy.svc" in names.get_values_for_type(x509.DNSName)
    with (
        socket.create_connection(("127.0.0.1", webhook.port), timeout=5) as sock,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        ssl.create_default_context().wrap_socket(sock, server_hostname="localhost")  # the system CAs do not know it
    assert webhook.ca_bundle == base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode()
    assert webhook.tls.context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_self_signed_files_are_kept_when_valid(tmp_path: Path) -> None:
    files = ensure_self_signed(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert sorted(before) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert (files.key.stat().st_mode & 0o777) == 0o600 and (files.ca_key.stat().st_mode & 0o777) == 0o600
    ensure_self_signed(tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.fixture()
def rotating(tmp_path: Path) -> Iterator[tuple[Webhook, CertificateFiles]]:
    """A server on copies of the serving files (as cert-manager's Secret volume), polled every 0.1 s."""
    files = ensure_self_signed(tmp_path / "ca")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    shutil.copy(files.cert, mounted / "tls.crt")
    shutil.copy(files.key, mounted / "tls.key")
    options = WebhookOptions(
        cert_file=str(mounted / "tls.crt"),
        key_file=str(mounted / "tls.key"),
        address="127.0.0.1",
        port=0,
        reload_interval=0.1,
    )
    server = Webhook(options)
    server.start()
    yield server, files
    server.stop()


def _wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_rotation_is_picked_up(rotating: tuple[Webhook, CertificateFiles], tmp_path: Path) -> None:
    server, files = rotating
    mounted = tmp_path / "mounted"
    client = Client(server.port, files.ca_cert)
    first = served_certificate(server.port, files.ca_cert)
    assert client.get("/healthz").status == 200  # a keep-alive connection on the old certificate

    # Half a rotation (a new key next to the old certificate): not used, the old pair keeps serving.
    renewed = tmp_path / "renewed"
    shutil.copytree(files.directory, renewed)
    issue_serving_certificate(CertificateFiles(renewed), days=30)
    shutil.copy(renewed / "tls.key", mounted / "tls.key")
    _wait_for(lambda: server.metrics.reloads.labels("error")._value.get() >= 1)
    assert served_certificate(server.port, files.ca_cert).serial_number == first.serial_number

    # The certificate arrives: the next connections get it, verified against the same CA; the open one goes on.
    shutil.copy(renewed / "tls.crt", mounted / "tls.crt")
    _wait_for(lambda: server.tls.reloads == 1)
    second = served_certificate(server.port, files.ca_cert)
    assert second.serial_number != first.serial_number
    assert second.not_valid_after_utc < first.not_valid_after_utc  # the 30-day one
    assert client.get("/healthz").status == 200
    metrics = client.get("/metrics").body.decode()
    assert 'karpenter_policy_webhook_certificate_reloads_total{result="ok"} 1.0' in metrics
    (expiry,) = [
        line for line in metrics.splitlines() if line.startswith("karpenter_policy_webhook_certificate_expiry")
    ]
    assert float(expiry.split()[1]) == second.not_valid_after_utc.timestamp()
    client.close()


def test_probes_and_metrics(webhook: Webhook, client: Client) -> None:
    assert client.get("/healthz").body == b"ok\n"
    assert client.get("/readyz?verbose").status == 200
    provisioner = next(c.data for c in cases() if c.id == "check/positive/gpu-a10g.yaml#0")
    client.review("/validate/provisioners", provisioner)
    client.review("/validate/provisioners", {"apiVersion": "v1", "kind": "Pod"})
    client.post("/validate/provisioners", b"{")
    client.get("/no/such/path/12345")
    answer = client.get("/metrics")
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = answer.body.decode()
    for series in (
        'karpenter_policy_webhook_requests_total{path="/validate/provisioners",verdict="allowed"}',
        'karpenter_policy_webhook_requests_total{path="/validate/provisioners",verdict="denied"}',
        'karpenter_policy_webhook_requests_total{path="/validate/provisioners",verdict="bad_request"}',
        'karpenter_policy_webhook_requests_total{path="other",verdict="not_found"}',
        'karpenter_policy_webhook_request_duration_seconds_bucket{le="0.005",path="/validate/provisioners",verdict="allowed"}',
        "karpenter_policy_webhook_solver_cache_hits_total",
        "karpenter_policy_webhook_open_connections",
        "process_resident_memory_bytes",
        "process_open_fds",
        "python_gc_collections_total",
    ):
        assert series in text, series
    assert "/no/such/path" not in text  # invented paths do not make series


def test_not_ready_while_draining(rotating: tuple[Webhook, CertificateFiles]) -> None:
    server, files = rotating
    server.options.shutdown_delay = 30.0
    client = Client(server.port, files.ca_cert)
    assert client.get("/readyz").status == 200
    server.drain_then_stop()
    assert client.get("/readyz").status == 503
    assert client.get("/healthz").status == 200  # still serving during the delay
    client.close()
