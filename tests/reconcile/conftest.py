"""Fixtures of the controller tests.

* `compiled`: the constraint sets of examples/workloads/policies as the real `karpenter-policy compile` writes them
  (once per session); `configmap`: the ConfigMap manifest it emits.
* `make_harness`: a controller on an in-memory cluster, on the in-memory cloud (fast) or on the AWS provider
  talking to moto's server through the fault proxy of tests/cloud (started once per session), with the
  kubelets' stand-in and the Karpenter-format log in a buffer.
* `aws_workloads`: the moto account the example policies launch into: subnets tagged
  `karpenter.sh/discovery: workloads-example` in three zones and `emr-eks-workshop` in us-east-1a, a security
  group, the EMR workshop's launch template, and a spot market priced like AWS's (moto's is a constant).
"""

from __future__ import annotations

import hashlib
import io
import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # the AWS fixtures of tests/cloud (moto's server, the fault proxy) are reused
    sys.path.insert(0, str(TESTS))

from cloud.conftest import (  # noqa: E402
    K8S_VERSION,
    REGION,
    SSM_AL2,
    SSM_AL2_ARM64,
    ZONES,
    AwsEnv,
    aws,
    aws_credentials,
    fault_proxy,
    moto_url,
)
from cloud.conftest import amis as amis  # noqa: E402
from cloud.faultproxy import Answer, Call, error_answer, json_answer  # noqa: E402

from karpenter_policy.catalog import load_catalog  # noqa: E402
from karpenter_policy.cloud.aws.api import AwsConnection  # noqa: E402
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings  # noqa: E402
from karpenter_policy.cloud.fake import FakeCloudProvider  # noqa: E402
from karpenter_policy.cloud.provider import CloudProvider  # noqa: E402
from karpenter_policy.kube.memory import MemoryCluster  # noqa: E402
from karpenter_policy.reconcile import logs  # noqa: E402
from karpenter_policy.reconcile.constraints import ConstraintSource, DirectorySource  # noqa: E402
from karpenter_policy.reconcile.controller import Controller, ControllerOptions  # noqa: E402
from karpenter_policy.reconcile.kubelet import FakeKubelet  # noqa: E402

from .support import POLICIES, FakeClock, Harness, compile_policies, configmap_manifest  # noqa: E402

__all__ = ["amis", "aws", "aws_credentials", "fault_proxy", "moto_url"]  # fixtures, re-exported

CLUSTER = "workloads"
SSM_AL2_GPU = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2-gpu/recommended/image_id"
LAUNCH_TEMPLATE = "emr-eks-workshop-karpenter-launchtemplate"


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("compiled") / "build")


@pytest.fixture(scope="session")
def configmap(compiled: Path) -> dict[str, Any]:
    return configmap_manifest(compiled)


@pytest.fixture()
def log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logs.configure(stream)
    yield stream
    package = logging.getLogger("karpenter_policy")
    package.removeHandler(handler)
    package.setLevel(logging.NOTSET)


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


def fake_cloud(clock: FakeClock, names: list[str] | None = None) -> FakeCloudProvider:
    """The in-memory cloud selling the embedded catalog's types (or only `names`) at the catalog's offerings."""
    catalog = load_catalog()
    types = list(catalog.instance_types) if names is None else [t for n in names if (t := catalog.get(n)) is not None]
    return FakeCloudProvider(types, clock=clock)


MakeHarness = Callable[..., Harness]


@pytest.fixture()
def make_harness(compiled: Path, clock: FakeClock, log: io.StringIO) -> MakeHarness:
    def make(
        cloud: CloudProvider | None = None,
        source: ConstraintSource | None = None,
        cluster: MemoryCluster | None = None,
        **options: Any,
    ) -> Harness:
        cluster = cluster or MemoryCluster()
        cloud = cloud or fake_cloud(clock)
        options.setdefault("launch_parallelism", 1)  # launches in plan order: instance ids and logs reproducible
        controller = Controller(
            cluster,
            cloud,
            source or DirectorySource(compiled),
            ControllerOptions(cluster_name=CLUSTER, **options),
            region=REGION,
            clock=clock,
        )
        return Harness(cluster, cloud, controller, FakeKubelet(cluster, clock), clock, log)

    return make


# --- AWS (moto) ------------------------------------------------------------------------------------------------


def spot_price(instance_type: str, zone: str, on_demand: float) -> float:
    """A deterministic spot price: 28–38 % of on-demand, varying by type and zone as the market does."""
    share = 0.28 + int(hashlib.sha256(f"{instance_type}/{zone}".encode()).hexdigest()[:4], 16) % 100 / 1000
    return round(on_demand * share, 5)


def _ssm(parameters: dict[str, str]) -> Callable[[Call], Answer]:
    def respond(call: Call) -> Answer:
        name = str(call.params.get("Name", ""))
        if name not in parameters:
            return error_answer(call, 400, "ParameterNotFound", "")
        return json_answer({"Parameter": {"Name": name, "Type": "String", "Value": parameters[name], "Version": 1}})

    return respond


def _spot_history(zones: tuple[str, ...]) -> Callable[[Call], Answer]:
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


class AwsWorkloads:
    """The moto account of the example policies (see the module docstring)."""

    def __init__(self, env: AwsEnv, clock: FakeClock) -> None:
        self.env = env
        self.clock = clock
        ec2 = env.ec2
        vpc = ec2.describe_subnets(SubnetIds=[env.subnets[ZONES[0]]])["Subnets"][0]["VpcId"]

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
        ec2.create_launch_template(
            LaunchTemplateName=LAUNCH_TEMPLATE, LaunchTemplateData={"ImageId": env.ami_amd64}
        )
        env.proxy.serve("DescribeSpotPriceHistory", _spot_history(ZONES))
        ssm = {SSM_AL2: env.ami_amd64, SSM_AL2_ARM64: env.ami_arm64, SSM_AL2_GPU: env.ami_amd64}
        env.proxy.serve("GetParameter", _ssm(ssm))  # the GPU AMI too (the rule added last answers)

    def provider(self) -> AwsCloudProvider:
        connection = AwsConnection(REGION, endpoint_url=self.env.proxy.url, max_attempts=3)
        settings = ClusterSettings(
            endpoint="https://ABCDEF.gr7.us-east-1.eks.amazonaws.com",
            ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
            kubernetes_version=K8S_VERSION,
            default_instance_profile="KarpenterNodeInstanceProfile-workloads",
        )
        return AwsCloudProvider(
            connection, settings, list(load_catalog().instance_types), clock=self.clock, sleep=lambda _: None
        )

    def instances(self) -> list[dict[str, Any]]:
        return self.env.instances(**{"instance-state-name": ["pending", "running"]})


@pytest.fixture()
def aws_workloads(aws: AwsEnv, clock: FakeClock) -> AwsWorkloads:
    return AwsWorkloads(aws, clock)
