"""Fixtures of the controller tests.

* `compiled`: the constraint sets of examples/workloads/policies as the real `karpenter-policy compile` writes them
  (once per session); `configmap`: the ConfigMap manifest it emits.
* `make_harness`: a controller on an in-memory cluster, on the in-memory cloud (fast) or on the AWS provider
  talking to moto's server through the fault proxy of tests/cloud (started once per session), with the
  kubelets' stand-in and the Karpenter-format log in a buffer.
* `aws_workloads`: the moto account the example policies launch into (tests/reconcile/awsaccount.py).
* `closing`: `closing(scene)` closes the scene at teardown (its controllers' threads: on an API server over HTTP,
  the VolumeAttachment informer termination starts).
* `kubectl`: kubectl and a KubeCluster against a fresh test API server serving Karpenter v1's CRDs
  (tests/kube/conftest.py `kubectl_against`); here it stands for tests/conftest.py's kubectl binary, which no
  controller test asks for.
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # the AWS fixtures of tests/cloud (moto's server, the fault proxy) are reused
    sys.path.insert(0, str(TESTS))

from cloud.conftest import AwsEnv, aws, aws_credentials, fault_proxy, moto_url  # noqa: E402
from cloud.conftest import amis as amis  # noqa: E402
from kube.conftest import KARPENTER_V1_CRDS, Kubectl, kubectl_against  # noqa: E402

from karpenter_policy.catalog import load_catalog  # noqa: E402
from karpenter_policy.cloud.aws.api import AwsConnection  # noqa: E402
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings  # noqa: E402
from karpenter_policy.cloud.provider import CloudProvider  # noqa: E402
from karpenter_policy.fakes.cloud import FakeCloudProvider  # noqa: E402
from karpenter_policy.fakes.cluster import MemoryCluster  # noqa: E402
from karpenter_policy.reconcile import logs  # noqa: E402
from karpenter_policy.reconcile.constraints import ConstraintSource, DirectorySource  # noqa: E402
from karpenter_policy.reconcile.controller import Controller, ControllerOptions, always  # noqa: E402
from karpenter_policy.reconcile.state.feed import StateFeed  # noqa: E402
from karpenter_policy.simulate.kubelet import FakeKubelet  # noqa: E402
from karpenter_policy.simulate.scene import Scene  # noqa: E402

from .awsaccount import K8S_VERSION, REGION, ZONES, WorkloadsAccount  # noqa: E402
from .support import POLICIES, FakeClock, Harness, compile_policies, configmap_manifest  # noqa: E402

__all__ = ["amis", "aws", "aws_credentials", "fault_proxy", "moto_url"]  # fixtures, re-exported

CLUSTER = "workloads"


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("compiled") / "build")


@pytest.fixture(scope="session")
def configmap(compiled: Path) -> dict[str, Any]:
    return configmap_manifest(compiled)


@pytest.fixture()
def closing() -> Iterator[Callable[[Scene], Scene]]:
    """`closing(scene)` is the scene, closed at the test's teardown (`Scene.close`: no informer outlives the test)."""
    scenes: list[Scene] = []

    def close_later(scene: Scene) -> Scene:
        scenes.append(scene)
        return scene

    yield close_later
    for scene in scenes:
        scene.close()


@pytest.fixture()
def kubectl(tmp_path: Path) -> Iterator[Kubectl]:
    with kubectl_against(tmp_path, KARPENTER_V1_CRDS) as client:
        yield client


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
        acting: Callable[[], bool] = always,
        feed: Callable[[MemoryCluster], StateFeed] | None = None,
        **options: Any,
    ) -> Harness:
        """`acting`: the controller's leadership (always); `feed`: its state's feed, made on the cluster (the
        default: a watch drained at each step)."""
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
            acting=acting,
            feed=feed(cluster) if feed is not None else None,
        )
        return Harness(cluster, cloud, controller, FakeKubelet(cluster, clock), clock, log)

    return make


# --- AWS (moto) ------------------------------------------------------------------------------------------------


class AwsWorkloads(WorkloadsAccount):
    """The example policies' account (tests/reconcile/awsaccount.py) in the VPC of the `aws` fixture."""

    def __init__(self, env: AwsEnv, clock: FakeClock) -> None:
        vpc = env.ec2.describe_subnets(SubnetIds=[env.subnets[ZONES[0]]])["Subnets"][0]["VpcId"]
        super().__init__(env.ec2, env.proxy, env.ami_amd64, env.ami_arm64, vpc)
        self.env = env
        self.clock = clock

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


@pytest.fixture()
def aws_workloads(aws: AwsEnv, clock: FakeClock) -> AwsWorkloads:
    return AwsWorkloads(aws, clock)
