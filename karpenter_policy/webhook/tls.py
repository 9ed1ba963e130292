"""The server's SSL context, rebuilt when the certificate or key file changes on disk (cert-manager rotation).

A poller thread hashes both files every `interval` seconds (`watch`: their contents, not their mtimes). On a
change it builds a new context; new connections get it, established ones keep theirs (the old certificate is
still valid: cert-manager renews well before expiry). A pair that does not load — cert-manager caught between
writing the key and the certificate — is not used: the current context stays and the next poll tries again.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from pathlib import Path

from karpenter_policy.webhook.certs import expiry_timestamp
from karpenter_policy.webhook.metrics import Metrics
from karpenter_policy.webhook.watch import Poller, fingerprint

DEFAULT_RELOAD_INTERVAL = 5.0
log = logging.getLogger(__name__)


def server_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    """TLS 1.2+ server context for the pair; HTTP/1.1 by ALPN. Raises OSError / ssl.SSLError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert_file), str(key_file))
    context.set_alpn_protocols(["http/1.1"])
    return context


class CertificateReloader:
    """The current server context for a certificate/key pair, reloaded when the files change."""

    def __init__(
        self,
        cert_file: str | Path,
        key_file: str | Path,
        metrics: Metrics | None = None,
        interval: float = DEFAULT_RELOAD_INTERVAL,
    ) -> None:
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.metrics = metrics
        self.interval = interval
        self._stamp = fingerprint((self.cert_file, self.key_file))
        self._context = server_context(self.cert_file, self.key_file)  # at start-up a bad pair is fatal
        self._set_expiry()
        self._poller = Poller("certificate-reloader", interval, self.check)
        self.reloads = 0

    @property
    def context(self) -> ssl.SSLContext:
        return self._context

    def _set_expiry(self) -> None:
        if self.metrics is not None:
            with contextlib.suppress(OSError, ValueError):
                self.metrics.expiry.set(expiry_timestamp(self.cert_file))

    def check(self) -> bool:
        """Reload when the files changed; True when a new context is in use."""
        stamp = fingerprint((self.cert_file, self.key_file))
        if stamp == self._stamp:
            return False
        try:
            context = server_context(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as error:
            log.warning("certificate files changed but do not load (%s); keeping the current certificate", error)
            if self.metrics is not None:
                self.metrics.reloads.labels("error").inc()
            return False
        self._context, self._stamp = context, stamp
        self.reloads += 1
        self._set_expiry()
        if self.metrics is not None:
            self.metrics.reloads.labels("ok").inc()
        log.info("reloaded the serving certificate from %s", self.cert_file)
        return True

    def start(self) -> None:
        self._poller.start()

    def stop(self) -> None:
        self._poller.stop()
