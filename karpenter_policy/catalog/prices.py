"""Prices of a catalog: the on-demand price table format, DescribeSpotPriceHistory's latest prices, and a catalog
repriced with them.

The on-demand price table (what ``catalog refresh --prices FILE`` reads, and what the embedded catalog ships for
us-east-1) is a JSON object::

    {"region": "us-east-1", "currency": "USD", "unit": "hour", "generated_at": "2026-07-20T13:44:30Z",
     "source": "...", "prices": {"m5.large": 0.096, "m5.xlarge": 0.192, ...}}

Only ``prices`` (instance type -> USD per hour, a finite number >= 0) is required; ``region``, when present,
must be the catalog's, so a catalog never gets another region's prices.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from karpenter_policy.catalog.catalog import Catalog, CatalogError, embedded_data_file, on_demand_prices_file_name
from karpenter_policy.model import labels as wk


def load_on_demand_prices(path: Path | None = None, region: str = "us-east-1") -> dict[str, float]:
    """The on-demand price table (instance type -> USD/hour): ``path``, or the one shipped for ``region``."""
    if path is None:
        resource = embedded_data_file(on_demand_prices_file_name(region))
        label = f"karpenter_policy/catalog/data/{on_demand_prices_file_name(region)}"
        if not resource.is_file():
            raise CatalogError(label, f"no on-demand price table shipped for region {region!r}; pass one")
        read = resource.read_bytes
    else:
        label = str(path)
        read = Path(path).read_bytes
    try:
        document = json.loads(read())
    except OSError as exc:
        raise CatalogError(label, exc.strerror or str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(label, f"not valid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("prices"), dict):
        raise CatalogError(label, 'expected an object with a "prices" object (instance type -> USD per hour)')
    file_region = document.get("region")
    if file_region is not None and file_region != region:
        raise CatalogError(label, f"prices are for region {file_region!r}, not {region!r}")
    prices: dict[str, float] = {}
    for name, price in document["prices"].items():
        if isinstance(price, bool) or not isinstance(price, int | float) or not math.isfinite(price) or price < 0:
            raise CatalogError(label, f"price of {name!r} must be a finite number >= 0, got {price!r}")
        prices[str(name)] = float(price)
    return prices


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def latest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(instance type, zone) -> the most recent spot price in a DescribeSpotPriceHistory result."""
    latest: dict[tuple[str, str], tuple[str, float]] = {}
    for entry in history:
        name, zone = _str(entry.get("InstanceType")), _str(entry.get("AvailabilityZone"))
        try:
            price = float(entry.get("SpotPrice", ""))
        except (TypeError, ValueError):
            continue
        if not name or not zone or not math.isfinite(price) or price < 0:
            continue
        stamp = _str(entry.get("Timestamp"))
        key = (name, zone)
        if key not in latest or stamp >= latest[key][0]:
            latest[key] = (stamp, price)
    return {key: price for key, (_, price) in latest.items()}


def with_spot_prices(catalog: Catalog, prices: Mapping[tuple[str, str], float]) -> tuple[Catalog, int]:
    """`catalog` with its spot offerings priced from `prices` ((instance type, zone) -> $/h), and how many spot
    offerings had no price there (they keep theirs: the on-demand price in the embedded catalog, or none)."""
    missing = 0
    types = []
    for it in catalog.instance_types:
        offerings = []
        for o in it.offerings:
            if o.capacity_type == wk.CAPACITY_SPOT:
                price = prices.get((it.name, o.zone))
                if price is None:
                    missing += o.available
                else:
                    o = dataclasses.replace(o, price=price)
            offerings.append(o)
        types.append(dataclasses.replace(it, offerings=tuple(offerings)))
    return dataclasses.replace(catalog, instance_types=tuple(types)), missing


__all__ = ["latest_spot_prices", "load_on_demand_prices", "with_spot_prices"]
