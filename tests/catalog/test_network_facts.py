"""The catalog's network facts (#26): the interfaces of each network card, the EFA interfaces, ENA unsupported and
nested virtualization — what Karpenter v1.14.1's `vpc.amazonaws.com/efa` capacity (aws pkg/providers/instancetype/
types.go `efas`) and its `IsCompatibleWithNodeClass` checks (pkg/providers/instancetype/compatibility/
compatibility.go) read of DescribeInstanceTypes. The embedded catalog takes them from its sources (catalog-sources/,
moto's copy of DescribeInstanceTypes), a refresh from EC2's answer, which must have the shape EC2 gives it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import Catalog, CatalogError, catalog_from_json, catalog_to_json, load_catalog
from karpenter_policy.catalog.build import default_moto_resources
from karpenter_policy.catalog.refresh import instance_type_from_ec2
from karpenter_policy.model.instancetypes import NESTED_VIRTUALIZATION, InstanceType

SOURCES = Path(__file__).resolve().parents[2] / "catalog-sources"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(previous_generation=True)


def _source(pattern: str) -> dict[str, Any]:
    path = sorted(SOURCES.glob(pattern))[-1]
    types: dict[str, Any] = json.loads(path.read_text())["types"]
    return types


def test_efa_interfaces_are_karpenters_efa_resource(catalog: Catalog) -> None:
    """Every type of Karpenter's table offers the `vpc.amazonaws.com/efa` its resources list (types.go `efas`: the
    type's MaximumEfaInterfaces), and none is invented for the others."""
    table = _source("karpenter-instance-types-*.json")
    compared = 0
    for name, row in table.items():
        it = catalog.get(name)
        if it is None:
            continue
        assert it.efa_interfaces == int(row["resources"].get("vpc.amazonaws.com/efa", "0")), name
        compared += 1
    assert compared > 1000
    p4d = catalog.get("p4d.24xlarge")
    assert p4d is not None and p4d.efa_interfaces == 4
    m5 = catalog.get("m5.large")
    assert m5 is not None and m5.efa_interfaces == 0


def test_network_cards_are_the_vpc_limits_cards_in_index_order(catalog: Catalog) -> None:
    limits = _source("karpenter-vpc-limits-*.json")
    compared = 0
    for name, row in limits.items():
        it = catalog.get(name)
        if it is None:
            continue
        cards = sorted(row["networkCards"], key=lambda card: card["networkCardIndex"])
        assert it.network_cards == tuple(card["maximumNetworkInterfaces"] for card in cards), name
        assert it.max_enis == it.network_cards[row["defaultNetworkCardIndex"]], name
        compared += 1
    assert compared > 1000
    p4d = catalog.get("p4d.24xlarge")
    assert p4d is not None and p4d.network_cards == (15, 15, 15, 15)


def test_nested_virtualization_and_ena_are_ec2s(catalog: Catalog) -> None:
    """Only DescribeInstanceTypes says them (moto's copy): a type it describes carries them as EC2 does."""
    moto = default_moto_resources()
    assert moto is not None
    described = json.loads(gzip.decompress((moto / "instance_types.json.gz").read_bytes()))
    nested = ena_unsupported = 0
    for name, info in described.items():
        it = catalog.get(name)
        if it is None:
            continue
        features = info.get("ProcessorInfo", {}).get("SupportedFeatures") or []
        assert it.nested_virtualization == (NESTED_VIRTUALIZATION in features), name
        assert it.ena_unsupported == (info.get("NetworkInfo", {}).get("EnaSupport") == "unsupported"), name
        nested += it.nested_virtualization
        ena_unsupported += it.ena_unsupported
    assert nested > 100 and ena_unsupported > 10


def test_the_network_facts_round_trip_and_are_written_only_when_known() -> None:
    efa = InstanceType(
        "p4d.24xlarge", 96, 1179648, ("amd64",), network_cards=(15, 15, 15, 15), efa_interfaces=4,
        nested_virtualization=True,
    )  # fmt: skip
    old = InstanceType("t2.micro", 1, 1024, ("amd64",), ena_unsupported=True)
    plain = InstanceType("m5.large", 2, 8192, ("amd64",))
    text = catalog_to_json(Catalog("r", (efa, old, plain)))
    assert '"network_cards":[15,15,15,15]' in text and text.count("network_cards") == 1
    assert text.count("efa_interfaces") == 1 and text.count("nested_virtualization") == 1
    assert text.count("ena_unsupported") == 1
    back = catalog_from_json(text)
    assert (back.get("p4d.24xlarge"), back.get("t2.micro"), back.get("m5.large")) == (efa, old, plain)
    assert catalog_to_json(back) == text


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("network_cards", "[15,-1]", r"\(p4d.24xlarge\).network_cards\[1\] must be >= 0"),
        ("network_cards", '"15,15"', r"\(p4d.24xlarge\).network_cards must be a list"),
        ("efa_interfaces", '"4"', r"\(p4d.24xlarge\).efa_interfaces must be an integer"),
        ("nested_virtualization", "1", r"\(p4d.24xlarge\).nested_virtualization must be a boolean"),
    ],
)
def test_a_bad_network_fact_in_a_catalog_file_names_the_type_and_field(field: str, value: str, reason: str) -> None:
    efa = InstanceType("p4d.24xlarge", 96, 1179648, ("amd64",), network_cards=(15, 15), efa_interfaces=4,
                       nested_virtualization=True)  # fmt: skip
    text = catalog_to_json(Catalog("r", (efa,)))
    current = {"network_cards": "[15,15]", "efa_interfaces": "4", "nested_virtualization": "true"}[field]
    bad = text.replace(f'"{field}":{current}', f'"{field}":{value}')
    assert bad != text
    with pytest.raises(CatalogError, match=reason):
        catalog_from_json(bad)


def _described(network: dict[str, Any], processor: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "InstanceType": "p5.48xlarge",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], **(processor or {})},
        "VCpuInfo": {"DefaultVCpus": 192},
        "MemoryInfo": {"SizeInMiB": 2097152},
        "NetworkInfo": network,
    }


def test_a_refresh_reads_the_cards_by_their_index_and_the_efa_count() -> None:
    """EC2 lists the cards in any order: card i is the one whose NetworkCardIndex is i (compatibility.go reads
    `NetworkCards[i]` after checking the count)."""
    it = instance_type_from_ec2(
        _described(
            {
                "NetworkCards": [
                    {"NetworkCardIndex": 1, "MaximumNetworkInterfaces": 2},
                    {"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 7},
                ],
                "DefaultNetworkCardIndex": 0,
                "EfaInfo": {"MaximumEfaInterfaces": 2},
                "EnaSupport": "required",
            },
            {"SupportedFeatures": ["amd-sev-snp", NESTED_VIRTUALIZATION]},
        ),
        (),
        None,
    )
    assert it is not None
    facts = (it.network_cards, it.efa_interfaces, it.ena_unsupported, it.nested_virtualization)
    assert facts == ((7, 2), 2, False, True)
    bare = instance_type_from_ec2(_described({"EnaSupport": "unsupported"}), (), None)
    assert bare is not None
    facts = (bare.network_cards, bare.efa_interfaces, bare.ena_unsupported, bare.nested_virtualization)
    assert facts == ((), 0, True, False)


@pytest.mark.parametrize(
    ("network", "processor", "reason"),
    [
        (
            {"NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 2},
                              {"NetworkCardIndex": 2, "MaximumNetworkInterfaces": 2}]},
            None,
            r"p5.48xlarge: NetworkCards\[\].NetworkCardIndex must be 0..1, got \[0, 2\]",
        ),
        (
            {"NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 2},
                              {"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3}]},
            None,
            "p5.48xlarge: NetworkCards lists card 0 twice",
        ),
        (
            {"NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": "2"}]},
            None,
            r"NetworkCards\[\].MaximumNetworkInterfaces must be an integer",
        ),
        ({"EfaInfo": [4]}, None, "NetworkInfo.EfaInfo must be an object"),
        ({"EfaInfo": {"MaximumEfaInterfaces": -1}}, None, "EfaInfo.MaximumEfaInterfaces must be between 0"),
        ({}, {"SupportedFeatures": NESTED_VIRTUALIZATION}, "ProcessorInfo.SupportedFeatures must be a list"),
    ],
)  # fmt: skip
def test_a_refresh_refuses_network_facts_out_of_ec2s_shape(
    network: dict[str, Any], processor: dict[str, Any] | None, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        instance_type_from_ec2(_described(network, processor), (), None)
