"""TLS for the test API server: kubectl sends a bearer token only over HTTPS, so a server that authenticates
by token serves HTTPS with a self-signed certificate for 127.0.0.1 (its kubeconfig carries it as the CA)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from pathlib import Path
from typing import Any

import aiohttp.test_utils
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed() -> tuple[bytes, bytes]:
    """A certificate (PEM) for localhost and 127.0.0.1, valid for a day, and its key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-api-server")])
    now = datetime.datetime.now(datetime.UTC)
    names = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1)).add_extension(names, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


class Certificate:
    """A self-signed certificate in files (for ``ssl`` and for clients' CA bundles) and the server's context."""

    def __init__(self) -> None:
        self.pem, key = self_signed()
        self._directory = tempfile.TemporaryDirectory(prefix="test-api-server-tls-")
        self.path = Path(self._directory.name) / "tls.crt"
        key_path = Path(self._directory.name) / "tls.key"
        self.path.write_bytes(self.pem)
        key_path.write_bytes(key)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(self.path, key_path)

    def server_class(self) -> type[aiohttp.test_utils.RawTestServer]:
        """kmock's server class, serving HTTPS with this certificate."""
        context = self.context

        class TlsServer(aiohttp.test_utils.RawTestServer):
            async def start_server(self, **kwargs: Any) -> None:
                await super().start_server(ssl=context, **kwargs)

        return TlsServer

    def close(self) -> None:
        self._directory.cleanup()
