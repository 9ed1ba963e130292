"""`karpenter-policy catalog refresh` against AWS: DescribeInstanceTypes and DescribeInstanceTypeOfferings through
:class:`~karpenter_policy.cloud.aws.ec2_catalog_source.Ec2CatalogSource`, on-demand prices from the Price List API
(GetProducts; a price table file instead when given), spot prices from DescribeSpotPriceHistory — the catalog
built by :func:`karpenter_policy.catalog.refresh.build_catalog` and written atomically by
:func:`~karpenter_policy.catalog.refresh.write_catalog`.

When the Price List API cannot be asked (no ``pricing:GetProducts`` permission, an isolated partition), the
catalog takes the price table shipped for the region if there is one, else has no price data: it is still
written, and the note says so.

The endpoint is not trusted (`--endpoint-url` can name anything): every answer is read within
:mod:`~karpenter_policy.cloud.aws.answers`' size bounds, and the whole refresh within ``timeout`` seconds — the
answers are fetched by a worker thread that the refresh stops waiting for at the deadline (a trickling answer
defeats per-read timeouts), and the file is written only after, by the caller's thread: whole, or not at all.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from karpenter_policy.catalog import Catalog
from karpenter_policy.catalog.refresh import build_catalog, resolve_prices, write_catalog
from karpenter_policy.cloud.aws.answers import AnswerLimits
from karpenter_policy.cloud.aws.ec2_catalog_source import Ec2CatalogSource
from karpenter_policy.cloud.aws.pricing import on_demand_prices_of_region
from karpenter_policy.cloud.errors import CloudError

#: How long a refresh may take, all answers included (AWS answers in seconds; the Price List API in tens).
DEFAULT_TIMEOUT_SECONDS = 300.0
_T = TypeVar("_T")


def _within(seconds: float, endpoint: str, work: Callable[[], _T]) -> _T:
    """`work()` in a worker thread, waited for at most `seconds`; raises CloudError when it is not done by then
    (the thread is left to stop at its own bounds: it writes nothing)."""
    outcome: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the caller's thread, which raises it
            failure.append(error)

    worker = threading.Thread(target=run, name="catalog-refresh", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CloudError(
            endpoint, f"no complete answer within {seconds:g} s (--timeout): the endpoint is too slow or silent"
        )
    if failure:
        raise failure[0]
    return outcome[0]


def refresh_region(
    region: str,
    out: Path,
    *,
    endpoint_url: str | None = None,
    prices_file: Path | None = None,
    spot_prices: bool = True,
    today: dt.date | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> tuple[Catalog, list[str]]:
    """Rebuild `region`'s catalog into `out`, every answer bounded and all of them within `timeout` seconds; the
    catalog and notes for the user (how it was priced). Raises CatalogError (files, an empty answer) or CloudError
    (EC2, an answer out of bounds, the deadline)."""
    limits = AnswerLimits(time.monotonic() + timeout, timeout_seconds=timeout)
    read_timeout = min(60.0, timeout)
    endpoint = endpoint_url or f"https://ec2.{region}.amazonaws.com"

    def fetch() -> tuple[Catalog, list[str]]:
        notes: list[str] = []
        prices: Path | Mapping[str, float] | None = prices_file
        if prices is None:
            try:
                prices = on_demand_prices_of_region(region, endpoint_url, limits)
            except CloudError as error:
                notes.append(
                    f"the Price List API failed ({error}); on-demand prices: {resolve_prices(None, region)[1]}"
                )
        source = Ec2CatalogSource(region, endpoint_url, read_timeout=read_timeout, limits=limits)
        on_demand, _ = resolve_prices(prices, region)
        catalog = build_catalog(
            source,
            on_demand,
            region,
            with_spot_prices=spot_prices,
            source_name=f"EC2 at {source.endpoint}",
            date=(today or dt.datetime.now(dt.UTC).date()).isoformat(),
        )
        return catalog, notes

    catalog, notes = _within(timeout, endpoint, fetch)
    write_catalog(catalog, out)
    priced = sum(1 for it in catalog if it.price_on_demand is not None)
    if not priced:
        notes.append(f"no price data for {region}: costs will be reported unknown (give --prices FILE)")
    return catalog, notes


__all__ = ["refresh_region"]
