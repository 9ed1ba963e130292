"""Tests of the embedded catalog: it loads offline, is complete and priced (where a price is known), serialises
deterministically, and reports broken files as CatalogError (never a traceback)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from karpenter_policy.catalog import Catalog, CatalogError, catalog_from_json, catalog_to_json, load_catalog
from karpenter_policy.catalog.refresh import load_on_demand_prices, write_catalog
from karpenter_policy.model.instancetypes import InstanceType, Offering

DATA = resources.files("karpenter_policy.catalog").joinpath("data")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_embedded_catalog_loads(catalog: Catalog) -> None:
    assert catalog.region == "us-east-1"
    assert len(catalog) > 700
    assert catalog.names() == tuple(sorted(catalog.names()))
    assert list(catalog) == list(catalog.instance_types)
    assert load_catalog() is catalog  # cached


def test_every_type_is_sane(catalog: Catalog) -> None:
    for it in catalog:
        assert it.vcpu > 0 and it.memory_mib > 0, it.name
        assert it.architectures in (("amd64",), ("arm64",)), it.name
        assert it.family and it.size and it.category, it.name
        for o in it.offerings:
            assert o.zone.startswith("us-east-1") and o.capacity_type in ("on-demand", "spot"), it.name
    assert set(catalog.zones()) <= {f"us-east-1{z}" for z in "abcdef"}


def test_lookups(catalog: Catalog) -> None:
    m5 = catalog.get("m5.large")
    assert m5 is not None and (m5.vcpu, m5.memory_mib, m5.max_pods) == (2, 8192, 29)
    assert "m5.large" in catalog and "m5.nonexistent" not in catalog
    assert catalog.get("mac1.metal") is None  # Mac types are not Kubernetes nodes
    assert {"c5", "m5", "r5", "m7i-flex", "inf2", "trn1", "u-6tb1"} <= set(catalog.families())
    assert {"large", "xlarge", "metal"} <= set(catalog.sizes())
    graviton = catalog.get("m6g.large")
    assert graviton is not None and graviton.architectures == ("arm64",)


def test_prices_attached(catalog: Catalog) -> None:
    prices = load_on_demand_prices()
    priced = [it for it in catalog if it.name in prices]
    assert len(priced) > 700
    for it in priced:
        assert it.price_on_demand == prices[it.name], it.name
        # No spot prices are stored: every offering is priced on-demand.
        assert all(o.price == prices[it.name] and o.available for o in it.offerings), it.name
    unpriced = [it for it in catalog if it.name not in prices]
    assert unpriced  # types newer than the price table (r9g, t8i, ...)
    for it in unpriced:  # no price data: launchable all the same, their cost unknown
        assert it.price_on_demand is None and it.offerings, it.name
        assert all(o.price is None and o.available for o in it.offerings), it.name
    m5 = catalog.get("m5.large")
    assert m5 is not None and m5.cheapest_offering() is not None


def test_embedded_price_file_is_the_shared_table() -> None:
    document = json.loads(DATA.joinpath("ec2-on-demand-prices-us-east-1.json").read_text())
    assert document["region"] == "us-east-1" and document["prices"]["m5.large"] == 0.096


def test_serialisation_is_deterministic_and_round_trips(catalog: Catalog) -> None:
    first = catalog_to_json(catalog)
    assert first == catalog_to_json(catalog)
    assert catalog_from_json(first) == catalog
    assert first.startswith('{"date":"2026-07","format":1,"region":"us-east-1","types":[\n')
    assert all(line.startswith('{"accelerator_count"') for line in first.splitlines()[1:-1])
    unpriced = Catalog("r", (InstanceType("x.large", 2, 4096, ("amd64",), offerings=(Offering("r1a", "spot", None),)),))
    assert '"offerings":[["r1a","spot",null,true]]' in catalog_to_json(unpriced)
    assert catalog_from_json(catalog_to_json(unpriced)) == unpriced


def test_order_does_not_matter() -> None:
    a = InstanceType(
        "b.large", 2, 4096, ("amd64",), offerings=(Offering("z2", "spot", 1.0), Offering("z1", "spot", 1.0))
    )
    b = InstanceType("a.large", 2, 4096, ("arm64",))
    assert catalog_to_json(Catalog("r", (a, b))) == catalog_to_json(Catalog("r", (b, a)))


def test_branch_enis_are_written_only_when_known() -> None:
    trunking = InstanceType("m5.large", 2, 8192, ("amd64",), branch_enis=9)
    plain = InstanceType("t2.micro", 1, 1024, ("amd64",))
    text = catalog_to_json(Catalog("r", (trunking, plain)))
    assert text.count('"branch_enis":9') == 1 and text.count("branch_enis") == 1
    assert catalog_from_json(text).get("m5.large") == trunking
    negative = text.replace('"branch_enis":9', '"branch_enis":-1')
    with pytest.raises(CatalogError, match=r"\(m5.large\).branch_enis must be >= 0"):
        catalog_from_json(negative)


def test_corrupt_file_is_a_catalog_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"format":1,"region":"us-east-1","types":[\n{"name":')
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert caught.value.file == str(path)
    assert str(path) in str(caught.value) and "not valid JSON" in caught.value.reason


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"[]", "the document must be an object"),
        (b'{"format":2,"region":"us-east-1","types":[]}', "unsupported catalog format"),
        (b'{"format":1,"region":"us-east-1","types":[{"name":"m5.large"}]}', "types[0]: missing field"),
        (b'{"format":1,"region":"us-east-1"}', "types must be a list"),
    ],
)
def test_invalid_content_is_a_catalog_error(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert reason in caught.value.reason and caught.value.file == str(path)


def test_wrong_field_type_names_the_type(catalog: Catalog, tmp_path: Path) -> None:
    lines = catalog_to_json(catalog).splitlines()
    lines[1] = lines[1].replace('"vcpu":', '"vcpu":"eight","x":', 1)
    path = tmp_path / "wrong.json"
    path.write_text("\n".join(lines))
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert f"({catalog.names()[0]}).vcpu must be an integer" in caught.value.reason


def test_missing_file_and_region_are_catalog_errors(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no such file"):
        load_catalog(tmp_path / "absent.json")
    with pytest.raises(CatalogError, match="is a directory"):
        load_catalog(tmp_path)
    with pytest.raises(CatalogError, match="no embedded catalog for region 'xx-nowhere-1'"):
        load_catalog(region="xx-nowhere-1")


def test_write_is_atomic_and_loadable(catalog: Catalog, tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    out.write_text("old content")
    write_catalog(catalog, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.json"]  # no temp file left behind
    assert load_catalog(out) == catalog
    with pytest.raises(CatalogError, match="does not exist"):
        write_catalog(catalog, tmp_path / "missing-dir" / "catalog.json")


def test_price_file_errors(tmp_path: Path) -> None:
    other = tmp_path / "prices.json"
    other.write_text(json.dumps({"region": "eu-west-1", "prices": {"m5.large": 0.107}}))
    with pytest.raises(CatalogError, match="prices are for region 'eu-west-1', not 'us-east-1'"):
        load_on_demand_prices(other, "us-east-1")
    other.write_text(json.dumps({"prices": {"m5.large": -1}}))
    with pytest.raises(CatalogError, match="finite number"):
        load_on_demand_prices(other, "us-east-1")
    with pytest.raises(CatalogError, match="no such file|No such file"):
        load_on_demand_prices(tmp_path / "absent.json", "us-east-1")
    with pytest.raises(CatalogError, match="no on-demand price table shipped"):
        load_on_demand_prices(None, "xx-nowhere-1")
