"""What subnet and security-group drift read from EC2, against moto's server over HTTP: an instance's subnet and
security groups as DescribeInstances reports them (`Instance.subnet_id`, `Instance.security_groups`), and the subnets
and groups a node template's selectors resolve to now (`AwsCloudProvider.network`, Karpenter v1.14.1's EC2NodeClass
`status.subnets` / `status.securityGroups`). An answer of another shape is unknown — never a drift, never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.cloud.aws.provider import AwsCloudProvider, _instance
from karpenter_policy.cloud.provider import Network
from karpenter_policy.reconcile.disruption.decider import network_drift

from .conftest import CLUSTER, DISCOVERY, AwsEnv
from .support import launch_template, offer, request


def launch(aws: AwsEnv, provider: AwsCloudProvider, zone: str) -> None:
    """One launch; then its instance given its launch template's groups, as EC2 does (moto's CreateFleet gives the
    VPC's default group instead: `simulate`'s server does the same in front of moto)."""
    provider.create(request(aws.spec(), [offer("m5.large", zone)]))
    (made,) = aws.instances()
    template = aws.ec2.describe_launch_templates()["LaunchTemplates"][0]["LaunchTemplateName"]
    groups = launch_template(aws.ec2, template)["SecurityGroupIds"]
    aws.ec2.modify_instance_attribute(InstanceId=made["InstanceId"], Groups=groups)


def test_a_launched_instance_reports_its_subnet_and_security_groups(aws: AwsEnv) -> None:
    provider = aws.provider()
    launch(aws, provider, "us-east-1b")
    (instance,) = provider.list(CLUSTER)
    assert instance.subnet_id == aws.subnets["us-east-1b"]
    assert instance.security_groups == (aws.security_group,)
    assert network_drift(instance, provider.network(aws.spec())) == ""


def test_the_network_is_what_the_selectors_match_now(aws: AwsEnv) -> None:
    provider = aws.provider()
    assert provider.network(aws.spec()) == Network(
        frozenset(aws.subnets.values()), frozenset({aws.security_group}), reservations=frozenset()
    )
    assert provider.network(aws.spec(subnetSelector={"aws-ids": "subnet-0000000000000dead"})) == Network(
        frozenset(), frozenset({aws.security_group}), reservations=frozenset()
    )


def test_the_network_tells_the_capacity_reservations_the_class_selects(aws: AwsEnv) -> None:
    """What capacity-reservation drift compares a reserved instance with (aws v1.14.1 drift.go:148
    `isCapacityReservationDrifted` reads the class's `status.capacityReservations`): the ids its terms select now,
    none without terms, unknown (None) when EC2 does not answer — never "none" then, which would drift every
    reserved node."""
    from .reservations import DeclaredReservation

    aws.reservations.declare(DeclaredReservation("cr-0123456789abcdef0", "m5.large", "us-east-1a", 2))
    aws.reservations.declare(DeclaredReservation("cr-0fedcba9876543210", "m5.large", "us-east-1b", 2))
    selecting = aws.spec(capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}])
    provider = aws.provider()
    network = provider.network(selecting)
    assert network is not None and network.reservations == frozenset({"cr-0123456789abcdef0"})
    without = provider.network(aws.spec())
    assert without is not None and without.reservations == frozenset()
    aws.proxy.fail("DescribeCapacityReservations", times=3)
    unknown = aws.provider().network(selecting)
    assert unknown is not None and unknown.reservations is None


def test_a_group_added_to_the_selection_drifts_the_instance_once_the_cache_expires(aws: AwsEnv) -> None:
    """aws suite_test.go:901 (more groups discovered than the instance has: SecurityGroupDrift), through EC2."""
    provider = aws.provider()
    launch(aws, provider, "us-east-1a")
    vpc = aws.ec2.describe_security_groups(GroupIds=[aws.security_group])["SecurityGroups"][0]["VpcId"]
    tags = [{"Key": k, "Value": v} for k, v in DISCOVERY.items()]
    aws.ec2.create_security_group(GroupName="more", Description="more", VpcId=vpc,
                                  TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}])
    (instance,) = provider.list(CLUSTER)
    assert network_drift(instance, provider.network(aws.spec())) == ""  # the discovery cache still holds
    aws.clock.advance(61)
    assert network_drift(instance, provider.network(aws.spec())).startswith("SecurityGroupDrift")


def test_a_failing_describe_is_no_network_at_all(aws: AwsEnv) -> None:
    provider = aws.provider(max_attempts=1)
    aws.proxy.fail("DescribeSubnets", times=None)
    assert provider.network(aws.spec()) is None


BASE: dict[str, Any] = {"InstanceId": "i-0123456789abcdef0", "InstanceType": "m5.large",
                        "Placement": {"AvailabilityZone": "us-east-1a"}, "State": {"Name": "running"}}


@pytest.mark.parametrize(
    ("fields", "subnet", "groups"),
    [
        ({"SubnetId": "subnet-1", "SecurityGroups": [{"GroupId": "sg-2", "GroupName": "b"}, {"GroupId": "sg-1"}]},
         "subnet-1", ("sg-1", "sg-2")),
        ({}, "", None),
        ({"SubnetId": 7, "SecurityGroups": "sg-1"}, "", None),
        ({"SecurityGroups": [{"GroupName": "no id"}]}, "", None),
        ({"SecurityGroups": [{"GroupId": "sg-1"}, "sg-2"]}, "", None),
        ({"SecurityGroups": [{"GroupId": ""}]}, "", None),
        ({"SecurityGroups": []}, "", ()),
    ],
)
def test_an_instances_network_fields_of_another_shape_are_unknown(
    fields: dict[str, Any], subnet: str, groups: tuple[str, ...] | None
) -> None:
    instance = _instance({**BASE, **fields})
    assert (instance.subnet_id, instance.security_groups) == (subnet, groups)
    resolved = Network(frozenset({"subnet-9"}), frozenset({"sg-9"}))
    if groups is None and not subnet:
        assert network_drift(instance, resolved) == ""  # a missing field never drifts a node
