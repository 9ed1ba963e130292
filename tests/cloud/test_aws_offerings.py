"""AwsCloudProvider.instance_types: catalog types with live zones and prices, over HTTP (moto + stubs)."""

from __future__ import annotations

import socket

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud import Throttled
from karpenter_policy.cloud.aws.api import AwsConnection
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings
from karpenter_policy.model.instancetypes import InstanceType

from .conftest import REGION, SMALL_CATALOG, ZONES, AwsEnv, catalog_types


def by_name(types: list[InstanceType]) -> dict[str, InstanceType]:
    return {it.name: it for it in types}


def price(it: InstanceType, zone: str, capacity_type: str) -> float:
    return next(o.price for o in it.offerings if (o.zone, o.capacity_type) == (zone, capacity_type))


def test_offerings_are_where_ec2_offers_each_type_priced_by_the_spot_market_and_the_price_list(aws: AwsEnv) -> None:
    aws.prices["m5.large"] = 0.1234
    provider = aws.provider()

    types = by_name(provider.instance_types())

    assert sorted(types) == sorted(SMALL_CATALOG)
    offered = aws.ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]
    )["InstanceTypeOfferings"]
    m5 = types["m5.large"]
    assert set(m5.zones()) == {o["Location"] for o in offered}
    spot = aws.ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"]
    moto_spot = {p["AvailabilityZone"]: float(p["SpotPrice"]) for p in spot}
    for zone in m5.zones():
        assert price(m5, zone, "on-demand") == 0.1234  # the Price List API
        assert price(m5, zone, "spot") == moto_spot[zone]  # the spot market, not the catalog
    assert m5.price_on_demand == 0.1234
    # The Price List stub does not know c5.large: its embedded (catalog) price stays.
    c5 = types["c5.large"]
    embedded = load_catalog().get("c5.large")
    assert embedded is not None and embedded.price_on_demand is not None
    assert price(c5, c5.zones()[0], "on-demand") == embedded.price_on_demand
    assert all(o.available for it in types.values() for o in it.offerings)


def test_the_price_list_is_queried_like_karpenter(aws: AwsEnv) -> None:
    aws.provider().instance_types()

    calls = aws.proxy.calls_to("GetProducts")
    assert [c.params["ServiceCode"] for c in calls] == ["AmazonEC2", "AmazonEC2"]
    filters = [{f["Field"]: f["Value"] for f in c.params["Filters"]} for c in calls]
    assert [f.pop("productFamily") for f in filters] == ["Compute Instance", "Compute Instance (bare metal)"]
    assert (
        filters[0]
        == filters[1]
        == {
            "regionCode": REGION,
            "serviceCode": "AmazonEC2",
            "preInstalledSw": "NA",
            "operatingSystem": "Linux",
            "capacitystatus": "Used",
            "marketoption": "OnDemand",
            "tenancy": "Shared",
        }
    )
    assert all(f["Type"] == "TERM_MATCH" for c in calls for f in c.params["Filters"])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_price_list_falls_back_to_the_embedded_table(aws: AwsEnv) -> None:
    connection = AwsConnection(
        REGION,
        endpoint_url=aws.proxy.url,
        endpoints={"pricing": f"http://127.0.0.1:{_closed_port()}"},
        max_attempts=1,
        connect_timeout=2,
    )
    cluster = ClusterSettings("https://example", "Q0E=", "1.27")
    provider = AwsCloudProvider(connection, cluster, catalog_types(SMALL_CATALOG), clock=aws.clock)

    m5 = by_name(provider.instance_types())["m5.large"]

    embedded = load_catalog().get("m5.large")
    assert embedded is not None
    assert m5.price_on_demand == embedded.price_on_demand
    assert price(m5, "us-east-1a", "on-demand") == embedded.price_on_demand
    assert all(o.available for o in m5.offerings if o.capacity_type == "on-demand")


@pytest.mark.slow
def test_a_failing_price_list_falls_back_and_recovers_after_the_retry_period(aws: AwsEnv) -> None:
    aws.proxy.fail("GetProducts", times=2, status=500)  # both attempts of the first query
    aws.prices["m5.large"] = 0.5
    provider = aws.provider()

    embedded = load_catalog().get("m5.large")
    assert embedded is not None
    assert by_name(provider.instance_types())["m5.large"].price_on_demand == embedded.price_on_demand
    aws.clock.advance(299)
    assert by_name(provider.instance_types())["m5.large"].price_on_demand == embedded.price_on_demand
    aws.clock.advance(2)
    assert by_name(provider.instance_types())["m5.large"].price_on_demand == 0.5


@pytest.mark.slow
def test_live_data_is_cached_for_the_refresh_period(aws: AwsEnv) -> None:
    provider = aws.provider()
    provider.instance_types()
    provider.instance_types()
    assert len(aws.proxy.calls_to("DescribeInstanceTypeOfferings")) == 1
    assert len(aws.proxy.calls_to("DescribeSpotPriceHistory")) == 1
    assert len(aws.proxy.calls_to("GetProducts")) == 2  # two product families, once

    aws.clock.advance(301)
    provider.instance_types()
    assert len(aws.proxy.calls_to("DescribeInstanceTypeOfferings")) == 2
    assert len(aws.proxy.calls_to("DescribeSpotPriceHistory")) == 2
    assert len(aws.proxy.calls_to("GetProducts")) == 2  # the price list is refreshed every 12 hours

    aws.clock.advance(12 * 3600)
    provider.instance_types()
    assert len(aws.proxy.calls_to("GetProducts")) == 4


def test_a_failing_refresh_keeps_the_previous_offerings_until_it_succeeds(aws: AwsEnv) -> None:
    provider = aws.provider(max_attempts=1)
    before = provider.instance_types()
    aws.proxy.throttle("DescribeSpotPriceHistory", times=None)
    aws.clock.advance(301)

    assert provider.instance_types() == before
    assert len(aws.proxy.calls_to("DescribeSpotPriceHistory")) == 2
    assert provider.instance_types() == before
    assert len(aws.proxy.calls_to("DescribeSpotPriceHistory")) == 2  # retried after 30 s, not at every call
    aws.clock.advance(31)
    provider.instance_types()
    assert len(aws.proxy.calls_to("DescribeSpotPriceHistory")) == 3


@pytest.mark.slow
def test_without_any_previous_answer_a_failing_call_is_an_error(aws: AwsEnv) -> None:
    aws.proxy.throttle("DescribeInstanceTypeOfferings", times=None)
    with pytest.raises(Throttled, match="DescribeInstanceTypeOfferings"):
        aws.provider(max_attempts=1).instance_types()


def test_a_small_catalog_is_priced_with_queries_filtered_by_type(aws: AwsEnv) -> None:
    aws.provider().instance_types()

    (offerings,) = aws.proxy.calls_to("DescribeInstanceTypeOfferings")
    (spot,) = aws.proxy.calls_to("DescribeSpotPriceHistory")
    assert sorted(v for k, v in offerings.params.items() if k.startswith("Filter.1.Value")) == sorted(SMALL_CATALOG)
    assert sorted(v for k, v in spot.params.items() if k.startswith("InstanceType.")) == sorted(SMALL_CATALOG)


def test_a_node_template_limits_offerings_to_its_subnets_zones(aws: AwsEnv) -> None:
    provider = aws.provider()

    everywhere = by_name(provider.instance_types())["m5.large"]
    in_subnets = by_name(provider.instance_types(provider=aws.spec()))["m5.large"]

    assert set(everywhere.zones()) > set(ZONES)
    assert in_subnets.zones() == ZONES


@pytest.mark.slow
def test_marked_offerings_are_unavailable_for_three_minutes(aws: AwsEnv) -> None:
    provider = aws.provider()
    provider.mark_unavailable("m5.large", "us-east-1a", "spot", "spot interruption warning")

    def available() -> bool:
        m5 = by_name(provider.instance_types())["m5.large"]
        return next(o.available for o in m5.offerings if (o.zone, o.capacity_type) == ("us-east-1a", "spot"))

    assert not available()
    assert provider.unavailable.reason("m5.large", "us-east-1a", "spot") == "spot interruption warning"
    aws.clock.advance(180)
    assert available()


def test_another_region_is_refused(aws: AwsEnv) -> None:
    with pytest.raises(ValueError, match="serves region us-east-1, not eu-west-1"):
        aws.provider().instance_types("eu-west-1")


def test_a_caller_changing_its_list_changes_no_later_answer(aws: AwsEnv) -> None:
    provider = aws.provider()
    for spec in (None, aws.spec()):
        before = provider.instance_types(provider=spec)
        expected = list(before)
        before.clear()
        before.append(catalog_types(["m5.large"])[0])

        assert provider.instance_types(provider=spec) == expected


def test_types_in_the_subnets_zones_are_made_again_only_when_the_zones_or_live_data_change(aws: AwsEnv) -> None:
    """Not a copy of every type per call (#26): the same settings, answers and zones give the same objects."""
    provider = aws.provider()
    everywhere = by_name(provider.instance_types())
    first = provider.instance_types(provider=aws.spec())
    again = provider.instance_types(provider=aws.spec())
    assert all(a is b for a, b in zip(first, again, strict=True))

    one_zone = by_name(provider.instance_types(provider=aws.spec(subnetSelector={"aws-ids": aws.subnets[ZONES[0]]})))
    assert one_zone["m5.large"].zones() == (ZONES[0],)
    assert by_name(provider.instance_types(provider=aws.spec()))["m5.large"].zones() == ZONES
    assert everywhere["m5.large"] is by_name(provider.instance_types())["m5.large"]

    aws.clock.advance(301)  # new offerings and spot answers: the live types are made again, and so the zoned ones
    refreshed = provider.instance_types(provider=aws.spec())
    assert refreshed == first
    assert not any(a is b for a, b in zip(first, refreshed, strict=True))
