"""boto3 clients for one region, and calls through them that raise only cloud errors.

:class:`AwsConnection` says where to talk to (region, an endpoint URL for every service or per service, e.g.
moto's server in tests, credentials) and how (botocore ``standard`` retries, which back off on throttling and
5xx answers, and timeouts). :class:`AwsApi` makes the clients once (its session is its own, on the process's
one botocore loader: ``cloud.aws.sessions``) and runs calls and paginations, turning
every botocore failure into a :class:`~karpenter_policy.cloud.CloudError` naming the endpoint and operation —
an answer whose JSON has a shape botocore's parser trips on (``{"cluster": []}`` raises AttributeError inside it)
included: a cloud error, never an exception that reaches a controller's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.config import Config

from karpenter_policy.cloud.aws.errors import SDK_ERRORS, reason, translate
from karpenter_policy.cloud.aws.sessions import new_session
from karpenter_policy.cloud.errors import CloudError

#: Where the AWS Price List API is served (it lives in a few regions only; us-east-1 answers for all).
PRICING_REGION = "us-east-1"


@dataclass(frozen=True)
class AwsConnection:
    """How to reach AWS. ``endpoint_url`` applies to every service unless ``endpoints`` names one for it
    (keys are boto3 service names: ``ec2``, ``ssm``, ``pricing``). Credentials default to boto3's chain.
    ``max_attempts`` counts every attempt of a call, the first included."""

    region: str
    endpoint_url: str | None = None
    endpoints: Mapping[str, str] = field(default_factory=dict)
    pricing_region: str = PRICING_REGION
    max_attempts: int = 5
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    #: HTTP connections kept per service: as many as calls are made at once (parallel launches).
    max_pool_connections: int = 10

    def endpoint_for(self, service: str) -> str | None:
        return self.endpoints.get(service) or self.endpoint_url


class AwsApi:
    """Clients per service (made on first use) and calls that raise cloud errors only."""

    def __init__(self, connection: AwsConnection) -> None:
        self.connection = connection
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        try:
            self._session = new_session(
                region_name=connection.region,
                aws_access_key_id=connection.access_key_id,
                aws_secret_access_key=connection.secret_access_key,
                aws_session_token=connection.session_token,
            )
        except SDK_ERRORS as exc:
            raise CloudError(connection.endpoint_url or "AWS", reason(exc), "create session") from None

    def client(self, service: str, max_attempts: int | None = None) -> Any:
        """The boto3 client of ``service`` (pricing talks to its own region)."""
        key = f"{service}/{max_attempts}"
        with self._lock:
            if key not in self._clients:
                region = self.connection.pricing_region if service == "pricing" else self.connection.region
                config = Config(
                    region_name=region,
                    retries={"total_max_attempts": max_attempts or self.connection.max_attempts, "mode": "standard"},
                    connect_timeout=self.connection.connect_timeout,
                    read_timeout=self.connection.read_timeout,
                    max_pool_connections=self.connection.max_pool_connections,
                )
                endpoint = self.connection.endpoint_for(service)
                try:
                    self._clients[key] = self._session.client(
                        service, region_name=region, endpoint_url=endpoint, config=config
                    )
                except (*SDK_ERRORS, ValueError) as exc:
                    raise CloudError(endpoint or service, reason(exc), f"create {service} client") from None
            return self._clients[key]

    def endpoint(self, service: str) -> str:
        return str(self.client(service).meta.endpoint_url)

    def call(self, service: str, operation: str, *, max_attempts: int | None = None, **kwargs: Any) -> Any:
        """Call ``operation`` (boto3's snake_case method name) of ``service``."""
        client = self.client(service, max_attempts)
        try:
            return getattr(client, operation)(**kwargs)
        except SDK_ERRORS as exc:
            raise translate(exc, str(client.meta.endpoint_url), _api_name(client, operation)) from None
        except PARSER_SLIPS as exc:
            raise _misshapen(exc, client, operation) from None

    def paginate(
        self, service: str, operation: str, key: str, *, max_attempts: int | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Every item under ``key`` of every page of ``operation``."""
        client = self.client(service, max_attempts)
        try:
            for page in client.get_paginator(operation).paginate(**kwargs):
                yield from page.get(key, [])
        except SDK_ERRORS as exc:
            raise translate(exc, str(client.meta.endpoint_url), _api_name(client, operation)) from None
        except PARSER_SLIPS as exc:
            raise _misshapen(exc, client, operation) from None


#: What botocore's response parsers raise on a JSON answer of another shape than the operation's (not wrapped in
#: its own ResponseParserError).
PARSER_SLIPS = (AttributeError, TypeError, KeyError, ValueError)


def _misshapen(exc: BaseException, client: Any, operation: str) -> CloudError:
    return CloudError(str(client.meta.endpoint_url), f"an answer of another shape: {type(exc).__name__}",
                      _api_name(client, operation))


def _api_name(client: Any, operation: str) -> str:
    """``describe_instances`` -> ``DescribeInstances`` (the name AWS documents and IAM policies use)."""
    names: dict[str, str] = getattr(client.meta, "method_to_api_mapping", {})
    return names.get(operation, operation)


__all__ = ["PRICING_REGION", "AwsApi", "AwsConnection"]
