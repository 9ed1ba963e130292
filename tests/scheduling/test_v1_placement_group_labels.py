"""`karpenter.k8s.aws/placement-group-id` and `-partition` are well-known labels of Karpenter v1.14.1 (aws
pkg/apis/v1/labels.go:61-62, `init`), not v0.31's: a pod of a v1 NodePool may select them though the NodePool's
requirements and its instance types do not define them — core pkg/scheduling/requirements.go:181-197 (v1.14.1),
`Compatible` with `AllowUndefinedWellKnownLabels`: "Well Known Labels must intersect, but if not defined, are
allowed" —, where a custom label no NodePool defines is refused ("does not have known values"). A v0.31
Provisioner's pod still is: v0.31 does not know them."""

from __future__ import annotations

import pytest

from karpenter_policy.model import labels as wk

from .cluster import cluster, make_pod, requirement
from .v1_replay import v1_cluster, v1_nodepool

SELECTORS = [{wk.PLACEMENT_GROUP_ID: "pg-0123456789abcdef0"}, {wk.PLACEMENT_GROUP_PARTITION: "2"}]


@pytest.mark.parametrize("selector", SELECTORS, ids=lambda s: next(iter(s)))
def test_a_v1_nodepools_pod_may_select_the_placement_group_labels(strategy: str, selector: dict[str, str]) -> None:
    world = v1_cluster(strategy)
    pod = make_pod(node_selector=selector)
    world.provision(pod)
    world.scheduled(pod)


@pytest.mark.parametrize("selector", SELECTORS, ids=lambda s: next(iter(s)))
def test_a_provisioners_pod_selecting_them_is_refused_as_v0_31_refuses_an_undefined_label(
    strategy: str, selector: dict[str, str]
) -> None:
    world = cluster(strategy)
    pod = make_pod(node_selector=selector)
    plan = world.provision(pod)
    world.not_scheduled(pod)
    assert "does not have known values" in plan.failures[pod.key].reasons["default"].message


def test_a_nodepool_requirement_on_the_placement_group_must_intersect_the_pods(strategy: str) -> None:
    """Defined by the NodePool, the label must intersect the pod's (requirements.go:196 `Intersects`)."""
    pool = v1_nodepool("default", requirement(wk.CAPACITY_TYPE, "Exists"),
                       requirement(wk.PLACEMENT_GROUP_ID, "In", "pg-a"))
    world = v1_cluster(strategy, pool)
    same, other = make_pod(node_selector={wk.PLACEMENT_GROUP_ID: "pg-a"}), make_pod(
        node_selector={wk.PLACEMENT_GROUP_ID: "pg-b"})
    world.provision(same, other)
    world.scheduled(same)
    world.not_scheduled(other)
