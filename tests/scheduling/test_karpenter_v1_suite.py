"""Karpenter v1.14.1's scheduling suite (`pkg/controllers/provisioning/scheduling/suite_test.go`), the cases v1 adds
or changes, replayed against our scheduler with NodePool templates.

`Describe("Provisioning") / Context("Well Known Labels")`: a NodePool requirement on an integer label with `Gt`,
`Lt` and v1's `Gte`, `Lte`. Karpenter's fake `integer` label is each fake type's CPU count
(`pkg/cloudprovider/fake/instancetype.go`: `IntegerInstanceLabelKey` In [cpu]); here it is the label the catalog
gives every type for the same number, `karpenter.k8s.aws/instance-cpu`. Each case names its Go `It` and the line it
starts on, and asserts what the Go case asserts: the node's value of the label.

From `pkg/controllers/provisioning/suite_test.go` (v1.14.1): the cases where a pod's requests are counted as
Kubernetes counts them — sidecars (restartable init containers) and pod-level `spec.resources` (`model/pods.py`) —
on a NodePool, asserting the node's capacity as `ExpectResources` does.
"""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import InstanceTable, Pod, TopologyRules, shape_of
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I

from .cluster import cluster, make_pod, requirement
from .support import GI, fake_type, fake_types
from .test_karpenter_v1_topology import nodepool

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"
INTEGER = wk.INSTANCE_CPU

#: (Go `It`, line, operator, value, the label's value on the node)
CASES = [
    ("should schedule compatible requirements with Operator=Gt", 264, "Gt", "8", "16"),
    ("should schedule compatible requirements with Operator=Lt", 273, "Lt", "8", "2"),
    ("should schedule compatible requirements with Operator=Gte", 282, "Gte", "16", "16"),
    ("should schedule compatible requirements with Operator=Lte", 291, "Lte", "2", "2"),
]


@pytest.mark.parametrize(("name", "line", "operator", "value", "expected"), CASES, ids=[f"L{c[1]}" for c in CASES])
def test_v1_integer_operator_case(
    name: str, line: int, operator: str, value: str, expected: str, strategy: str
) -> None:
    """suite_test.go (v1.14.1), Well Known Labels: the NodePool's requirement decides the node's integer label."""
    world = cluster(strategy, nodepool("default", requirement(INTEGER, operator, value)))
    pod = make_pod()
    world.provision(pod)
    assert world.scheduled(pod).labels.get(INTEGER) == expected, f"{GO_FILE}:{line} {name}"


def test_gte_and_lte_bound_inclusively_where_gt_and_lt_do_not(strategy: str) -> None:
    """The bound itself: `Gte 16` admits the 16-cpu type, `Gt 16` admits nothing; `Lte 2` the 2-cpu type, `Lt 2`
    nothing (pkg/scheduling/requirement.go: Gte/Lte are Gt/Lt one step wider)."""
    bounds = (("Gte", "16", True), ("Gt", "16", False), ("Lte", "2", True), ("Lt", "2", False))
    for operator, value, schedules in bounds:
        world = cluster(strategy, nodepool("default", requirement(INTEGER, operator, value)))
        pod = make_pod()
        world.provision(pod)
        if schedules:
            world.scheduled(pod)
        else:
            world.not_scheduled(pod)


# --- Constraints Validation: restricted labels ------------------------------------------------------------------------


def test_l426_a_pod_selecting_a_restricted_label_is_not_scheduled(strategy: str) -> None:
    """suite_test.go:426 "should not schedule pods that have node selectors with restricted labels": v1.14.1's
    RestrictedLabels is the hostname alone (pkg/apis/v1/labels.go)."""
    world = cluster(strategy, nodepool())
    pod = make_pod(node_requirements=[requirement(wk.HOSTNAME, "In", "test")])
    world.provision(pod)
    world.not_scheduled(pod)


def test_l442_a_pod_selecting_a_label_of_the_restricted_domain_is_not_scheduled(strategy: str) -> None:
    """suite_test.go:442 "should not schedule pods that have node selectors with restricted domains":
    RestrictedLabelDomains is karpenter.sh."""
    world = cluster(strategy, nodepool())
    pod = make_pod(node_requirements=[requirement("karpenter.sh/test", "In", "test")])
    world.provision(pod)
    world.not_scheduled(pod)


@pytest.mark.parametrize(("line", "prefix"), [(453, ""), (467, "subdomain.")], ids=["L453", "L467"])
def test_kubernetes_domain_labels_of_a_nodepool_are_on_its_nodes(line: int, prefix: str, strategy: str) -> None:
    """suite_test.go:453 "should schedule pods that have node selectors with label in the kubernetes domains" and
    :467 "... in subdomain from kubernetes domains": v1 allows kubernetes.io and k8s.io labels on a NodePool (v0.31
    restricted them), and the node carries them."""
    keys = [f"{prefix}{domain}/test" for domain in ("kubernetes.io", "k8s.io")]
    pool = nodepool("default", *(requirement(key, "In", "test-value") for key in keys))
    world = cluster(strategy, pool, topology=TopologyRules.V1_14)
    for key in keys:
        pod = make_pod()
        world.provision(pod)
        assert world.scheduled(pod).labels.get(key) == "test-value", f"{GO_FILE}:{line}"


# --- Provisioning: sidecars and pod-level resources (provisioning/suite_test.go) ----------------------------------

PROVISIONING_GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go"

#: `AddInstanceResources` three times (suite_test.go:3442): the fake types plus 10 cpu/4Gi, 11/5Gi and 12/6Gi, each
#: offered as spot in test-zone-1 at a price from its resources. A pod whose requests are miscounted lands on the
#: type below or above the one Karpenter picks. (Go names all three "example"; names are unique here.)
SIZED_TABLE = InstanceTable([
    *fake_types(),
    *(fake_type(f"example-{cpu}", cpu=cpu, memory_gib=memory, offerings=(("test-zone-1", "spot"),))
      for cpu, memory in ((10, 4), (11, 5), (12, 6))),
])  # fmt: skip


def _container(cpu: str, memory: str, sidecar: bool = False) -> dict[str, Any]:
    """A container requesting (and limited to) `cpu` and `memory`; `sidecar`: `restartPolicy: Always`."""
    resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
    return {"name": "c", "resources": resources, **({"restartPolicy": "Always"} if sidecar else {})}


#: (Go `It`, line, the app container, the init containers in order, the pod-level resources, the node's capacity)
SIZED_CASES = [
    ("should schedule based on the max resource requests of containers and initContainers with sidecar "
     "containers when initcontainer comes first", 532,
     _container("6", "2Gi"), [_container("10", "4Gi"), _container("4.9", "2.9Gi", sidecar=True)], None, (11, 5)),
    ("should schedule based on the max resource requests of containers and initContainers with sidecar "
     "containers when sidecar container comes first and init container resources are smaller than container "
     "resources", 583,
     _container("6", "2Gi"), [_container("4.9", "2.9Gi", sidecar=True), _container("5", "1Gi")], None, (11, 5)),
    ("should schedule based on the max resource requests of containers and initContainers with sidecar "
     "containers when sidecar container comes first and init container resources are bigger than container "
     "resources", 634,
     _container("5", "1Gi"), [_container("4.9", "2.9Gi", sidecar=True), _container("6", "2Gi")], None, (11, 5)),
    ("should schedule based on the pod level resources requests", 685,
     _container("5", "1Gi"), [_container("6", "2Gi"), _container("4", "2Gi", sidecar=True)],
     {"requests": {"cpu": "9.9", "memory": "3.9Gi"}, "limits": {"cpu": "10", "memory": "4Gi"}}, (10, 4)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "line", "app", "init", "pod_level", "capacity"), SIZED_CASES, ids=[f"L{c[1]}" for c in SIZED_CASES]
)
def test_v1_pod_requests_case(
    name: str,
    line: int,
    app: dict[str, Any],
    init: list[dict[str, Any]],
    pod_level: dict[str, Any] | None,
    capacity: tuple[int, int],
    strategy: str,
) -> None:
    """provisioning/suite_test.go (v1.14.1): a pod's requests as Kubernetes computes them — sidecars (restartable
    init containers) run beside the app containers and beside every init container after them; pod-level
    `spec.resources` replace the containers' sum — decide the node's size (`ExpectResources` on its capacity)."""
    body: dict[str, Any] = {"containers": [app], "initContainers": init}
    if pod_level is not None:
        body["resources"] = pod_level
    world = cluster(strategy, nodepool(table=SIZED_TABLE), table=SIZED_TABLE)
    pod = Pod(f"sized-{line}", shape_of(body))
    world.provision(pod)
    node = world.scheduled(pod)
    cpu, memory = capacity
    assert (node.capacity[CPU_I], node.capacity[MEMORY_I]) == (cpu * 1000, memory * GI), (
        f"{PROVISIONING_GO_FILE}:{line} {name}: got {node.instance_type}")
