"""An EC2NodeClass's `associatePublicIPAddress` launches (issue #26): the launch template's primary network interface
says it, with the security groups moved onto that interface, as Karpenter v1.14.1's `generateNetworkInterfaces` (aws
pkg/providers/launchtemplate/launchtemplate.go) writes it — read back from moto's server over HTTP."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from karpenter_policy.api.v1.launchsettings import launch_settings
from karpenter_policy.cloud.aws.launchtemplates import template_data, template_name
from karpenter_policy.simulate.server import MotoServer

from .conftest import DISCOVERY, AwsEnv
from .support import launch_template, offer, request


def node_class(**changes: Any) -> dict[str, Any]:
    return launch_settings({
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
        **changes,
    })


def template_of_launch(aws: AwsEnv, settings: dict[str, Any]) -> dict[str, Any]:
    made = aws.provider().create(request(settings, [offer("m5.large", "us-east-1a")]))
    assert made.zone == "us-east-1a"
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    return launch_template(aws.ec2, template["LaunchTemplateName"])


@pytest.mark.parametrize("public", [True, False])
def test_the_primary_interface_says_whether_to_associate_a_public_address(aws: AwsEnv, public: bool) -> None:
    """launchtemplate suite_test.go:2332 "should set 'AssociatePublicIPAddress' based on EC2NodeClass" (its ENA
    entries, :2347-2348): `NetworkInterfaces[0].AssociatePublicIpAddress` is the class's value, and the groups are
    the interface's (launchtemplate.go `SecurityGroupIds: lo.Ternary(networkInterfaces != nil, nil, …)`)."""
    data = template_of_launch(aws, node_class(associatePublicIPAddress=public))
    (interface,) = data["NetworkInterfaces"]
    assert interface["AssociatePublicIpAddress"] is public
    assert interface["DeviceIndex"] == 0
    assert interface["Groups"] == [aws.security_group]
    assert "SecurityGroupIds" not in data


def test_unset_leaves_the_groups_at_the_top_and_the_subnet_to_decide(aws: AwsEnv) -> None:
    data = template_of_launch(aws, node_class())
    assert data["SecurityGroupIds"] == [aws.security_group]
    assert "NetworkInterfaces" not in data


def test_a_different_setting_is_another_template() -> None:
    """The template's name is its content's hash: flipping the setting launches from a new template."""
    def name(public: bool | None) -> str:
        return template_name("blue", template_data(
            image_id="ami-1", user_data="", security_groups=["sg-1"], instance_profile="p", block_devices=[],
            metadata={}, detailed_monitoring=False, public_ip=public))

    assert len({name(None), name(True), name(False)}) == 3


def test_simulates_moto_front_gives_a_fleets_instances_the_interfaces_groups(amis: tuple[str, str]) -> None:
    """`simulate`'s server gives CreateFleet's instances their launch template's groups (moto gives the VPC's
    default group): read from the primary interface when the template says `associatePublicIPAddress`, so
    security-group drift in a simulation sees the class's groups, not moto's."""
    with MotoServer() as server:
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=server.url)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone="us-east-1a")["Subnet"]
        group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)["GroupId"]
        data = template_data(image_id=amis[0], user_data="", security_groups=[group], instance_profile="p",
                             block_devices=[], metadata={}, detailed_monitoring=False, public_ip=False)
        data.pop("IamInstanceProfile")
        ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData=data)
        capacity = {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"}
        named = {"LaunchTemplateName": "nodes", "Version": "$Latest"}
        overrides = [{"InstanceType": "m5.large", "SubnetId": subnet["SubnetId"]}]
        configs = [{"LaunchTemplateSpecification": named, "Overrides": overrides}]
        answer = ec2.create_fleet(Type="instant", TargetCapacitySpecification=capacity, LaunchTemplateConfigs=configs)
        (instance_id,) = answer["Instances"][0]["InstanceIds"]
        described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
        assert [g["GroupId"] for g in described["SecurityGroups"]] == [group]
