"""Fixtures: moto's server (in a thread, on a free port) behind the fault proxy, started once per session;
per test a fresh moto state with a VPC, subnets in three zones, a security group and AMIs, all tagged for
discovery, and stubs for what moto does not serve (the Price List API, the EKS AMI SSM parameters, EC2's
DescribeCapacityReservations: `reservations.CapacityReservationStandIn`, at `AwsEnv.reservations`)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
import urllib3
from moto.core.base_backend import backend_lock
from moto.ec2.models import ec2_backends
from moto.server import ThreadedMotoServer

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.aws.api import AwsConnection
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings
from karpenter_policy.model.instancetypes import InstanceType

from .faultproxy import Answer, Call, FaultProxy, error_answer, json_answer
from .reservations import CapacityReservationStandIn

REGION = "us-east-1"
CLUSTER = "blue"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}
K8S_VERSION = "1.27"
SSM_AL2 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2/recommended/image_id"
SSM_AL2_ARM64 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2-arm64/recommended/image_id"
#: A few real types (x86 and Arm, a GPU type), so live pricing in tests reads a small part of moto's region.
SMALL_CATALOG = ("c5.large", "c5.xlarge", "c6g.large", "g4dn.xlarge", "m5.large", "m5.xlarge", "t3.micro")


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def catalog_types(names: Sequence[str] | None = None) -> list[InstanceType]:
    catalog = load_catalog()
    if names is None:
        return list(catalog.instance_types)
    return [it for name in names if (it := catalog.get(name)) is not None]


def price_list_item(instance_type: str, usd: float, region: str = REGION) -> str:
    """One GetProducts PriceList entry as AWS writes it (a JSON document inside a string)."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux"},
                "sku": f"SKU{instance_type}",
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"SKU{instance_type}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"SKU{instance_type}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": f"{usd:.10f}"},
                            }
                        }
                    }
                }
            },
        }
    )


@dataclass
class AwsEnv:
    """One test's AWS: moto state reachable through the proxy, and what the test set up in it."""

    proxy: FaultProxy
    moto_url: str
    ec2: Any  # boto3 EC2 client straight to moto (not logged by the proxy)
    subnets: dict[str, str]
    security_group: str
    ami_amd64: str
    ami_arm64: str
    reservations: CapacityReservationStandIn
    clock: FakeClock = field(default_factory=FakeClock)
    prices: dict[str, float] = field(default_factory=dict)  # what the Price List stub answers

    def spec(self, **changes: Any) -> dict[str, Any]:
        """An AWSNodeTemplate spec selecting this test's subnets and security group (AL2, SSM default AMI)."""
        spec: dict[str, Any] = {"subnetSelector": dict(DISCOVERY), "securityGroupSelector": dict(DISCOVERY)}
        spec.update(changes)
        return {k: v for k, v in spec.items() if v is not None}

    def provider(
        self, catalog: Sequence[InstanceType] | None = None, *, max_attempts: int = 3, **options: Any
    ) -> AwsCloudProvider:
        connection = AwsConnection(REGION, endpoint_url=self.proxy.url, max_attempts=max_attempts)
        cluster = ClusterSettings(
            endpoint="https://ABCDEF.gr7.us-east-1.eks.amazonaws.com",
            ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
            kubernetes_version=K8S_VERSION,
            dns_cluster_ip="10.100.0.10",
            default_instance_profile="KarpenterNodeInstanceProfile-blue",
            name=CLUSTER,
        )
        types = catalog_types(SMALL_CATALOG) if catalog is None else catalog
        return AwsCloudProvider(connection, cluster, types, clock=self.clock, sleep=lambda _: None, **options)

    def instances(self, **filters: Sequence[str]) -> list[dict[str, Any]]:
        """Every instance moto knows (optionally filtered), straight from moto."""
        arguments = {"Filters": [{"Name": k, "Values": list(v)} for k, v in filters.items()]} if filters else {}
        return [i for r in self.ec2.describe_instances(**arguments)["Reservations"] for i in r["Instances"]]


@pytest.fixture(scope="session")
def aws_credentials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fake credentials, and no host AWS configuration or instance metadata lookups."""
    nowhere = tmp_path_factory.mktemp("aws") / "absent"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_SESSION_TOKEN", "testing")
        mp.setenv("AWS_DEFAULT_REGION", REGION)
        mp.setenv("AWS_CONFIG_FILE", str(nowhere))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        yield


@pytest.fixture(scope="session")
def moto_url(aws_credentials: None) -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def fault_proxy(moto_url: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(moto_url)
    yield proxy
    proxy.close()


#: The prefix of AWS's public SSM parameters (moto does not serve the EKS ones: the stub does).
PUBLIC_PARAMETERS = "/aws/service/"


def _ssm_stub(parameters: Mapping[str, str]) -> Any:
    """GetParameter of the public parameters `parameters` names (others: ParameterNotFound); any other parameter is
    moto's (put_parameter)."""
    def respond(call: Call) -> Answer | None:
        name = str(call.params.get("Name", ""))
        if name not in parameters and not name.startswith(PUBLIC_PARAMETERS):
            return None
        if name not in parameters:
            return error_answer(call, 400, "ParameterNotFound", "")
        value = parameters[name]
        return json_answer({"Parameter": {"Name": name, "Type": "String", "Value": value, "Version": 1}})

    return respond


def _pricing_stub(env: AwsEnv) -> Any:
    def respond(call: Call) -> Answer:
        filters = {f["Field"]: f["Value"] for f in call.params.get("Filters", [])}
        items = (
            []
            if filters.get("productFamily") != "Compute Instance"
            else [
                price_list_item(name, usd, filters.get("regionCode", REGION))
                for name, usd in sorted(env.prices.items())
            ]
        )
        return json_answer({"FormatVersion": "aws_v1", "PriceList": items})

    return respond


def reset_moto(moto_url: str) -> None:
    """moto's state emptied for the next test, every service's as `/moto-api/reset` empties it, its EC2 made again
    only when the test first asks for it — with the region's default AMIs (1,300 in us-east-1, each with its EBS
    snapshot), loaded once, not twice. moto's reset re-initialises each backend in place (AMIs loaded) so that a
    caller holding one sees the new state (getmoto/moto#6592), then forgets it, and the next request makes a new
    one (loaded again). Nothing in this process holds an EC2 backend across tests (the tests speak to moto over
    HTTP; `simulate`'s server looks its backend up per request), so EC2's is forgotten without that first load;
    the other services' reset is moto's own."""
    with backend_lock:
        ec2_backends.clear()
    urllib3.PoolManager().request("POST", f"{moto_url}/moto-api/reset")


@functools.cache
def moto_ec2(moto_url: str) -> Any:
    """A boto3 EC2 client straight to moto, made once per process (14 ms of CPU a client, and its connection): it
    holds no state of a test's — that is moto's, reset per test — and no test changes the client."""
    return boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)


@pytest.fixture(scope="session")
def amis(moto_url: str) -> tuple[str, str]:
    """An x86 and an Arm image among moto's (they survive resets; listing them all takes seconds)."""
    ec2 = moto_ec2(moto_url)
    images = ec2.describe_images(Owners=["amazon"])["Images"]
    amd64 = sorted(i["ImageId"] for i in images if i["Architecture"] == "x86_64")[0]
    arm64 = sorted(i["ImageId"] for i in images if i["Architecture"] == "arm64")[0]
    return amd64, arm64


@pytest.fixture()
def aws(fault_proxy: FaultProxy, moto_url: str, amis: tuple[str, str]) -> AwsEnv:
    fault_proxy.reset()
    reset_moto(moto_url)
    ec2 = moto_ec2(moto_url)
    tags = [{"Key": k, "Value": v} for k, v in DISCOVERY.items()]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {
        zone: ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.0.{index}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
        )["Subnet"]["SubnetId"]
        for index, zone in enumerate(ZONES)
    }
    group = ec2.create_security_group(
        GroupName="nodes",
        Description="nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )["GroupId"]
    amd64, arm64 = amis
    ec2.create_tags(Resources=[amd64, arm64], Tags=tags)
    reservations = CapacityReservationStandIn(fault_proxy, ec2)
    env = AwsEnv(fault_proxy, moto_url, ec2, subnets, group, amd64, arm64, reservations)
    fault_proxy.serve("GetParameter", _ssm_stub({SSM_AL2: amd64, SSM_AL2_ARM64: arm64}))
    fault_proxy.serve("GetProducts", _pricing_stub(env))
    return env
