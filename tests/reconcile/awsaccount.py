"""The AWS account the example policies (examples/workloads/policies) launch into, on moto's server behind the fault
proxy of tests/cloud: subnets tagged `karpenter.sh/discovery: workloads-example` in three zones and
`emr-eks-workshop` in us-east-1a, a security group, the EMR workshop's launch template, and stubs for what moto
does not serve: a spot market priced like AWS's (moto's is a constant, which would make every spot type cost the
same), the EKS AMI SSM parameters (GPU included) and the Price List API (empty: the catalog's prices apply).
Shared by the controller tests and benchmarks/provision.py."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from cloud.faultproxy import Answer, Call, FaultProxy, error_answer, json_answer

from karpenter_policy.catalog import load_catalog

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
K8S_VERSION = "1.27"
LAUNCH_TEMPLATE = "emr-eks-workshop-karpenter-launchtemplate"
SSM_AL2 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2/recommended/image_id"
SSM_AL2_ARM64 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2-arm64/recommended/image_id"
SSM_AL2_GPU = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2-gpu/recommended/image_id"


def spot_price(instance_type: str, zone: str, on_demand: float) -> float:
    """A deterministic spot price: 28–38 % of on-demand, varying by type and zone as the market does."""
    share = 0.28 + int(hashlib.sha256(f"{instance_type}/{zone}".encode()).hexdigest()[:4], 16) % 100 / 1000
    return round(on_demand * share, 5)


def spot_history(zones: tuple[str, ...] = ZONES) -> Callable[[Call], Answer]:
    """DescribeSpotPriceHistory in EC2's XML: the latest price of each asked type in each zone."""
    prices = {it.name: it.price_on_demand for it in load_catalog().instance_types if it.price_on_demand}

    def respond(call: Call) -> Answer:
        asked = [v for k, v in sorted(call.params.items()) if k.startswith("InstanceType.")] or sorted(prices)
        items = "".join(
            f"<item><instanceType>{name}</instanceType><productDescription>Linux/UNIX</productDescription>"
            f"<spotPrice>{spot_price(name, zone, prices[name]):.5f}</spotPrice>"
            f"<timestamp>2026-11-01T00:00:00.000Z</timestamp><availabilityZone>{zone}</availabilityZone></item>"
            for name in asked
            if name in prices
            for zone in zones
        )
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse '
            f'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>{uuid.uuid4()}</requestId>'
            f"<spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>"
        )
        return Answer(200, xml.encode(), {"Content-Type": "text/xml;charset=UTF-8"})

    return respond


def ssm_parameters(parameters: Mapping[str, str]) -> Callable[[Call], Answer]:
    def respond(call: Call) -> Answer:
        name = str(call.params.get("Name", ""))
        if name not in parameters:
            return error_answer(call, 400, "ParameterNotFound", "")
        return json_answer({"Parameter": {"Name": name, "Type": "String", "Value": parameters[name], "Version": 1}})

    return respond


def empty_price_list(call: Call) -> Answer:
    return json_answer({"FormatVersion": "aws_v1", "PriceList": []})


class WorkloadsAccount:
    """Creates the account's resources in `vpc` (a new one when None) and answers what moto cannot."""

    def __init__(self, ec2: Any, proxy: FaultProxy, ami_amd64: str, ami_arm64: str, vpc: str | None = None) -> None:
        self.ec2 = ec2
        vpc = vpc or ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]

        def tags(value: str) -> list[dict[str, Any]]:
            return [{"Key": "karpenter.sh/discovery", "Value": value}]

        self.subnets = {
            zone: ec2.create_subnet(
                VpcId=vpc, CidrBlock=f"10.0.{16 + i}.0/24", AvailabilityZone=zone,
                TagSpecifications=[{"ResourceType": "subnet", "Tags": tags("workloads-example")}],
            )["Subnet"]["SubnetId"]
            for i, zone in enumerate(ZONES)
        }
        self.emr_subnet = ec2.create_subnet(
            VpcId=vpc, CidrBlock="10.0.32.0/24", AvailabilityZone="us-east-1a",
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags("emr-eks-workshop")}],
        )["Subnet"]["SubnetId"]
        ec2.create_security_group(
            GroupName="workloads-nodes", Description="nodes", VpcId=vpc,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": tags("workloads-example")}],
        )
        ec2.create_launch_template(LaunchTemplateName=LAUNCH_TEMPLATE, LaunchTemplateData={"ImageId": ami_amd64})
        proxy.serve("DescribeSpotPriceHistory", spot_history())
        amis = {SSM_AL2: ami_amd64, SSM_AL2_ARM64: ami_arm64, SSM_AL2_GPU: ami_amd64}
        proxy.serve("GetParameter", ssm_parameters(amis))
        proxy.serve("GetProducts", empty_price_list)

    def instances(self) -> list[dict[str, Any]]:
        """The instances running or starting, straight from moto."""
        filters = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        return [i for r in self.ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]
