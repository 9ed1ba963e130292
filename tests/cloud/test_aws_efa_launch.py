"""The launch template of a claim whose pods request `vpc.amazonaws.com/efa`, and the EFA an instance is launched
with (issue #26), as Karpenter v1.14.1 builds them: aws pkg/providers/launchtemplate/launchtemplate.go:334-353
(`generateNetworkInterfaces`' EFA branch) and pkg/providers/instance/instance.go:699-720
(`getEFACountForInstance`). The suites' cases are ported on `template_data` and `launched_efas` (pure); the
end-to-end launch over moto is tests/reconcile/test_v1_efa_pods.py."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.aws.launchtemplates import template_data
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.nodeclassfit import launched_efas

G4DN = InstanceType("g4dn.8xlarge", 32, 131072, ("amd64",), network_cards=(4,), efa_interfaces=1)


def _data(efa_count: int, **options: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "image_id": "ami-1", "user_data": "", "security_groups": ["sg-2", "sg-1"], "instance_profile": "p",
        "block_devices": (), "metadata": {}, "detailed_monitoring": False,
    }  # fmt: skip
    return template_data(**base, **options, efa_count=efa_count)


def test_one_efa_interface_per_card_card_0_primary() -> None:
    """launchtemplate.go:335-340: card i, device index 0 on card 0 and 1 on the others, type `efa`, the security
    groups; no SecurityGroupIds at the top (EC2 takes them on the interfaces)."""
    data = _data(4)
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in data["NetworkInterfaces"]] == [
        (0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa"), (3, 1, "efa")]
    assert all(i["Groups"] == ["sg-1", "sg-2"] for i in data["NetworkInterfaces"])
    assert "SecurityGroupIds" not in data


@pytest.mark.parametrize(("public_ip", "expected"), [(True, True), (False, False)])
def test_associate_public_ip_address_with_efa(public_ip: bool, expected: bool) -> None:
    """launchtemplate suite_test.go:2349-2350 "AssociatePublicIPAddress is true/false (EFA)": the first interface
    carries the class's value."""
    assert _data(2, public_ip=public_ip)["NetworkInterfaces"][0]["AssociatePublicIpAddress"] is expected


@pytest.mark.parametrize(("public_ip", "expected"), [(None, None), (True, True)])
def test_ipv6_cluster_with_efa(public_ip: bool | None, expected: bool | None) -> None:
    """launchtemplate suite_test.go:2579-2580 "AssociatePublicIPAddress is not set / set as true and EFA is true":
    in an IPv6 cluster the first interface is `efa`, PrimaryIpv6 with one IPv6 address, and the public address as
    the class sets it (unset: none written)."""
    first = _data(2, public_ip=public_ip, ipv6=True)["NetworkInterfaces"][0]
    assert (first["InterfaceType"], first["PrimaryIpv6"], first["Ipv6AddressCount"]) == ("efa", True, 1)
    assert first.get("AssociatePublicIpAddress") is expected


def test_prefixes_and_connection_tracking_go_on_every_efa_interface() -> None:
    """launchtemplate.go:342-352: Ipv4PrefixCount (an IPv6 cluster's Ipv6PrefixCount) and the connection tracking
    on each interface."""
    tracking = {"TcpEstablishedTimeout": 60}
    v4 = _data(2, ip_prefix_count=1, connection_tracking=tracking)["NetworkInterfaces"]
    assert all(i["Ipv4PrefixCount"] == 1 and i["ConnectionTrackingSpecification"] == tracking for i in v4)
    v6 = _data(2, ip_prefix_count=1, ipv6=True)["NetworkInterfaces"]
    assert all(i["Ipv6PrefixCount"] == 1 and "Ipv4PrefixCount" not in i for i in v6)


def test_the_class_s_interfaces_win_over_the_efa_branch() -> None:
    """launchtemplate.go:302 before :334: a class that sets `networkInterfaces` is launched with them, whatever the
    EFA count."""
    interfaces = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    data = _data(4, interfaces=interfaces)
    assert [i["InterfaceType"] for i in data["NetworkInterfaces"]] == ["interface"]


def test_no_efa_no_efa_interface() -> None:
    assert "NetworkInterfaces" not in _data(0)


@pytest.mark.parametrize(
    ("interfaces", "expected"),
    [
        ([(0, 0, "interface"), (0, 1, "efa-only")], 1),
        ([(0, 0, "interface")], 0),
    ],
)
def test_efa_count_from_the_class_s_interfaces(interfaces: list[tuple[int, int, str]], expected: int) -> None:
    """instance suite_test.go:890-923 "should set EFACount based on NodeClass NetworkInterfaces configuration"
    (g4dn.8xlarge): with 1 EFA device → 1, with none → 0, without the claim requesting EFA; so the node advertises
    the resource with the `efa-only` interface and not with ENA ones only (cloudprovider suite_test.go:1470, :1498;
    `reconcile.state.nodes.node_object` drops it at 0)."""
    spec = {"networkInterfaces": [{"networkCardIndex": c, "deviceIndex": d, "interfaceType": t}
                                  for c, d, t in interfaces]}  # fmt: skip
    assert launched_efas(G4DN, spec, efa_requested=False) == expected


def test_efa_count_from_the_type_when_the_claim_requests_it() -> None:
    """instance suite_test.go:926 "should set EFACount based on instance type capacity when NodeClaim requests
    EFA" (g4dn.8xlarge: 1) and :945 "should set EFACount to 0 when no EFA is configured" — the node advertising it
    or not (cloudprovider suite_test.go:1440, :1457; over moto in tests/reconcile/test_v1_efa_pods.py)."""
    assert launched_efas(G4DN, {}, efa_requested=True) == 1
    assert launched_efas(G4DN, {}, efa_requested=False) == 0


def test_the_catalog_s_g4dn_8xlarge_has_the_suite_s_efa() -> None:
    """The embedded catalog's g4dn.8xlarge has the one EFA interface the suite's fake does."""
    g4dn = load_catalog().get("g4dn.8xlarge")
    assert g4dn is not None and launched_efas(g4dn, None, efa_requested=True) == 1
