"""What EC2 sells now: where each instance type is offered, spot prices, and on-demand prices.

- Zones: DescribeInstanceTypeOfferings by availability zone.
- Spot: DescribeSpotPriceHistory from now (Linux/UNIX), the latest price per type and zone.
- On-demand: the AWS Price List API (``pricing:GetProducts``), filtered like Karpenter v0.31: the region,
  Linux, shared tenancy, no pre-installed software, capacity status Used, on-demand, for both the
  ``Compute Instance`` and ``Compute Instance (bare metal)`` product families. The Price List API is served from
  a few regions only and is unreachable from isolated partitions; the caller falls back to the embedded
  on-demand table then.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from karpenter_policy.catalog.prices import latest_spot_prices
from karpenter_policy.cloud.aws.answers import AnswerLimits
from karpenter_policy.cloud.aws.api import AwsApi, AwsConnection
from karpenter_policy.cloud.aws.ec2_catalog_source import LINUX_PRODUCT_DESCRIPTIONS
from karpenter_policy.cloud.errors import CloudError

PRODUCT_FAMILIES = ("Compute Instance", "Compute Instance (bare metal)")
#: The Price List API needs few calls but answers slowly: give up quickly and use the embedded table.
PRICING_MAX_ATTEMPTS = 2
#: Instance types per filtered EC2 query (filters take at most 200 values).
TYPES_PER_QUERY = 100


def on_demand_filters(region: str, product_family: str) -> list[dict[str, str]]:
    fields = {
        "regionCode": region,
        "serviceCode": "AmazonEC2",
        "preInstalledSw": "NA",
        "operatingSystem": "Linux",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
        "tenancy": "Shared",
        "productFamily": product_family,
    }
    return [{"Field": field, "Type": "TERM_MATCH", "Value": value} for field, value in fields.items()]


def parse_price_list(items: Iterable[str | dict[str, Any]]) -> dict[str, float]:
    """instance type -> USD/hour from GetProducts' PriceList (each item a JSON document, as a string).

    Items without an instance type or a positive USD price are skipped."""
    prices: dict[str, float] = {}
    for item in items:
        try:
            product = json.loads(item) if isinstance(item, str) else item
            name = product["product"]["attributes"]["instanceType"]
            terms = product["terms"]["OnDemand"]
        except (ValueError, KeyError, TypeError):
            continue
        price = _first_usd_price(terms)
        if isinstance(name, str) and name and price is not None:
            prices[name] = price
    return prices


def _first_usd_price(terms: Any) -> float | None:
    if not isinstance(terms, dict):
        return None
    for term in (terms[key] for key in sorted(terms)):
        dimensions = term.get("priceDimensions") if isinstance(term, dict) else None
        if not isinstance(dimensions, dict):
            continue
        for dimension in (dimensions[key] for key in sorted(dimensions)):
            try:
                price = float(dimension["pricePerUnit"]["USD"])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(price) and price > 0:
                return price
    return None


def fetch_on_demand_prices(api: AwsApi, region: str) -> dict[str, float]:
    """On-demand prices of ``region`` from the Price List API (raises CloudError when it cannot answer)."""
    prices: dict[str, float] = {}
    for family in PRODUCT_FAMILIES:
        items = api.paginate(
            "pricing",
            "get_products",
            "PriceList",
            max_attempts=PRICING_MAX_ATTEMPTS,
            ServiceCode="AmazonEC2",
            Filters=on_demand_filters(region, family),
        )
        prices.update(parse_price_list(items))
    return prices


def on_demand_prices_of_region(
    region: str, endpoint_url: str | None = None, limits: AnswerLimits | None = None
) -> dict[str, float]:
    """`catalog refresh`: the on-demand prices of ``region`` from the Price List API (served from us-east-1;
    ``endpoint_url``: another endpoint, e.g. a test's), each answer within ``limits``. Raises CloudError (no
    credentials, no access, an answer that is not the Price List API's, ...)."""
    api = AwsApi(AwsConnection(region, endpoint_url=endpoint_url))
    if limits is not None:
        limits.install(api.client("pricing", PRICING_MAX_ATTEMPTS))
    try:
        return fetch_on_demand_prices(api, region)
    except (ValueError, TypeError, ArithmeticError) as error:  # botocore's parser on a value it cannot read
        reason = f"the answer is not the Price List API's: {error}"
        raise CloudError(api.endpoint("pricing"), reason, "GetProducts") from None


def _chunks(names: Sequence[str] | None) -> list[list[str] | None]:
    if names is None:
        return [None]
    ordered = sorted(set(names))
    return [ordered[i : i + TYPES_PER_QUERY] for i in range(0, len(ordered), TYPES_PER_QUERY)]


def fetch_spot_prices(
    api: AwsApi, now: dt.datetime, instance_types: Sequence[str] | None = None
) -> dict[str, dict[str, float]]:
    """instance type -> zone -> the latest Linux spot price (of ``instance_types`` only, when given)."""
    entries = []
    for chunk in _chunks(instance_types):
        arguments: dict[str, Any] = {"ProductDescriptions": list(LINUX_PRODUCT_DESCRIPTIONS), "StartTime": now}
        if chunk is not None:
            arguments["InstanceTypes"] = chunk
        for entry in api.paginate("ec2", "describe_spot_price_history", "SpotPriceHistory", **arguments):
            entries.append({**entry, "Timestamp": _iso(entry.get("Timestamp"))})
    prices: dict[str, dict[str, float]] = {}
    for (name, zone), price in sorted(latest_spot_prices(entries).items()):
        prices.setdefault(name, {})[zone] = price
    return prices


def fetch_zones(api: AwsApi, instance_types: Sequence[str] | None = None) -> dict[str, frozenset[str]]:
    """instance type -> the availability zones it is offered in now (``instance_types`` only, when given)."""
    zones: dict[str, set[str]] = {}
    for chunk in _chunks(instance_types):
        arguments: dict[str, Any] = {"LocationType": "availability-zone"}
        if chunk is not None:
            arguments["Filters"] = [{"Name": "instance-type", "Values": chunk}]
        for offering in api.paginate("ec2", "describe_instance_type_offerings", "InstanceTypeOfferings", **arguments):
            name, zone = offering.get("InstanceType"), offering.get("Location")
            if name and zone:
                zones.setdefault(str(name), set()).add(str(zone))
    return {name: frozenset(found) for name, found in sorted(zones.items())}


def _iso(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    return str(value or "")


__all__ = [
    "PRODUCT_FAMILIES",
    "fetch_on_demand_prices",
    "fetch_spot_prices",
    "fetch_zones",
    "on_demand_prices_of_region",
    "on_demand_filters",
    "parse_price_list",
]
