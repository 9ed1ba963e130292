"""`api.v1.objects`: the typed NodePool and EC2NodeClass built from admitted documents, and the scheduling view
(a Provisioner) the engine runs on — v1's semantics where they differ from v0.31 (no default requirements, the
`karpenter.sh/nodepool` label, `Gte`/`Lte`, `limits.nodes`, kubelet from the EC2NodeClass)."""

from __future__ import annotations

from typing import Any

from karpenter_policy.api.v1.admission import admit
from karpenter_policy.api.v1.objects import EC2NodeClass, NodePool, nodepool_path, provisioner_document
from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling import InstanceTable
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from tests.api.v1.test_admission import ec2nodeclass, nodepool


def admitted(doc: dict[str, Any]) -> dict[str, Any]:
    admission = admit(doc)
    assert admission.admitted, admission.refusals
    return admission.stored


def test_a_defaulted_nodepool_reads_every_field() -> None:
    doc = nodepool(
        weight=10,
        limits={"cpu": "1000", "memory": "1000Gi", "nodes": "20"},
        disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
                    "budgets": [{"nodes": "1", "reasons": ["Drifted"]}]},
    )
    template = doc["spec"]["template"]
    template["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "x"}}
    template["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5", "m5"], "minValues": 2}
    )
    template["spec"]["taints"] = [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]
    template["spec"]["startupTaints"] = [{"key": "init", "effect": "NoExecute"}]
    template["spec"]["terminationGracePeriod"] = "1h"
    pool = NodePool.from_document(admitted(doc))
    assert pool.name == "default" and pool.weight == 10
    assert pool.labels == {"team": "a"} and pool.annotations == {"note": "x"}
    assert pool.taints == (Taint("dedicated", "NoSchedule", "a"),)
    assert pool.startup_taints == (Taint("init", "NoExecute"),)
    assert pool.node_class_ref is not None and pool.node_class_ref.is_ec2_node_class
    assert pool.node_class_ref.name == "default"
    assert set(pool.limits) == {"cpu", "memory"} and pool.node_limit == 20
    assert pool.disruption.consolidation_policy == "WhenEmpty" and pool.disruption.consolidate_after == "30s"
    assert pool.disruption.budgets == ({"nodes": "1", "reasons": ["Drifted"]},)
    assert pool.expire_after == "720h" and pool.termination_grace_period == "1h"  # the CRD's default, as written
    assert pool.min_values == {"karpenter.k8s.aws/instance-family": 2}


def test_defaults_of_an_admitted_nodepool() -> None:
    pool = NodePool.from_document(admitted(nodepool()))
    assert pool.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.disruption.budgets == ({"nodes": "10%"},)
    assert pool.node_limit is None and pool.limits == {}


def test_the_scheduling_view_has_no_v031_defaults_and_the_nodepool_label() -> None:
    """v1 adds no default requirements (v0.31 added on-demand, amd64, linux, c/m/r, generation > 2); the view's
    nodes are `karpenter.sh/nodepool: <name>` and never `karpenter.sh/provisioner-name`."""
    pool = NodePool.from_document(admitted(nodepool()))
    view = pool.provisioner()
    assert view.kind == "NodePool" and view.owner_label == wk.NODEPOOL
    assert set(view.requirements) == {wk.CAPACITY_TYPE}
    table = InstanceTable.of_catalog(load_catalog())
    template = NodeClaimTemplate.from_provisioner(table, view)
    assert template.requirements[wk.NODEPOOL] == Requirement.new(wk.NODEPOOL, "In", ["default"])
    pod_on_old_name = Requirements.from_labels({wk.PROVISIONER_NAME: "default"})
    pod_on_pool = Requirements.from_labels({wk.NODEPOOL: "default"})
    assert not template.requirements.admits(pod_on_old_name, wk.WELL_KNOWN_LABELS)
    assert template.requirements.admits(pod_on_pool, wk.WELL_KNOWN_LABELS)


def test_requirements_are_the_template_requirements_and_its_labels() -> None:
    doc = nodepool()
    doc["spec"]["template"]["metadata"] = {"labels": {"kubernetes.io/arch": "arm64"}}
    doc["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gte", "values": ["7"]}
    )
    view = NodePool.from_document(admitted(doc)).provisioner()
    generation = view.requirements[wk.INSTANCE_GENERATION]
    assert generation.has("7") and not generation.has("6")
    assert view.requirements[wk.ARCH] == Requirement.new(wk.ARCH, "In", ["arm64"])


def test_kubelet_and_node_template_come_from_the_ec2nodeclass() -> None:
    node_class = EC2NodeClass.from_document(admitted(ec2nodeclass(
        kubelet={"maxPods": 20}, amiSelectorTerms=[{"alias": "bottlerocket@latest"}],
        blockDeviceMappings=[{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}}],
        instanceStorePolicy="RAID0",
    )))
    assert node_class.ami_family == "Bottlerocket" and node_class.kubelet == {"maxPods": 20}
    assert node_class.node_template()["amiFamily"] == "Bottlerocket"
    assert node_class.instance_store_policy == "RAID0"
    view = NodePool.from_document(admitted(nodepool())).provisioner(node_class)
    assert view.kubelet == {"maxPods": 20}
    explicit = EC2NodeClass.from_document(admitted(ec2nodeclass(
        amiFamily="AL2", amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}]
    )))
    assert explicit.ami_family == "AL2"


def test_every_field_of_the_view_maps_back_into_the_nodepool() -> None:
    pool = NodePool.from_document(admitted(nodepool(limits={"cpu": "10"})))
    document = provisioner_document(pool)
    assert document["spec"]["requirements"][0]["key"] == wk.CAPACITY_TYPE
    assert nodepool_path(("spec", "requirements", 0, "values", 0)) == (
        "spec", "template", "spec", "requirements", 0, "values", 0)
    assert nodepool_path(("spec", "labels", "team")) == ("spec", "template", "metadata", "labels", "team")
    assert nodepool_path(("spec", "limits", "resources", "cpu")) == ("spec", "limits", "cpu")
    assert nodepool_path(("metadata", "name")) == ("metadata", "name")
