"""`karpenter-policy catalog refresh` against AWS: DescribeInstanceTypes and DescribeInstanceTypeOfferings through
:class:`~karpenter_policy.cloud.aws.ec2_catalog_source.Ec2CatalogSource`, on-demand prices from the Price List API
(GetProducts; a price table file instead when given), spot prices from DescribeSpotPriceHistory — the catalog
written atomically by :func:`karpenter_policy.catalog.refresh.refresh_catalog`.

When the Price List API cannot be asked (no ``pricing:GetProducts`` permission, an isolated partition), the
catalog takes the price table shipped for the region if there is one, else has no price data: it is still
written, and the note says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

from karpenter_policy.catalog import Catalog
from karpenter_policy.catalog.refresh import refresh_catalog, resolve_prices
from karpenter_policy.cloud.aws.ec2_catalog_source import Ec2CatalogSource
from karpenter_policy.cloud.aws.pricing import on_demand_prices_of_region
from karpenter_policy.cloud.errors import CloudError


def refresh_region(
    region: str,
    out: Path,
    *,
    endpoint_url: str | None = None,
    prices_file: Path | None = None,
    spot_prices: bool = True,
    today: dt.date | None = None,
) -> tuple[Catalog, list[str]]:
    """Rebuild `region`'s catalog into `out`; the catalog and notes for the user (how it was priced). Raises
    CatalogError (files) or CloudError (EC2)."""
    notes: list[str] = []
    prices: Path | Mapping[str, float] | None = prices_file
    if prices is None:
        try:
            prices = on_demand_prices_of_region(region, endpoint_url)
        except CloudError as error:
            notes.append(f"the Price List API failed ({error}); on-demand prices: {resolve_prices(None, region)[1]}")
    source = Ec2CatalogSource(region, endpoint_url)
    catalog = refresh_catalog(
        region,
        source,
        prices,
        out,
        source_name=f"EC2 at {source.endpoint}",
        with_spot_prices=spot_prices,
        date=(today or dt.datetime.now(dt.UTC).date()).isoformat(),
    )
    priced = sum(1 for it in catalog if it.price_on_demand is not None)
    if not priced:
        notes.append(f"no price data for {region}: costs will be reported unknown (give --prices FILE)")
    return catalog, notes


__all__ = ["refresh_region"]
