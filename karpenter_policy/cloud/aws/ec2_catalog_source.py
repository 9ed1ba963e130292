"""EC2 as a source for the instance-type catalog, through boto3 paginators (real AWS or moto's server).

Implements the ``EC2CatalogSource`` protocol of :mod:`karpenter_policy.catalog.refresh` structurally (this
module does not import the catalog package). Results are plain dicts and lists as EC2 returns them, with
timestamps turned into ISO-8601 strings. Every botocore failure (endpoint unreachable, no credentials, API
error, an answer botocore cannot parse, ...) becomes a :class:`~karpenter_policy.cloud.CloudError` naming the
endpoint and the reason. The endpoint is not trusted: with :class:`~karpenter_policy.cloud.aws.answers.AnswerLimits`
every answer is read within a size bound and a deadline, and each operation may return at most `MAX_ITEMS` of
its items (far more than any region has: EC2 sells about 900 instance types).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from karpenter_policy.cloud.aws.answers import AnswerLimits
from karpenter_policy.cloud.aws.errors import reason as _reason
from karpenter_policy.cloud.aws.sessions import new_session
from karpenter_policy.cloud.errors import CloudError

# What Karpenter asks DescribeSpotPriceHistory for: Linux prices, EC2-Classic and VPC descriptions.
LINUX_PRODUCT_DESCRIPTIONS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")

_T = TypeVar("_T")

#: The most items an operation may return: instance types, their zone offerings, spot prices (latest per type,
#: zone and product description), each several times what EC2 has in its largest region.
MAX_ITEMS = {"InstanceTypes": 5_000, "InstanceTypeOfferings": 100_000, "SpotPriceHistory": 200_000}


def _plain(value: Any) -> Any:
    """Deep-copy a boto3 result into JSON-friendly values (datetimes become ISO-8601 strings)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return value


class Ec2CatalogSource:
    """Reads instance types, their zone offerings and spot prices from one EC2 endpoint."""

    def __init__(
        self,
        region: str,
        endpoint_url: str | None = None,
        *,
        max_attempts: int = 3,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        limits: AnswerLimits | None = None,
    ) -> None:
        self.region = region
        self.limits = limits
        self.endpoint = endpoint_url or f"https://ec2.{region}.amazonaws.com"
        config = Config(
            region_name=region,
            retries={"max_attempts": max_attempts, "mode": "standard"},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        try:
            # A session of its own: credentials are resolved now, not cached from an earlier client.
            session = new_session(region_name=region)
            self._ec2: Any = session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=config)
        except (BotoCoreError, ValueError) as exc:
            raise CloudError(self.endpoint, _reason(exc), "create EC2 client") from None
        self.endpoint = str(self._ec2.meta.endpoint_url)
        if limits is not None:
            limits.install(self._ec2)

    def describe_instance_types(self) -> list[dict[str, Any]]:
        """Every instance type the region describes (DescribeInstanceTypes, all pages)."""
        return self._call(
            "DescribeInstanceTypes",
            lambda: self._collect("describe_instance_types", "InstanceTypes"),
        )

    def describe_instance_type_offerings(self, location_type: str = "availability-zone") -> list[dict[str, Any]]:
        """Where each type is offered (DescribeInstanceTypeOfferings by ``location_type``, all pages)."""
        return self._call(
            "DescribeInstanceTypeOfferings",
            lambda: self._collect(
                "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType=location_type
            ),
        )

    def describe_spot_price_history(
        self,
        instance_types: Sequence[str] | None = None,
        product_descriptions: Sequence[str] = LINUX_PRODUCT_DESCRIPTIONS,
        start_time: dt.datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Current spot prices (DescribeSpotPriceHistory from ``start_time``, default now, all pages)."""
        kwargs: dict[str, Any] = {
            "ProductDescriptions": list(product_descriptions),
            "StartTime": start_time or dt.datetime.now(dt.UTC),
        }
        if instance_types:
            kwargs["InstanceTypes"] = list(instance_types)
        return self._call(
            "DescribeSpotPriceHistory",
            lambda: self._collect("describe_spot_price_history", "SpotPriceHistory", **kwargs),
        )

    def _collect(self, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        most = MAX_ITEMS[key]
        api_name = self._ec2.meta.method_to_api_mapping.get(operation, operation)
        for page in self._pages(operation, **kwargs):
            found = page.get(key, [])
            if not isinstance(found, list):
                raise CloudError(self.endpoint, f"{key} is not a list: not an EC2 answer", api_name)
            items.extend(_plain(item) for item in found)
            if len(items) > most:
                raise CloudError(self.endpoint, f"more than {most:,} {key}: not an EC2 answer", api_name)
        return items

    def _pages(self, operation: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        paginator = self._ec2.get_paginator(operation)
        yield from paginator.paginate(**kwargs)

    def _call(self, operation: str, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except (BotoCoreError, ClientError, ResponseParserError) as exc:
            raise CloudError(self.endpoint, _reason(exc), operation) from None
        except (ValueError, TypeError, ArithmeticError) as exc:  # botocore's parser on a value it cannot read
            what = self.limits.describe_bad_value(exc) if self.limits is not None else f"the answer is not EC2's: {exc}"
            raise CloudError(self.endpoint, what, operation) from None
