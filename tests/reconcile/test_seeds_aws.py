"""The seeds, end to end: the controller on an in-memory cluster launching through the AWS provider — boto3 over
HTTP to moto's server behind the fault proxy — from the constraint sets `compile` writes for
examples/workloads/policies (as files, and as the ConfigMap Argo CD / Flux sync)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.reconcile.constraints import ConfigMapSource
from karpenter_policy.reconcile.provisioning.launcher import launch_options
from karpenter_policy.scheduling import Scheduler

from .conftest import AwsWorkloads, MakeHarness
from .support import (
    POLICIES,
    ROOT,
    Harness,
    compile_policies,
    configmap_manifest,
    cpu_of,
    create_all,
    inflate,
    label,
    pod,
)

SPARK_FAMILIES = {"c5", "c5a", "c5d", "c5ad", "m5", "c6a"}
SPARK_SIZES = {"2xlarge", "4xlarge", "8xlarge", "9xlarge"}


def tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or []}


@pytest.mark.slow
def test_inflate_scaled_0_5_10_launches_few_cheap_spot_nodes(
    make_harness: MakeHarness, aws_workloads: AwsWorkloads
) -> None:
    h = make_harness(cloud=aws_workloads.provider())
    h.step()
    assert aws_workloads.instances() == []  # replicas: 0
    create_all(h.cluster, objects.POD, inflate(0, 5))
    h.batch()
    create_all(h.cluster, objects.POD, inflate(5, 5))
    h.batch()

    assert h.unbound() == []
    instances = aws_workloads.instances()
    nodes = h.nodes()
    assert 1 <= len(instances) == len(nodes) <= 3
    assert sum(cpu_of(n) for n in nodes) <= 16, "ten 1-vCPU pods: no oversized node"
    for instance in instances:
        assert instance["InstanceLifecycle"] == "spot"
        assert tags(instance)["karpenter.sh/provisioner-name"] == "default"
        assert instance["SubnetId"] in aws_workloads.subnets.values()
        node = next(n for n in nodes if n["spec"]["providerID"].endswith(instance["InstanceId"]))
        assert label(node, "node.kubernetes.io/instance-type") == instance["InstanceType"]
        assert label(node, "topology.kubernetes.io/zone") == instance["Placement"]["AvailabilityZone"]
        assert label(node, "karpenter.sh/capacity-type") == "spot"
    assert len(aws_workloads.env.proxy.calls_to("CreateFleet")) == len(instances), "one fleet request per node"


@pytest.mark.slow
def test_emr_spark_drivers_on_demand_executors_spot_on_the_allowed_families(
    make_harness: MakeHarness, aws_workloads: AwsWorkloads
) -> None:
    h = make_harness(cloud=aws_workloads.provider())
    driver = yaml.safe_load((ROOT / "examples/workloads/apps/spark-driver-pod-template.yaml").read_text())
    executor = yaml.safe_load((ROOT / "examples/workloads/apps/spark-executor-4vcpu-7g.yaml").read_text())
    driver_spec = copy.deepcopy(driver["spec"])
    driver_spec["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "2Gi"}}
    pods = [pod("spark-driver", namespace="emr-karpenter", labels={"spark-role": "driver"}, **driver_spec)]
    executor_labels = {"spark-role": "executor"}
    pods += [
        pod(f"exec-{i}", namespace="emr-karpenter", labels=executor_labels, **copy.deepcopy(executor["spec"]))
        for i in range(12)
    ]
    create_all(h.cluster, objects.POD, pods)
    h.batch()

    assert h.unbound() == []
    driver_node = h.node_of("spark-driver", "emr-karpenter")
    assert label(driver_node, "karpenter.sh/capacity-type") == "on-demand"
    executor_nodes = {objects.name(h.node_of(f"exec-{i}", "emr-karpenter")) for i in range(12)}
    for name in executor_nodes | {objects.name(driver_node)}:
        node = h.node(name)
        assert label(node, "karpenter.sh/provisioner-name") == "kspark"
        assert label(node, "app") == "kspark"
        assert label(node, "karpenter.k8s.aws/instance-family") in SPARK_FAMILIES
        assert label(node, "karpenter.k8s.aws/instance-size") in SPARK_SIZES
        assert label(node, "topology.kubernetes.io/zone") == "us-east-1a"
    for name in executor_nodes:
        assert label(h.node(name), "karpenter.sh/capacity-type") == "spot"
    for instance in aws_workloads.instances():
        assert instance["SubnetId"] == aws_workloads.emr_subnet
    fleets = aws_workloads.env.proxy.calls_to("CreateFleet")
    assert {c.params["LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName"] for c in fleets} == {
        "emr-eks-workshop-karpenter-launchtemplate"
    }


def test_a_gpu_pod_lands_on_a_gpu_type(make_harness: MakeHarness, aws_workloads: AwsWorkloads) -> None:
    h = make_harness(cloud=aws_workloads.provider())
    job = yaml.safe_load((ROOT / "examples/workloads/apps/gpu-training-job.yaml").read_text())
    spec = job["spec"]["template"]["spec"]
    trainer = pod("train-resnet-x7k2p", namespace="ml", owner=("Job", "train-resnet"), **spec)
    create_all(h.cluster, objects.POD, [trainer])
    h.batch()
    node = h.node_of("train-resnet-x7k2p", "ml")
    assert label(node, "karpenter.sh/provisioner-name") == "gpu"
    assert label(node, "karpenter.k8s.aws/instance-family") in ("g5", "g6")
    assert int(label(node, "karpenter.k8s.aws/instance-gpu-count") or 0) >= 1
    assert label(node, "karpenter.sh/capacity-type") == "on-demand"
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert node["status"]["capacity"]["nvidia.com/gpu"] == label(node, "karpenter.k8s.aws/instance-gpu-count")


@pytest.mark.slow
def test_insufficient_capacity_on_the_cheapest_offering_falls_back_to_the_next_in_the_same_pass(
    make_harness: MakeHarness, aws_workloads: AwsWorkloads
) -> None:
    h = make_harness(cloud=aws_workloads.provider())
    # five 1-vCPU pods: one node is the cheapest plan at the test account's spot prices (four go on two cheaper)
    create_all(h.cluster, objects.POD, inflate(0, 5))
    cheapest = first_offering(h)
    subnet = aws_workloads.subnets[cheapest.zone]
    aws_workloads.env.proxy.insufficient_capacity(cheapest.instance_type, subnet, "spot")

    result = h.batch()
    assert len(result.plans) == 1, "no second plan: the fallback happened within the launch"
    (launched,) = result.launched
    assert (launched.instance_type, launched.zone) != (cheapest.instance_type, cheapest.zone)
    (fleet,) = aws_workloads.env.proxy.calls_to("CreateFleet")
    assert fleet.overrides()[0] == (cheapest.instance_type, subnet), "the cheapest pool was asked for first"
    assert h.unbound() == []
    (instance,) = aws_workloads.instances()
    assert instance["InstanceType"] == launched.instance_type
    exposition = h.controller.metrics.exposition().decode()
    assert 'karpenter_policy_insufficient_capacity_total{capacity_type="spot",provisioner="default"} 1.0' in exposition
    assert any(m.startswith("fell back to the next offering after insufficient capacity: ") for m in h.messages())


def first_offering(h: Harness) -> ChosenOffering:
    """The offering the controller will ask for first for the pending pods (the same inputs, planned aside)."""
    controller = h.controller
    controller.refresh_constraint_sets()
    assert controller.loaded is not None
    templates = controller.context.template_sets()
    pods = [controller.state.shapes.pod(p, order=i) for i, p in enumerate(h.pods())]
    (claim,) = Scheduler(templates.templates).solve(pods).claims
    return launch_options(claim, templates.template(claim.template))[0]


@pytest.mark.slow
def test_a_configmap_edit_takes_effect_and_a_corrupted_one_is_refused(
    make_harness: MakeHarness, aws_workloads: AwsWorkloads, configmap: dict[str, Any], tmp_path: Path
) -> None:
    cluster = MemoryCluster()
    cluster.create(objects.CONFIG_MAP, configmap)
    meta = configmap["metadata"]
    h = make_harness(cloud=aws_workloads.provider(), cluster=cluster,
                     source=ConfigMapSource(cluster, meta["namespace"], meta["name"]))
    create_all(h.cluster, objects.POD, inflate(0, 2))
    h.batch()
    assert {label(n, "karpenter.sh/capacity-type") for n in h.nodes()} == {"spot"}

    # The policy change merged: `default` launches on-demand now. Argo CD applies the new ConfigMap.
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    default = yaml.safe_load((policies / "default.yaml").read_text())
    default["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    ]
    (policies / "default.yaml").write_text(yaml.safe_dump(default))
    edited = configmap_manifest(compile_policies(policies, tmp_path / "build"))
    current = cluster.get(objects.CONFIG_MAP, meta["name"], meta["namespace"])
    assert current is not None
    current["data"] = edited["data"]
    current = cluster.update(objects.CONFIG_MAP, current)
    create_all(h.cluster, objects.POD, inflate(2, 2))
    second = h.batch()
    assert [n.capacity_type for n in second.launched] == ["on-demand"]

    # A hand edit breaks a hash: refused, an Event on the ConfigMap, and the reviewed version keeps launching.
    tampered = copy.deepcopy(current)
    document = json.loads(tampered["data"]["default.json"])
    document["requirements"] = [r for r in document["requirements"] if r["key"] != "karpenter.sh/capacity-type"]
    tampered["data"]["default.json"] = json.dumps(document)
    cluster.update(objects.CONFIG_MAP, tampered)
    create_all(h.cluster, objects.POD, inflate(4, 2))
    third = h.batch()
    (event,) = h.events("ConstraintSetRefused")
    assert "default.json" in event["message"] and "stays in force" in event["message"]
    assert [n.capacity_type for n in third.launched] == ["on-demand"]
    assert h.unbound() == []
