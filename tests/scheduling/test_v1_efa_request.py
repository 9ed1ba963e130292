"""A pod requesting `vpc.amazonaws.com/efa`: Karpenter v1.14.1 offers it on the types with EFA interfaces (aws
pkg/providers/instancetype/types.go:347 and :472 `efas`, from DescribeInstanceTypes' `EfaInfo`), v0.31.1 on none.
This project models no EFA counts (the embedded catalog has none): a v1 NodePool's refusal says so, not merely "no
instance type offers" it (docs/v1.md); a v0.31 Provisioner's is v0.31's."""

from __future__ import annotations

from .cluster import cluster, make_pod
from .v1_replay import v1_cluster

EFA = "vpc.amazonaws.com/efa"


def test_a_v1_nodepools_pod_requesting_efa_is_told_efa_is_not_modelled(strategy: str) -> None:
    world = v1_cluster(strategy)
    pod = make_pod(requests={"cpu": "1", EFA: "1"})
    plan = world.provision(pod)
    world.not_scheduled(pod)
    message = plan.failures[pod.key].reasons["default"].message
    assert message.startswith(f"no instance type offers {EFA}: EFA interfaces are not modelled here"), message


def test_a_provisioners_pod_requesting_efa_is_refused_as_v0_31_refuses_it(strategy: str) -> None:
    world = cluster(strategy)
    pod = make_pod(requests={"cpu": "1", EFA: "1"})
    plan = world.provision(pod)
    world.not_scheduled(pod)
    assert plan.failures[pod.key].reasons["default"].message == f"no instance type offers {EFA}"
