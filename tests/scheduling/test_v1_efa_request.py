"""A pod requesting `vpc.amazonaws.com/efa`: Karpenter v1.14.1 offers it on the types with EFA interfaces (aws
pkg/providers/instancetype/types.go:347 and :472 `efas`: the type's `EfaInfo.MaximumEfaInterfaces`, or the count of
the EC2NodeClass's `efa-only` interfaces when it sets `networkInterfaces`), so such a pod schedules only onto them;
v0.31.1 offers it on none. A class's `networkInterfaces` and `cpuOptions` also narrow the types to those that can
launch with them (pkg/providers/instancetype/compatibility/compatibility.go `IsCompatibleWithNodeClass`), from the
catalog's network facts (`model.nodeclassfit`)."""

from __future__ import annotations

from typing import Any

from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import node_configuration
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate

from .cluster import Cluster, cluster, make_pod
from .v1_replay import v1_cluster

EFA = wk.EFA
_OFFERINGS = tuple(Offering(z, c, p) for z in ("test-zone-1", "test-zone-2") for c, p in (("on-demand", 1.0),))


def _type(name: str, price: float, **facts: Any) -> InstanceType:
    offerings = tuple(Offering(o.zone, o.capacity_type, price) for o in _OFFERINGS)
    return InstanceType(name=name, architectures=("amd64",), offerings=offerings, price_on_demand=price, **facts)


#: dl1.24xlarge as v1.14.1's fake EC2 describes it (pkg/fake/zz_generated.describe_instance_types.go:81-140: 96
#: vCPUs, 768 GiB, 8 Gaudi, 4 EFA, four cards of 15 interfaces, 50 IPv4 each), and two types without EFA.
DL1 = _type("dl1.24xlarge", 13.1, vcpu=96, memory_mib=786432, gpu_count=8, gpu_manufacturer="habana",
            gpu_name="gaudi-hl-205", max_enis=15, ipv4_per_eni=50, network_cards=(15, 15, 15, 15), efa_interfaces=4,
            hypervisor="nitro")  # fmt: skip
C5N = _type("c5n.18xlarge", 3.9, vcpu=72, memory_mib=196608, max_enis=15, ipv4_per_eni=50, network_cards=(15,),
            efa_interfaces=1, hypervisor="nitro", nested_virtualization=True)  # fmt: skip
M5 = _type("m5.large", 0.096, vcpu=2, memory_mib=8192, max_enis=3, ipv4_per_eni=10, network_cards=(3,),
           hypervisor="nitro")  # fmt: skip
M5X = _type("m5.4xlarge", 0.768, vcpu=16, memory_mib=65536, max_enis=8, ipv4_per_eni=30, network_cards=(8,),
            hypervisor="nitro", nested_virtualization=True)  # fmt: skip
TABLE = InstanceTable((DL1, C5N, M5, M5X))


def _nodepool(*requirements: Requirement, node_class: dict[str, Any] | None = None) -> NodeClaimTemplate:
    return NodeClaimTemplate.build(
        TABLE,
        name="default",
        requirements=Requirements(requirements),
        node=node_configuration(None, {"amiFamily": "AL2023", **(node_class or {})}),
        owner_label=wk.NODEPOOL,
    )


def _world(strategy: str, template: NodeClaimTemplate) -> Cluster:
    return v1_cluster(strategy, template, table=TABLE)


def _interfaces(*nics: tuple[int, int, str]) -> dict[str, Any]:
    return {"networkInterfaces": [{"networkCardIndex": c, "deviceIndex": d, "interfaceType": t} for c, d, t in nics]}


def test_pods_requesting_efa_launch_one_dl1(strategy: str) -> None:
    """instancetype suite_test.go:909 "should launch instances for vpc.amazonaws.com/efa resource requests": a
    NodePool of dl1.24xlarge, a pod requesting 1 EFA and one requesting 2: both on one dl1.24xlarge node."""
    world = _world(strategy, _nodepool(Requirement.new(wk.INSTANCE_TYPE, Operator.IN, ["dl1.24xlarge"])))
    pods = [make_pod(requests={EFA: "1"}, limits={EFA: "1"}), make_pod(requests={EFA: "2"}, limits={EFA: "2"})]
    world.provision(*pods)
    nodes = {world.scheduled(pod).name for pod in pods}
    assert len(nodes) == 1
    assert all(world.scheduled(pod).instance_type == "dl1.24xlarge" for pod in pods)


def test_a_pod_requesting_efa_goes_only_to_a_type_with_efa(strategy: str) -> None:
    """The cheapest type (m5.large) has no EFA: the pod asking for one goes to the cheapest that has it, c5n, and a
    pod asking for two to the dl1 (c5n has one); its node offers what the type has (types.go `efas`)."""
    world = _world(strategy, _nodepool())
    one, two = make_pod(requests={EFA: "1"}), make_pod(requests={EFA: "2"})
    world.provision(one)
    world.provision(two)
    assert world.scheduled(one).instance_type == "c5n.18xlarge"
    assert world.scheduled(two).instance_type == "dl1.24xlarge"
    plain = make_pod(cpu="1")
    world.provision(plain)
    assert world.scheduled(plain).instance_type in ("m5.large", "c5n.18xlarge", "dl1.24xlarge")


def test_more_efa_than_any_type_has_is_refused_with_the_resource_named(strategy: str) -> None:
    world = _world(strategy, _nodepool())
    pod = make_pod(requests={EFA: "5"})
    plan = world.provision(pod)
    world.not_scheduled(pod)
    message = plan.failures[pod.key].reasons["default"].message
    assert "5 vpc.amazonaws.com/efa" in message, message


def test_the_class_s_efa_only_interfaces_are_the_efa_offered(strategy: str) -> None:
    """types.go:472-483: with `networkInterfaces` set, every type offers as many EFA as the class's `efa-only`
    interfaces (two here, on cards 0 and 1), whatever its own EFA; the types that cannot launch them (one card,
    or no EFA: c5n has one card, m5 neither) are left out (compatibility.go `networkInterfaceCompatibility`)."""
    node_class = _interfaces((0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"))
    template = _nodepool(node_class=node_class)
    assert TABLE.names_of(template.types) == ("dl1.24xlarge",)
    world = _world(strategy, template)
    two, three = make_pod(requests={EFA: "2"}), make_pod(requests={EFA: "3"})
    plan = world.provision(two, three)
    assert world.scheduled(two).instance_type == "dl1.24xlarge"
    world.not_scheduled(three)
    assert "3 vpc.amazonaws.com/efa" in plan.failures[three.key].reasons["default"].message


def test_nested_virtualization_keeps_the_types_whose_processor_has_it() -> None:
    """compatibility.go `nestedVirtualizationCompatibility`: `cpuOptions.nestedVirtualization: enabled` keeps the
    types with `nested-virtualization` among their processor's features; `disabled` asks nothing."""
    enabled = _nodepool(node_class={"cpuOptions": {"nestedVirtualization": "enabled"}})
    assert TABLE.names_of(enabled.types) == ("c5n.18xlarge", "m5.4xlarge")
    disabled = _nodepool(node_class={"cpuOptions": {"nestedVirtualization": "disabled"}})
    assert len(TABLE.names_of(disabled.types)) == 4


def test_a_nodepool_no_type_can_launch_is_unavailable_with_the_field_named(strategy: str) -> None:
    """EFA-only interfaces and nested virtualization together: dl1 has no nested virtualization, c5n and m5.4xlarge
    take no EFA-only interface on a second card. Nothing can launch: the pod is told which fields."""
    nested = {"cpuOptions": {"nestedVirtualization": "enabled"}}
    node_class = {**_interfaces((0, 0, "interface"), (1, 0, "efa-only")), **nested}
    template = _nodepool(node_class=node_class)
    assert template.types == 0
    world = _world(strategy, template)
    pod = make_pod(cpu="1")
    plan = world.provision(pod)
    world.not_scheduled(pod)
    message = plan.failures[pod.key].reasons["default"].message
    assert "networkInterfaces (2) and cpuOptions.nestedVirtualization: enabled" in message, message


def test_a_provisioners_pod_requesting_efa_is_refused_as_v0_31_refuses_it(strategy: str) -> None:
    """Karpenter v0.31.1 has no EFA resource: a Provisioner's pod requesting it finds no type, with v0.31's words."""
    world = cluster(strategy)
    pod = make_pod(requests={"cpu": "1", EFA: "1"})
    plan = world.provision(pod)
    world.not_scheduled(pod)
    assert plan.failures[pod.key].reasons["default"].message == f"no instance type offers {EFA}"
