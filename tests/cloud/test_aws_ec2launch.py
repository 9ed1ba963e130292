"""An EC2NodeClass's `placementGroupSelector`, `networkInterfaces` and `cpuOptions` launch (issue #26) as Karpenter
v1.14.1's launch template carries them (aws pkg/providers/launchtemplate/launchtemplate.go `generateNetworkInterfaces`
and `cpuOptions`, types.go `buildPlacement`), read back from moto's server over HTTP (DescribeLaunchTemplateVersions).
moto 5.2.5 has no placement groups: DescribePlacementGroups is answered by a stub in the test front, as EC2 answers
it (the `state` filter, `GroupNames` / `GroupIds`, `InvalidPlacementGroup.Unknown` for a name it does not know)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.launchsettings import launch_settings
from karpenter_policy.cloud.errors import CloudError, ConfigurationError
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.requirements import Requirement, Requirements

from .conftest import DISCOVERY, ZONES, AwsEnv
from .faultproxy import Answer, Call, error_answer
from .support import launch_template, offer, request

#: v1.14.1's launchtemplate suite_test.go:2675-2680 interfaces (two cards, an ENA and an EFA-only on each).
FOUR_INTERFACES = [
    {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
    {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
    {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
    {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "interface"},
]
CLUSTER_GROUP = {"GroupName": "training", "GroupId": "pg-0123456789abcdef0", "Strategy": "cluster"}
PARTITION_GROUP = {"GroupName": "hdfs", "GroupId": "pg-0fedcba9876543210", "Strategy": "partition", "PartitionCount": 3}
SPREAD_GROUP = {"GroupName": "racks", "GroupId": "pg-0aaaaaaaaaaaaaaaa", "Strategy": "spread", "SpreadLevel": "rack"}
PENDING_GROUP = {"GroupName": "new", "GroupId": "pg-0bbbbbbbbbbbbbbbb", "Strategy": "cluster", "State": "pending"}


def node_class(**changes: Any) -> dict[str, Any]:
    return launch_settings({
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
        **changes,
    })


def placement_groups(groups: Sequence[Mapping[str, Any]], asked: list[Call] | None = None) -> Any:
    """DescribePlacementGroups as EC2 answers it: the groups named by GroupName.N or GroupId.N (an unknown name or
    id: `InvalidPlacementGroup.Unknown`), only `available` ones under a `state` filter."""
    def respond(call: Call) -> Answer:
        if asked is not None:
            asked.append(call)
        names = [v for k, v in call.params.items() if k.startswith("GroupName.")]
        ids = [v for k, v in call.params.items() if k.startswith("GroupId.")]
        wanted = names or ids
        field = "GroupName" if names else "GroupId"
        known = [g for g in groups if not wanted or g[field] in wanted]
        if wanted and len(known) < len(wanted):
            unknown = f"The Placement Group {wanted[0]} is unknown"
            return error_answer(call, 400, "InvalidPlacementGroup.Unknown", unknown)
        states = [v for k, v in call.params.items() if k.startswith("Filter.1.Value.")]
        found = [{"State": "available", **g} for g in known]
        found = [g for g in found if not states or g["State"] in states]
        items = "".join(
            "<item>" + "".join(f"<{k[0].lower()}{k[1:]}>{v}</{k[0].lower()}{k[1:]}>" for k, v in g.items()) + "</item>"
            for g in found
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<DescribePlacementGroupsResponse '
            f'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>{uuid.uuid4()}</requestId>'
            f"<placementGroupSet>{items}</placementGroupSet></DescribePlacementGroupsResponse>"
        )
        return Answer(200, body.encode(), {"Content-Type": "text/xml;charset=UTF-8"})

    return respond


def template_of_launch(
    aws: AwsEnv, settings: dict[str, Any], requirements: Requirements | None = None
) -> dict[str, Any]:
    made = aws.provider().create(request(settings, [offer("m5.large", "us-east-1a")], requirements=requirements))
    assert made.zone == "us-east-1a"
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    return launch_template(aws.ec2, template["LaunchTemplateName"])


# --- networkInterfaces ----------------------------------------------------------------------------------------------

def test_the_class_interfaces_are_the_templates_in_its_order(aws: AwsEnv) -> None:
    """launchtemplate suite_test.go:2674 "should configure network interfaces with same configuration as NodeClass"
    (its entry "when pod does not request EFA", :2703): four interfaces, each with its card, device index and type,
    the class's groups on each, and none at the top of the template."""
    data = template_of_launch(aws, node_class(networkInterfaces=FOUR_INTERFACES))
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in data["NetworkInterfaces"]] == [
        (0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (1, 1, "interface"),
    ]  # fmt: skip
    assert all(i["Groups"] == [aws.security_group] for i in data["NetworkInterfaces"])
    assert "SecurityGroupIds" not in data


def test_efa_only_interfaces_get_no_prefixes(aws: AwsEnv) -> None:
    """launchtemplate suite_test.go:2709 "should not set prefix count on EFA-only interfaces": the ENA interfaces
    carry the class's ipPrefixCount, the EFA-only one none (RunInstances refuses it there)."""
    interfaces = [FOUR_INTERFACES[0], FOUR_INTERFACES[1], FOUR_INTERFACES[3]]
    data = template_of_launch(aws, node_class(networkInterfaces=interfaces, ipPrefixCount=2))
    assert [i.get("Ipv4PrefixCount") for i in data["NetworkInterfaces"]] == [2, None, 2]


def test_efa_only_interfaces_get_no_connection_tracking_nor_public_address(aws: AwsEnv) -> None:
    """launchtemplate suite_test.go:2649 "should apply ConnectionTracking to every user-configured NetworkInterface
    in the launch template except efa-only"; the public address likewise (launchtemplate.go:326)."""
    tracking = {"tcpEstablishedTimeout": 86400, "udpStreamTimeout": 120, "udpTimeout": 45}
    expected = {"TcpEstablishedTimeout": 86400, "UdpStreamTimeout": 120, "UdpTimeout": 45}
    data = template_of_launch(aws, node_class(
        networkInterfaces=FOUR_INTERFACES, connectionTracking=tracking, associatePublicIPAddress=False))
    interfaces = data["NetworkInterfaces"]
    assert len(interfaces) == 4
    for interface in interfaces:
        efa_only = interface["InterfaceType"] == "efa-only"
        assert interface.get("ConnectionTrackingSpecification") == (None if efa_only else expected)
        assert interface.get("AssociatePublicIpAddress") == (None if efa_only else False)


def test_efa_only_interfaces_get_no_ipv6(aws: AwsEnv) -> None:
    """launchtemplate suite_test.go:2734 "should not set Ipv6 specs on EFA-only interfaces": in an IPv6 cluster the
    ENA interface has PrimaryIpv6 and one IPv6 address, the EFA-only one neither (the template is built without
    moto, which keeps IPv6 interfaces' fields as sent)."""
    from karpenter_policy.cloud.aws.launchtemplates import network_interfaces

    made = network_interfaces(FOUR_INTERFACES[:2], ["sg-1"], public_ip=None, ip_prefix_count=None, ipv6=True,
                              connection_tracking=None)
    assert made[0]["PrimaryIpv6"] is True and made[0]["Ipv6AddressCount"] == 1
    assert "PrimaryIpv6" not in made[1] and "Ipv6AddressCount" not in made[1]


_INTERFACE = st.fixed_dictionaries({
    "networkCardIndex": st.integers(0, 7), "deviceIndex": st.integers(0, 14),
    "interfaceType": st.sampled_from(["interface", "efa-only"]),
})  # fmt: skip


@deterministic(200)
@given(st.lists(_INTERFACE, max_size=8), st.sampled_from([None, True, False]), st.sampled_from([None, 0, 3]),
       st.booleans(), st.sampled_from([None, {"UdpTimeout": 45}]))
def test_each_interface_is_the_classs_and_only_ena_ones_carry_addresses(
    interfaces: list[dict[str, Any]], public: bool | None, prefixes: int | None, ipv6: bool,
    tracking: dict[str, int] | None,
) -> None:
    """generateNetworkInterfaces (launchtemplate.go:302-332) for any interfaces and settings: one interface each, in
    the class's order, with its card, device index, type and every group; an `efa-only` one nothing more, an
    `interface` one exactly the settings that are set (an IPv6 cluster's PrimaryIpv6, one address and its prefixes
    as Ipv6PrefixCount)."""
    from karpenter_policy.cloud.aws.launchtemplates import network_interfaces

    made = network_interfaces(interfaces, ["sg-b", "sg-a"], public_ip=public, ip_prefix_count=prefixes, ipv6=ipv6,
                              connection_tracking=tracking)
    assert len(made) == len(interfaces)
    for asked, out in zip(interfaces, made, strict=True):
        base = {"NetworkCardIndex": asked["networkCardIndex"], "DeviceIndex": asked["deviceIndex"],
                "InterfaceType": asked["interfaceType"], "Groups": ["sg-a", "sg-b"]}
        extra = {k: v for k, v in out.items() if k not in base}
        assert {k: out[k] for k in base} == base
        if asked["interfaceType"] == "efa-only":
            assert extra == {}
            continue
        expected: dict[str, Any] = {"PrimaryIpv6": True, "Ipv6AddressCount": 1} if ipv6 else {}
        if prefixes is not None:
            expected["Ipv6PrefixCount" if ipv6 else "Ipv4PrefixCount"] = prefixes
        if public is not None:
            expected["AssociatePublicIpAddress"] = public
        if tracking is not None:
            expected["ConnectionTrackingSpecification"] = tracking
        assert extra == expected


# --- cpuOptions -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["enabled", "disabled"])
def test_nested_virtualization_is_the_templates_cpu_options(aws: AwsEnv, value: str) -> None:
    """cpuoptions_test.go:33 "should set NestedVirtualization when enabled" and :38 "… when disabled"."""
    data = template_of_launch(aws, node_class(cpuOptions={"nestedVirtualization": value}))
    assert data["CpuOptions"] == {"NestedVirtualization": value}


@pytest.mark.parametrize("options", [None, {}])
def test_no_nested_virtualization_no_cpu_options(aws: AwsEnv, options: dict[str, str] | None) -> None:
    """cpuoptions_test.go:27 "should return nil for nil input" and :30 "… for empty CPUOptions"."""
    changes = {} if options is None else {"cpuOptions": options}
    assert "CpuOptions" not in template_of_launch(aws, node_class(**changes))


# --- placementGroupSelector -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("selector", [{"name": "training"}, {"id": "pg-0123456789abcdef0"}])
def test_the_template_is_placed_in_the_group(aws: AwsEnv, selector: dict[str, str]) -> None:
    """placementgroup suite_test.go:135 "should return a placement group by name from the EC2 API" and :144 "… by
    ID": the launch template's Placement names the group's id (types.go `buildPlacement`), asked by GroupNames for
    a name, GroupIds for an id (suite_test.go:84, :93), only available groups (types.go `state` filter)."""
    asked: list[Call] = []
    aws.proxy.serve("DescribePlacementGroups", placement_groups([CLUSTER_GROUP], asked))
    data = template_of_launch(aws, node_class(placementGroupSelector=selector))
    assert data["Placement"] == {"GroupId": "pg-0123456789abcdef0"}
    key = "GroupName.1" if "name" in selector else "GroupId.1"
    assert asked and all(c.params.get(key) == next(iter(selector.values())) for c in asked)
    assert all(c.params.get("Filter.1.Name") == "state" and c.params.get("Filter.1.Value.1") == "available"
               for c in asked)


def test_a_partition_group_launches_into_the_lowest_partition_the_node_allows(aws: AwsEnv) -> None:
    """launchtemplate.go:157-175 (`EnsureAll`): a partition group's partition is the lowest the NodeClaim's
    `karpenter.k8s.aws/placement-group-partition` requirement names."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups([PARTITION_GROUP]))
    partitions = Requirements([Requirement.new(wk.PLACEMENT_GROUP_PARTITION, "In", ["3", "2"])])
    data = template_of_launch(aws, node_class(placementGroupSelector={"name": "hdfs"}), partitions)
    assert data["Placement"] == {"GroupId": "pg-0fedcba9876543210", "PartitionNumber": 2}


def test_a_partition_group_without_a_partition_requirement_lets_ec2_pick(aws: AwsEnv) -> None:
    aws.proxy.serve("DescribePlacementGroups", placement_groups([PARTITION_GROUP]))
    data = template_of_launch(aws, node_class(placementGroupSelector={"name": "hdfs"}))
    assert data["Placement"] == {"GroupId": "pg-0fedcba9876543210"}


def test_a_missing_group_holds_the_class_back_and_launches_nothing(aws: AwsEnv) -> None:
    """placementgroup suite_test.go:151 "should return nil when placement group is not found" and nodeclass
    placementgroup.go: `PlacementGroupReady` False, "Placement group %q not found" — the class is not ready, so
    nothing launches (here: `unlaunchable` says why; a launch asked anyway is refused, never placed elsewhere)."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups([CLUSTER_GROUP]))
    settings = node_class(placementGroupSelector={"name": "absent"})
    provider = aws.provider()
    assert provider.unlaunchable(settings) == "placement group 'absent' not found"
    with pytest.raises(ConfigurationError, match="placement group 'absent' not found"):
        provider.create(request(settings, [offer("m5.large", "us-east-1a")]))
    assert aws.instances() == []
    assert provider.unlaunchable(node_class(placementGroupSelector={"name": "training"})) is None


@pytest.mark.parametrize(("selector", "ready"), [
    (None, True),  # placementgroup_test.go:63 "… PlacementGroupReady condition set to true when no … selector"
    ({"name": "training"}, True),  # :73 "should resolve a cluster placement group by name"
    ({"id": "pg-0123456789abcdef0"}, True),  # :85 "should resolve a placement group by ID"
    ({"name": "hdfs"}, True),  # :96 "should resolve a partition placement group with partition count"
    ({"name": "racks"}, True),  # :109 "should resolve a spread placement group with spread level"
    ({"name": "absent"}, False),  # :122 "should set condition false when placement group is not found"
    ({"name": "new"}, False),  # :135 "should set condition false when placement group is not in available state"
])
def test_the_class_placement_group_readiness(aws: AwsEnv, selector: dict[str, str] | None, ready: bool) -> None:
    """nodeclass placementgroup_test.go (v1.14.1): the EC2NodeClass's `PlacementGroupReady` — here
    `CloudProvider.node_class`'s `placement_group_found`, which `reconcile.claims.readiness.class_ready` reads."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups(
        [CLUSTER_GROUP, PARTITION_GROUP, SPREAD_GROUP, PENDING_GROUP]))
    changes = {} if selector is None else {"placementGroupSelector": selector}
    assert aws.provider().node_class(node_class(**changes)).placement_group_found is ready


def test_the_resolved_group_says_its_strategy_partitions_and_spread_level(aws: AwsEnv) -> None:
    """placementgroup_test.go:96 and :109: a partition group's count, a spread group's level (v1.14.1's
    `PlacementGroupFromEC2`)."""
    from karpenter_policy.cloud.aws.api import AwsApi, AwsConnection
    from karpenter_policy.cloud.aws.placementgroups import PlacementGroup, PlacementGroups

    from .conftest import REGION

    aws.proxy.serve("DescribePlacementGroups", placement_groups([PARTITION_GROUP, SPREAD_GROUP]))
    groups = PlacementGroups(AwsApi(AwsConnection(REGION, endpoint_url=aws.proxy.url, max_attempts=1)), aws.clock)
    assert groups.get({"name": "hdfs"}) == PlacementGroup("pg-0fedcba9876543210", "hdfs", "partition", 3)
    assert groups.get({"id": "pg-0aaaaaaaaaaaaaaaa"}) == PlacementGroup(
        "pg-0aaaaaaaaaaaaaaaa", "racks", "spread", spread_level="rack")
    assert groups.get(None) is None and groups.get({}) is None  # suite_test.go:219 no selector: nil


def test_the_answer_is_kept_a_minute_and_a_failure_answers_the_last_group(aws: AwsEnv) -> None:
    """placementgroup suite_test.go:184 "should cache results and return from cache on subsequent calls" and :166
    "should return an error and stale data when EC2 API returns an error" (here: the last group found, the failure
    logged by the caller's next attempt)."""
    from karpenter_policy.cloud.aws.api import AwsApi, AwsConnection
    from karpenter_policy.cloud.aws.placementgroups import PlacementGroups

    from .conftest import REGION

    asked: list[Call] = []
    aws.proxy.serve("DescribePlacementGroups", placement_groups([CLUSTER_GROUP], asked))
    api = AwsApi(AwsConnection(REGION, endpoint_url=aws.proxy.url, max_attempts=1))
    groups = PlacementGroups(api, aws.clock)
    first = groups.get({"name": "training"})
    assert first is not None and first.id == "pg-0123456789abcdef0" and first.strategy == "cluster"
    assert groups.get({"name": "training"}) == first and len(asked) == 1
    aws.clock.advance(61)
    aws.proxy.reset()
    aws.proxy.serve("DescribePlacementGroups", lambda call: error_answer(call, 400, "UnauthorizedOperation", "denied"))
    assert groups.get({"name": "training"}) == first
    with pytest.raises(CloudError, match="denied"):
        groups.get({"id": "pg-0123456789abcdef0"})  # never found: the error


def test_a_node_in_a_group_registers_with_its_labels_and_the_class_network_names_the_group(aws: AwsEnv) -> None:
    """cloudprovider.go:472-488 (`instanceToNodeClaim`): a node of a class with a placement group carries
    `karpenter.k8s.aws/placement-group-id` (and, when launched into one, `…/placement-group-partition`) — here the
    kubelet registers with them — and the class's network says the group's id, what placement-group drift compares
    the label with (drift.go:167-180)."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups([PARTITION_GROUP]))
    settings = node_class(placementGroupSelector={"name": "hdfs"})
    partitions = Requirements([Requirement.new(wk.PLACEMENT_GROUP_PARTITION, "In", ["2"])])
    data = template_of_launch(aws, settings, partitions)
    assert "karpenter.k8s.aws/placement-group-id=pg-0fedcba9876543210" in data["UserData"]
    assert "karpenter.k8s.aws/placement-group-partition=2" in data["UserData"]
    network = aws.provider().network(settings)
    assert network is not None and network.placement_group == "pg-0fedcba9876543210"
    nowhere = aws.provider().network(node_class(placementGroupSelector={"name": "absent"}))
    assert nowhere is not None and nowhere.placement_group == ""
    assert "placement-group-id" not in template_of_launch_again(aws, node_class())


@pytest.mark.parametrize(("selector", "expected"), [
    ({"name": "hdfs"},
     {wk.PLACEMENT_GROUP_ID: ("pg-0fedcba9876543210",), wk.PLACEMENT_GROUP_PARTITION: ("1", "2", "3")}),
    ({"name": "training"}, {wk.PLACEMENT_GROUP_ID: ("pg-0123456789abcdef0",)}),
    ({"name": "racks"}, {wk.PLACEMENT_GROUP_ID: ("pg-0aaaaaaaaaaaaaaaa",)}),
    ({"name": "absent"}, {}),
    (None, {}),
])
def test_the_class_types_are_offered_in_its_group_and_per_partition(
    aws: AwsEnv, selector: dict[str, str] | None, expected: dict[str, tuple[str, ...]]
) -> None:
    """offering.go:168-181 (`InjectOfferings`) and placement_group_resolver.go: the class's types carry its group's
    id and, for a partition group with a partition count, `1` … `N` (one offering per partition) — the topology
    domains of a spread over `karpenter.k8s.aws/placement-group-partition`; a group not found adds nothing."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups([CLUSTER_GROUP, PARTITION_GROUP, SPREAD_GROUP]))
    changes = {} if selector is None else {"placementGroupSelector": selector}
    assert aws.provider().placement_requirements(node_class(**changes)) == expected


def test_a_failed_resolution_offers_nothing_more(aws: AwsEnv) -> None:
    """offering.go:143-146: v1.14.1 reads the group ignoring the error (none found: nothing injected)."""
    aws.proxy.serve("DescribePlacementGroups", lambda call: error_answer(call, 400, "UnauthorizedOperation", "denied"))
    assert aws.provider().placement_requirements(node_class(placementGroupSelector={"name": "hdfs"})) == {}


@pytest.mark.parametrize(("group", "partitions", "partition"), [
    (PARTITION_GROUP, ["2"], "2"),  # the partition the scheduler targeted (cloudprovider.go:479-486)
    (PARTITION_GROUP, None, ""),  # none: the sentinel the registration hook fills (cloudprovider.go:478)
    (CLUSTER_GROUP, None, None),  # a cluster group: no partition label at all
])
def test_the_launched_instance_says_its_group_and_partition(
    aws: AwsEnv, group: dict[str, Any], partitions: list[str] | None, partition: str | None
) -> None:
    """cloudprovider.go:472-488 (`instanceToNodeClaim`): the claim of a node in a placement group is labelled with
    the group's id; in a partition group with the partition the launch targeted, else `""` for EC2 to assign."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups([group]))
    requirements = (
        Requirements([Requirement.new(wk.PLACEMENT_GROUP_PARTITION, "In", partitions)]) if partitions else None
    )
    settings = node_class(placementGroupSelector={"name": group["GroupName"]})
    made = aws.provider().create(request(settings, [offer("m5.large", "us-east-1a")], requirements=requirements))
    assert (made.placement_group, made.placement_partition) == (group["GroupId"], partition)


def template_of_launch_again(aws: AwsEnv, settings: dict[str, Any]) -> str:
    """The userData of a second launch's template (another client token, the first template left aside)."""
    before = {t["LaunchTemplateName"] for t in aws.ec2.describe_launch_templates()["LaunchTemplates"]}
    aws.provider().create(request(settings, [offer("m5.large", "us-east-1b")], token="claim-default-fghij"))
    (name,) = {t["LaunchTemplateName"] for t in aws.ec2.describe_launch_templates()["LaunchTemplates"]} - before
    return str(launch_template(aws.ec2, name)["UserData"])


# --- the instance types a class can launch ----------------------------------------------------------------------------

#: Types moto describes as EC2 does: m7i.large has `nested-virtualization`; t3.micro no `cluster` strategy; c5n.18xlarge
#: and g4dn.8xlarge one EFA interface on one card; p4d.24xlarge four cards and four EFA interfaces.
COMPATIBILITY_CATALOG = ("c5n.18xlarge", "g4dn.8xlarge", "m5.large", "m7i.large", "p4d.24xlarge", "t3.micro")


def launchable(aws: AwsEnv, settings: dict[str, Any]) -> set[str]:
    """The names of the types with an available offering for these settings (the controller schedules on them)."""
    from .conftest import catalog_types

    provider = aws.provider(catalog_types(COMPATIBILITY_CATALOG))
    return {it.name for it in provider.instance_types(provider=settings) if any(o.available for o in it.offerings)}


@pytest.fixture()
def everything(aws: AwsEnv) -> set[str]:
    offered = launchable(aws, node_class())
    assert offered == set(COMPATIBILITY_CATALOG)  # moto offers each of them in us-east-1
    return offered


@pytest.mark.parametrize(("value", "kept"), [
    ("enabled", {"m7i.large"}),  # compatibility suite_test.go:162 "…=enabled + feature present" / :163 "… absent"
    ("disabled", set(COMPATIBILITY_CATALOG)),  # :164 "nestedVirtualization=disabled passes regardless"
])
def test_nested_virtualization_keeps_the_types_that_support_it(
    aws: AwsEnv, everything: set[str], value: str, kept: set[str]
) -> None:
    assert launchable(aws, node_class(cpuOptions={"nestedVirtualization": value})) == kept


@pytest.mark.parametrize(("interfaces", "kept"), [
    ([FOUR_INTERFACES[0]], set(COMPATIBILITY_CATALOG)),
    # compatibility suite_test.go:61 "compatible instance with EFA support and single EFA interface", :87 "instance
    # does not support with EFA"; instancetype suite_test.go:3179 (dl1.24xlarge kept with an EFA-only on card 0)
    ([FOUR_INTERFACES[0], FOUR_INTERFACES[1]], {"c5n.18xlarge", "g4dn.8xlarge", "p4d.24xlarge"}),
    # :69 "… multiple EFA interfaces", :103 "network card index exceeds available cards"
    (FOUR_INTERFACES, {"p4d.24xlarge"}),
    # instancetype suite_test.go:3205: five EFA-only interfaces over five cards — more than any type has
    ([FOUR_INTERFACES[0], FOUR_INTERFACES[1],
      *({"networkCardIndex": card, "deviceIndex": 0, "interfaceType": "efa-only"} for card in range(1, 5))], set()),
    # :108 "device index exceeds maximum ENIs": t3.micro's card takes 2 interfaces, m5.large's 3
    ([FOUR_INTERFACES[0], {"networkCardIndex": 0, "deviceIndex": 2, "interfaceType": "interface"}],
     set(COMPATIBILITY_CATALOG) - {"t3.micro"}),
])
def test_network_interfaces_keep_the_types_with_the_cards_and_efa_they_need(
    aws: AwsEnv, everything: set[str], interfaces: list[dict[str, Any]], kept: set[str]
) -> None:
    assert launchable(aws, node_class(networkInterfaces=interfaces)) == kept


def test_a_cluster_group_keeps_the_types_that_support_the_strategy(aws: AwsEnv, everything: set[str]) -> None:
    """compatibility suite_test.go:129 "cluster strategy supported" (m5.large) and :132 "… not supported" (t3's)."""
    aws.proxy.serve("DescribePlacementGroups", placement_groups([CLUSTER_GROUP, SPREAD_GROUP]))
    assert launchable(aws, node_class(placementGroupSelector={"name": "training"})) == everything - {"t3.micro"}
    assert launchable(aws, node_class(placementGroupSelector={"name": "racks"})) == everything  # :141 spread


def test_an_incompatible_type_keeps_its_offerings_unavailable_not_removed(aws: AwsEnv) -> None:
    """instancetype suite_test.go:3205 "should mark instance type offering as unavailable when it does not support
    network interface configuration": the type stays listed (no InstanceTypeNotFound drift), every offering
    unavailable."""
    from .conftest import catalog_types

    provider = aws.provider(catalog_types(COMPATIBILITY_CATALOG))
    listed = {it.name: it for it in provider.instance_types(provider=node_class(networkInterfaces=FOUR_INTERFACES))}
    assert set(listed) == set(COMPATIBILITY_CATALOG)
    assert listed["m5.large"].offerings and not any(o.available for o in listed["m5.large"].offerings)
    assert any(o.available for o in listed["p4d.24xlarge"].offerings)


def test_the_checked_types_are_made_again_only_when_the_settings_types_or_ec2s_answer_change(aws: AwsEnv) -> None:
    """Not a copy of every type per call (#26): the same settings and answers give the same objects; other interfaces,
    other subnets' zones, or EC2's answers asked again give their own, checked anew."""
    from .conftest import catalog_types

    provider = aws.provider(catalog_types(COMPATIBILITY_CATALOG))

    def listed(settings: dict[str, Any]) -> dict[str, InstanceType]:
        return {it.name: it for it in provider.instance_types(provider=settings)}

    def kept(types: dict[str, InstanceType]) -> set[str]:
        return {name for name, it in types.items() if any(o.available for o in it.offerings)}

    def zones(it: InstanceType) -> set[str]:
        return {o.zone for o in it.offerings}

    two_cards = node_class(networkInterfaces=FOUR_INTERFACES)
    one_card = node_class(networkInterfaces=FOUR_INTERFACES[:2])
    first = listed(two_cards)
    assert kept(first) == {"p4d.24xlarge"}
    assert kept(listed(one_card)) == {"c5n.18xlarge", "g4dn.8xlarge", "p4d.24xlarge"}
    again = listed(two_cards)
    assert all(again[name] is it for name, it in first.items())  # m5.large's unavailable offerings not made again

    one_zone = node_class(networkInterfaces=FOUR_INTERFACES, subnetSelectorTerms=[{"id": aws.subnets[ZONES[0]]}])
    in_one_zone = listed(one_zone)
    assert kept(in_one_zone) == {"p4d.24xlarge"}
    assert zones(in_one_zone["m5.large"]) == zones(in_one_zone["p4d.24xlarge"]) == {ZONES[0]}
    assert listed(two_cards)["m5.large"] is first["m5.large"] and zones(first["m5.large"]) == set(ZONES)

    aws.clock.advance(301)  # EC2 asked again (offerings, prices and DescribeInstanceTypes): made again, the same
    refreshed = listed(two_cards)
    assert refreshed == first and refreshed["m5.large"] is not first["m5.large"]


def test_the_bootstrap_max_pods_leave_out_an_efa_only_eni_on_card_0(aws: AwsEnv) -> None:
    """instancetype suite_test.go:3249 (v1.14.1) as the launch writes it: the class's `efa-only` interface on card
    0 takes one of m5.large's 3 ENIs from the VPC CNI, so its node's `--max-pods` is (3 - 1) * (10 - 1) + 2 = 20, not
    29 (tests/model/test_allocatable_efa_only.py holds the arithmetic)."""
    data = template_of_launch(aws, node_class(networkInterfaces=FOUR_INTERFACES))
    assert "--max-pods=20" in data["UserData"]


@pytest.mark.parametrize(
    ("number", "read"),
    [(3, "3"), (7, "7"), (0, None), (-1, None), (8, None), (10**4000, None), (True, None), ("2", None), (None, None)],
)
def test_a_partition_number_ec2_cannot_give_is_read_as_not_said(number: object, read: str | None) -> None:
    """Hostile answer: DescribeInstances' `Placement.PartitionNumber` of 4,000 digits would be written as the Node's
    `placement-group-partition` label (past a label's 63 characters); only 1 … 7, EC2's partitions, are read — the
    rest is not said, so the registration hook waits instead of writing it."""
    from karpenter_policy.cloud.aws.provider import _instance

    raw = {"InstanceId": "i-0abc", "Placement": {"AvailabilityZone": "us-east-1a", "GroupId": "pg-1",
                                                 "PartitionNumber": number}}
    assert _instance(raw).placement_partition == read


@pytest.mark.parametrize(
    ("interfaces", "count"),
    [
        ([{"InterfaceType": "efa"}, {"InterfaceType": "efa"}], 2),
        ([{"InterfaceType": "interface"}, {"InterfaceType": "efa-only"}], 1),
        ([{"InterfaceType": "interface"}], 0),
        ([], 0),
        (None, 0),
        ("efa", 0),
        ([None, 7, {"InterfaceType": ["efa"]}, {"InterfaceType": "efa"}], 1),
    ],
)
def test_an_instance_listed_says_its_efa_interfaces(interfaces: object, count: int) -> None:
    """aws v1.14.1 instance/types.go:90-93 (`EFACount`): an instance DescribeInstances lists (after a restart, a
    retried launch) counts its `efa` and `efa-only` interfaces — it said 0 before, so its node offered no EFA; an
    answer of another shape counts none, never an exception."""
    from karpenter_policy.cloud.aws.provider import _instance

    raw = {"InstanceId": "i-0abc", "Placement": {"AvailabilityZone": "us-east-1a"}, "NetworkInterfaces": interfaces}
    assert _instance(raw).efa_interfaces == count
