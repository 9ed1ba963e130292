"""Measure provisioning latency: 1,000 pending pods of mixed shapes → the CreateFleet calls that launch their nodes.

    .venv/bin/python benchmarks/provision.py [--pods 1000] [--repeat 3] [--batch-idle 1.0] [--json]

The controller runs as `karpenter-policy reconcile --provision-all-pending` does — informers on the cluster,
Karpenter's batching (1 s idle by default), the scheduler, parallel launches — on an in-memory cluster, launching
through the AWS provider (boto3 over HTTP) into moto's server, which runs in a process of its own behind the fault
proxy of tests/cloud (the proxy serves what moto lacks: spot prices, the EKS AMI parameters, the price list). The
constraint sets are the ones `karpenter-policy compile` writes for examples/workloads/policies.

Each round creates the pods in one burst — web and API replicas, workers, caches, search, small jobs, Spark
executors and drivers (kspark), batch jobs (tainted provisioner) and GPU trainers — and times, from the moment
the last pod was created, when the proxy received the first and the last CreateFleet call. Each measured
round starts from a fresh moto state and comes after an untimed warm-up round on it, as a running controller has
its caches warm (live offerings, subnets, AMIs, launch templates); the cluster and the controller are new.

Goal (issue #10): the last CreateFleet call issued within the batch idle time + 200 ms of the last pod's creation.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import REPOSITORY, render_table

sys.path.insert(0, str(REPOSITORY / "tests"))
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

import boto3  # noqa: E402
from cloud.faultproxy import Answer, Call, FaultProxy  # noqa: E402
from reconcile.awsaccount import K8S_VERSION, REGION, WorkloadsAccount  # noqa: E402

from karpenter_policy.catalog import load_catalog  # noqa: E402
from karpenter_policy.cloud.aws.api import AwsConnection  # noqa: E402
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings  # noqa: E402
from karpenter_policy.cloud.provider import Instance, LaunchRequest  # noqa: E402
from karpenter_policy.fakes.cluster import MemoryCluster  # noqa: E402
from karpenter_policy.kube import objects  # noqa: E402
from karpenter_policy.model.instancetypes import InstanceType  # noqa: E402
from karpenter_policy.reconcile import logs  # noqa: E402
from karpenter_policy.reconcile.constraints import DirectorySource  # noqa: E402
from karpenter_policy.reconcile.controller import ControllerOptions  # noqa: E402
from karpenter_policy.reconcile.runner import assemble  # noqa: E402

WORK = REPOSITORY / "benchmarks" / ".work" / "provision"
GOAL_MARGIN = 0.2
CLUSTER = "bench"


class TimedProxy(FaultProxy):
    """The fault proxy, noting when each CreateFleet call arrives (time.monotonic: one clock for the machine).
    It hands moto one CreateFleet at a time: moto 5's fleets are not thread-safe (concurrent ones now and then
    answer with a server error page), which EC2 is."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.fleets: list[float] = []
        self._one_fleet = threading.Lock()

    def _create_fleet(self, handler: Any, call: Call, body: bytes, headers: dict[str, str]) -> Answer:
        self.fleets.append(time.monotonic())
        with self._one_fleet:
            return super()._create_fleet(handler, call, body, headers)


class IssuedLaunches:
    """The AWS provider, noting when the controller hands it each launch (the controller's share of the latency;
    the provider then checks the client token with DescribeInstances and calls CreateFleet)."""

    def __init__(self, provider: AwsCloudProvider) -> None:
        self.provider = provider
        self.issued: list[float] = []

    def create(self, request: LaunchRequest) -> Instance:
        self.issued.append(time.monotonic())
        return self.provider.create(request)

    def delete(self, instance_id: str) -> None:
        self.provider.delete(instance_id)

    def get(self, instance_id: str) -> Instance | None:
        return self.provider.get(instance_id)

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        return self.provider.list(cluster_name)

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        return self.provider.instance_types(region, provider)

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        self.provider.mark_unavailable(instance_type, zone, capacity_type, reason)

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        return self.provider.current_image(instance_type, provider)

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        return self.provider.collect_launch_templates(cluster_name)


# --- the workload --------------------------------------------------------------------------------------------


def _pod(name: str, app: str, cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    gpus = spec.pop("gpus", None)
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    owner = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-7c9f", "uid": f"uid-{app}", "controller": True}
    ]
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}, "ownerReferences": owner},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1", "resources": resources}], **spec},
    }


SPARK = {"app": "kspark"}
BATCH = {
    "tolerations": [{"key": "workload", "value": "batch", "effect": "NoSchedule"}],
    "nodeSelector": {"workload": "batch"},
}
GPU = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}], "gpus": "1"}
#: (app, share of the pods, cpu, memory, spec extras): ten shapes over four provisioners.
MIX: tuple[tuple[str, float, str, str, dict[str, Any]], ...] = (
    ("web", 0.30, "250m", "512Mi", {}),
    ("api", 0.20, "500m", "1Gi", {}),
    ("worker", 0.12, "1", "2Gi", {}),
    ("cache", 0.06, "250m", "4Gi", {}),
    ("search", 0.04, "2", "8Gi", {}),
    ("small", 0.16, "100m", "128Mi", {}),
    ("spark-exec", 0.05, "4", "7884Mi", {"nodeSelector": {**SPARK, "karpenter.sh/capacity-type": "spot"}}),
    ("spark-driver", 0.01, "1", "2Gi", {"nodeSelector": {**SPARK, "karpenter.sh/capacity-type": "on-demand"}}),
    ("batch", 0.05, "1", "2Gi", BATCH),
    ("trainer", 0.01, "3", "12Gi", GPU),
)


def workload(count: int, round_: int) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    for app, share, cpu, memory, extra in MIX:
        for i in range(max(1, round(count * share))):
            pods.append(_pod(f"{app}-{round_}-{i}", app, cpu, memory, **json.loads(json.dumps(extra))))
    return pods[:count]


# --- the environment -----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("moto's server did not start within 60 s")


def compile_constraint_sets() -> Path:
    out = WORK / "build"
    subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", str(REPOSITORY / "examples/workloads/policies"),
         "-o", str(out)],
        cwd=REPOSITORY, check=True, capture_output=True,
    )
    return out


@dataclass(frozen=True, slots=True)
class Round:
    pods: int
    create_seconds: float  # creating the burst
    first_issued: float  # last pod created → the controller hands the first launch to the provider
    last_issued: float  # … the last launch
    first_fleet: float  # last pod created → first CreateFleet received
    last_fleet: float  # … → last CreateFleet received
    fleets: int
    nodes: int
    bound: int


def one_round(cloud: IssuedLaunches, proxy: TimedProxy, build: Path, count: int, idle: float, index: int) -> Round:
    cluster = MemoryCluster()
    options = ControllerOptions(cluster_name=CLUSTER, batch_idle=idle, unschedulable_only=False, bind_existing=True)
    runner = assemble(cluster, cloud, DirectorySource(build), options, region=REGION)
    controller = runner.controller
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while controller.loaded is None or not all(i.synced.is_set() for i in runner.feed.required()):
        if time.monotonic() > deadline:
            raise SystemExit("the controller did not start within 60 s")
        time.sleep(0.05)
    pods = workload(count, index)
    proxy.fleets.clear()
    cloud.issued.clear()
    started = time.monotonic()
    for pod in pods:
        cluster.create(objects.POD, pod)
    last_created = time.monotonic()
    deadline = last_created + 120
    while time.monotonic() < deadline:  # every pod bound (or reported unschedulable) and no launch under way
        if all(p["spec"].get("nodeName") for p in cluster.list(objects.POD).items):
            break
        time.sleep(0.05)
    runner.stop()
    thread.join(60)
    fleets = sorted(proxy.fleets)
    issued = sorted(cloud.issued)
    if not fleets:
        raise SystemExit("no CreateFleet call was made")
    bound = sum(1 for p in cluster.list(objects.POD).items if p["spec"].get("nodeName"))
    return Round(
        pods=len(pods),
        create_seconds=last_created - started,
        first_issued=issued[0] - last_created,
        last_issued=issued[-1] - last_created,
        first_fleet=fleets[0] - last_created,
        last_fleet=fleets[-1] - last_created,
        fleets=len(fleets),
        nodes=len(cluster.list(objects.NODE).items),
        bound=bound,
    )


def terminate_all(cloud: IssuedLaunches) -> None:
    for instance in cloud.list(CLUSTER):
        cloud.delete(instance.id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-idle", type=float, default=1.0, help="seconds (default %(default)s)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    log = (WORK / "controller.log").open("w", encoding="utf-8")
    logs.configure(log)  # the controller's log, for a look afterwards
    build = compile_constraint_sets()
    moto, moto_url = start_moto()
    proxy = TimedProxy(moto_url)
    try:
        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)
        images = ec2.describe_images(Owners=["amazon"])["Images"]
        amis = (
            sorted(i["ImageId"] for i in images if i["Architecture"] == "x86_64")[0],
            sorted(i["ImageId"] for i in images if i["Architecture"] == "arm64")[0],
        )
        rounds = []
        for index in range(1, args.repeat + 1):
            cloud = fresh_account(moto_url, proxy, ec2, amis)
            one_round(cloud, proxy, build, args.pods, args.batch_idle, 0)  # warm-up: the caches of a running controller
            terminate_all(cloud)
            rounds.append(one_round(cloud, proxy, build, args.pods, args.batch_idle, index))
    finally:
        proxy.close()
        moto.terminate()
        moto.wait(30)
    report(rounds, args)
    return 0


def fresh_account(moto_url: str, proxy: TimedProxy, ec2: Any, amis: tuple[str, str]) -> IssuedLaunches:
    """moto's state reset (every round starts alike: moto slows down as instances accumulate), the account
    created again, and a provider for it."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=60).read()
    proxy.reset()
    WorkloadsAccount(ec2, proxy, *amis)
    return IssuedLaunches(
        AwsCloudProvider(
            AwsConnection(REGION, endpoint_url=proxy.url, max_pool_connections=64),
            ClusterSettings(
                endpoint="https://ABCDEF.gr7.us-east-1.eks.amazonaws.com",
                ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
                kubernetes_version=K8S_VERSION,
                default_instance_profile="KarpenterNodeInstanceProfile-bench",
            ),
            list(load_catalog().instance_types),
        )
    )


def report(rounds: list[Round], args: argparse.Namespace) -> None:
    goal = args.batch_idle + GOAL_MARGIN

    def median(field: str) -> float:
        return float(statistics.median(getattr(r, field) for r in rounds))

    if args.json:
        figures = [{field: getattr(r, field) for field in Round.__slots__} for r in rounds]
        print(json.dumps({"goal_seconds": goal, "rounds": figures, "load": os.getloadavg()}, indent=2))
        return
    header = ("round", "pods", "bound", "nodes", "create s", "→ 1st launch", "→ last launch", "→ 1st fleet",
              "→ last fleet")
    rows = [
        (str(i), str(r.pods), str(r.bound), str(r.nodes), f"{r.create_seconds:.3f}", f"{r.first_issued:.3f}",
         f"{r.last_issued:.3f}", f"{r.first_fleet:.3f}", f"{r.last_fleet:.3f}")
        for i, r in enumerate(rounds, start=1)
    ]
    print(f"provision: {args.pods} pods of {len(MIX)} shapes, batch idle {args.batch_idle:g} s, "
          f"load average {os.getloadavg()[0]:.2f}; seconds after the last pod was created")
    print(render_table(header, rows, frozenset(range(1, len(header)))))
    for what, field in (
        ("first CreateFleet", "first_fleet"),
        ("every launch handed to the provider", "last_issued"),
        ("every CreateFleet", "last_fleet"),
    ):
        verdict = "met" if median(field) <= goal else "not met"
        print(f"goal ≤ batch idle + {GOAL_MARGIN * 1000:.0f} ms = {goal:.3f} s, {what}: {verdict} "
              f"(median {median(field):.3f} s, best {min(getattr(r, field) for r in rounds):.3f} s)")


if __name__ == "__main__":
    sys.exit(main())
