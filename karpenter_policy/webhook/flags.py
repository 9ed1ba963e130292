"""The options of `karpenter-policy webhook`, declared once (`optionspec`): each flag's default, help text and
spelling, in --help's order. `command.WebhookOptions.from_flags` makes the server's configuration of them. Light
on purpose: the CLI imports it to make its flags, without the server.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_policy.optionspec import log_format_option, log_level_option, option


@dataclass(frozen=True, slots=True)
class WebhookFlags:
    """`karpenter-policy webhook`'s flags (deploy/webhook/README.md; docs/hardening-webhook.md for the limits)."""

    tls_cert_file: str | None = option(
        None, "--tls-cert-file", path="file", help="Serving certificate (PEM); reloaded on change."
    )
    tls_private_key_file: str | None = option(
        None, "--tls-private-key-file", path="file", help="Its private key (PEM)."
    )
    self_signed: str | None = option(
        None,
        "--self-signed",
        metavar="DIR",
        path="dir",
        help="Make a CA and serving certificate in DIR (kept when present), print the caBundle, serve with them.",
    )
    generate_only: bool = option(
        False, "--generate-only", is_flag=True, help="With --self-signed: print the caBundle and exit."
    )
    dns_names: tuple[str, ...] = option(
        (), "--dns-name", multiple=True, help="With --self-signed: a name the certificate covers."
    )
    address: str = option("0.0.0.0", "--address", show_default=True, help="Address to listen on.")
    port: int = option(8443, "--port", int_range=(0, 65535), show_default=True)
    policies: tuple[str, ...] = option(
        (), "--policies", multiple=True, path="any", help="Policy repository (templates, pinning rules)."
    )
    constraints: str | None = option(
        None, "--constraints", path="dir", help="Compiled constraint sets (compile -o DIR)."
    )
    pinning: tuple[str, ...] = option(
        (), "--pinning", multiple=True, path="any", help="PinningPolicy files (default: from --policies)."
    )
    values_file: str | None = option(None, "--values", path="file", help="Template values (YAML mapping).")
    catalog_file: str | None = option(None, "--catalog", path="file", help="Instance-type catalog file.")
    region: str | None = option(None, "--region", help="Region of the embedded catalog (default us-east-1).")
    timeout_ms: int = option(1000, "--timeout-ms", int_range=(1, None), show_default=True, help="Solver time limit.")
    solver_cache: int = option(4096, "--solver-cache", int_range=(0, None), show_default=True, help="Cached verdicts.")
    max_body_bytes: int = option(4 * 1024 * 1024, "--max-body-bytes", int_range=(1024, None), show_default=True)
    request_timeout: float = option(10.0, "--request-timeout", float_range=(0.1, None), show_default=True)
    idle_timeout: float = option(120.0, "--idle-timeout", float_range=(0.1, None), show_default=True)
    max_connections: int = option(256, "--max-connections", int_range=(1, None), show_default=True)
    max_connections_per_client: int = option(
        64,
        "--max-connections-per-client",
        int_range=(1, None),
        show_default=True,
        help="Connections one client address may hold; beyond it, its own least active connection makes room.",
    )
    handshake_timeout: float = option(5.0, "--handshake-timeout", float_range=(0.1, None), show_default=True)
    admission_timeout: float = option(
        10.0,
        "--admission-timeout",
        float_range=(0.1, None),
        show_default=True,
        help="Cap on a request's deadline (the API server's ?timeout= is used when shorter).",
    )
    workers: int = option(2, "--workers", int_range=(1, None), show_default=True, help="Worker processes.")
    reload_interval: float = option(5.0, "--reload-interval", float_range=(0.1, None), show_default=True)
    shutdown_delay: float = option(5.0, "--shutdown-delay", float_range=(0, None), show_default=True)
    log_format: str = log_format_option()
    log_level: str = log_level_option()


__all__ = ["WebhookFlags"]
