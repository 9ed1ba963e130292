"""`--self-signed DIR`: a CA and a serving certificate signed by it (the `cryptography` library).

Writes `DIR/ca.crt`, `DIR/ca.key`, `DIR/tls.crt` and `DIR/tls.key` (keys mode 0600; each file written to a
temporary name and renamed, so a server watching the directory never reads half a file). Keys are ECDSA P-256:
a TLS handshake costs the server a fraction of what RSA-2048 costs. The serving certificate names the Service
(`NAME`, `NAME.NAMESPACE`, `NAME.NAMESPACE.svc`, `NAME.NAMESPACE.svc.cluster.local`), `localhost`,
127.0.0.1 and ::1. `ca_bundle` is what goes into the webhook configurations' `clientConfig.caBundle`.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
DEFAULT_SERVICE = "karpenter-policy-webhook"
DEFAULT_NAMESPACE = "karpenter-policy"
CA_DAYS = 3650
SERVING_DAYS = 365


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / CA_CERT

    @property
    def ca_key(self) -> Path:
        return self.directory / CA_KEY

    @property
    def cert(self) -> Path:
        return self.directory / TLS_CERT

    @property
    def key(self) -> Path:
        return self.directory / TLS_KEY

    def ca_bundle(self) -> str:
        """base64 of the CA certificate's PEM: `clientConfig.caBundle`."""
        return base64.b64encode(self.ca_cert.read_bytes()).decode("ascii")


def service_names(service: str = DEFAULT_SERVICE, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
    ]


def _write(path: Path, data: bytes, private: bool = False) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o600 if private else 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    encoding, private_format = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, private_format, serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def generate_ca(files: CertificateFiles, common_name: str = "karpenter-policy webhook CA") -> None:
    """A new self-signed CA in `files.ca_cert` / `files.ca_key`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    files.directory.mkdir(parents=True, exist_ok=True)
    _write(files.ca_key, _pem_key(key), private=True)
    _write(files.ca_cert, certificate.public_bytes(serialization.Encoding.PEM))


def issue_serving_certificate(
    files: CertificateFiles,
    dns_names: Sequence[str] | None = None,
    days: int = SERVING_DAYS,
    ip_addresses: Sequence[str] = ("127.0.0.1", "::1"),
) -> x509.Certificate:
    """A new serving key and certificate signed by the CA in `files`, written to `files.cert` / `files.key`
    (key first, then certificate: a reader that sees the new certificate also sees its key)."""
    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{files.ca_key}: expected an EC private key")
    ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    names = list(dns_names) if dns_names else service_names()
    now = _now()
    alternative = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    # Both files are renamed into place; a watcher may still catch the new key with the old certificate for a
    # moment: it then keeps its current context and retries (tls.CertificateReloader).
    _write(files.key, _pem_key(key), private=True)
    _write(files.cert, certificate.public_bytes(serialization.Encoding.PEM))
    return certificate


def ensure_self_signed(directory: str | Path, dns_names: Sequence[str] | None = None) -> CertificateFiles:
    """The CA and serving certificate in `directory`: kept when present and valid for another day, else made."""
    files = CertificateFiles(Path(directory))
    if not (files.ca_cert.is_file() and files.ca_key.is_file()):
        generate_ca(files)
        issue_serving_certificate(files, dns_names)
        return files
    if not (files.cert.is_file() and files.key.is_file()) or _expires_soon(files.cert):
        issue_serving_certificate(files, dns_names)
    return files


def _expires_soon(path: Path) -> bool:
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError:
        return True
    return certificate.not_valid_after_utc - _now() < datetime.timedelta(days=1)


def expiry_timestamp(cert_file: str | Path) -> float:
    """When the first certificate of a PEM file expires (Unix time)."""
    certificate = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    return certificate.not_valid_after_utc.timestamp()
