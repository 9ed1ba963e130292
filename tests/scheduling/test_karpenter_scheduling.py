"""Karpenter v0.31's scheduling tests other than topology, replayed against our scheduler.

The reference (kubernetes-sigs/karpenter v0.31.1) is `pkg/controllers/provisioning/scheduling/provisioner_test.go`
(requirements, relaxation, instance type compatibility, binpacking, in-flight and existing nodes),
`provisioner_instance_selection_test.go` (which instance types a claim may launch) and the scheduler's part of
`pkg/controllers/provisioning/provisioner_test.go` (limits, DaemonSet overhead, taints, weighted provisioners). Each
test names the Go case it replays (`Describe / Context / It`) and asserts what the Go case asserts. The world around
the scheduler (the fake cloud provider, nodes in flight, bindings) is `cluster.py`.

Tests run under both packing strategies unless the Go assertion is about Karpenter's own packing (how many nodes,
which instance type a batch lands on): those run under `karpenter` only (`KARPENTER_ONLY`) and say so.

Adaptations to our model (the assertion is kept, the vocabulary changes): the fake provider's `integer` label is
`karpenter.k8s.aws/instance-cpu` here (it holds the cpu count too), its `size` label (`large`: more than 4 cpu and
8Gi) is read as a cpu bound, its `special` label (on some types only) is `karpenter.k8s.aws/instance-gpu-count`;
`fake.com/vendor-a` / `vendor-b` and the tests' made-up GPU resources are `nvidia.com/gpu` / `amd.com/gpu`; the
RuntimeClass overhead is the `overhead` the RuntimeClass admission plugin writes into the pod; a provisioner's
`status.resources` is a node of the provisioner with that capacity; Go's 4.25-cpu type is a 5-cpu one (whole vcpus).

Go cases NOT replayed, and why:

- provisioner_test.go lines 541-975 repeat lines 109-540 verbatim (Well Known Labels, Constraints Validation,
  Scheduling Logic): replayed once. Provisioning / Preferential Fallback repeats four cases of Preferential
  Fallback: replayed once (its PreferNoSchedule case is replayed). The instance selection file has "(pod os =
  linux)" twice: one test.
- Instance Type Compatibility / "should launch pods with different operating systems on different instances" and
  the four Windows cases of the instance selection tests: our node OS is a property of the template (its AMI
  family), not of the instance type, so no template offers both Linux and Windows.
- In-Flight Nodes / "should launch a second node if an in-flight node is terminating", Taints / "should assume pod
  will schedule to a tainted node with a custom startup taint", "should not assume pod will schedule to a node with
  startup taints after initialization", "should consider a tainted NotReady node as in-flight even if initialized",
  "should not launch a second node if there is an in-flight node that can support the pod (#2011)", In-Flight Nodes
  / Daemonsets (both), No Pre-Binding / "should handle resource zeroing of extended resources by kubelet",
  Provisioning / "should schedule all pods on one node when node is in deleting state", "should ignore provisioners
  that are deleting", Daemonsets and Node Overhead / "should account for overhead using daemonset pod spec instead
  of daemonset spec": what a node offers (deleting nodes, ephemeral and startup taints dropped before
  initialization, DaemonSet pods still to come, allocatable the kubelet reports) and which provisioners and
  DaemonSet pods exist is cluster state that the caller hands the scheduler (`ExistingNode`, templates, DaemonSet
  pods), not scheduling.
- VolumeUsage, Machine Creation, Annotations, Labels (node objects), Volume Topology Requirements: volumes, CSI
  limits and the NodeClaim API objects are outside the scheduler.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint
from karpenter_policy.scheduling import KARPENTER, InstanceTable, NodeClaimTemplate

from .cluster import (
    ARCH,
    CAPACITY_TYPE,
    FAKE_TABLE,
    HOSTNAME,
    INSTANCE_TYPE,
    Z1,
    Z2,
    Z3,
    ZONE,
    cluster,
    make_pod,
    make_pods,
    provisioner,
    provisioner_requirements,
    requirement,
    term,
    zones,
)
from .support import GI, assorted_types, benchmark_types, fake_type, template

#: The Go assertion is about Karpenter's own packing (node counts, instance types of a batch): `karpenter` only.
KARPENTER_ONLY = pytest.mark.parametrize("strategy", [KARPENTER])
TEST_KEY = "test-key"
INSTANCE_CPU = wk.INSTANCE_CPU
GPU_COUNT = wk.INSTANCE_GPU_COUNT


def not_scheduled(strategy: str, *pods: Any, templates: Sequence[NodeClaimTemplate] = ()) -> None:
    """One round; none of `pods` schedules."""
    world = cluster(strategy, *templates)
    world.provision(*pods)
    for pod in pods:
        world.not_scheduled(pod)


def labels_of(strategy: str, pod: Any, *templates: Any) -> dict[str, str]:
    """One round with one pod; the labels of the node it lands on."""
    world = cluster(strategy, *templates)
    world.provision(pod)
    return world.scheduled(pod).labels


# --- Custom Constraints ---------------------------------------------------------------------------------------------

#: (Go case, provisioner, pod options, the node label the Go case expects — None: the pod must not schedule).
CONSTRAINTS: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str, str] | None]] = [
    (
        "Provisioner with Labels / should schedule unconstrained pods that don't have matching node selectors",
        {"labels": {TEST_KEY: "test-value"}},
        {},
        (TEST_KEY, "test-value"),
    ),
    (
        "Provisioner with Labels / should not schedule pods that have conflicting node selectors",
        {"labels": {TEST_KEY: "test-value"}},
        {"node_selector": {TEST_KEY: "different-value"}},
        None,
    ),
    (
        "Provisioner with Labels / should not schedule pods that have node selectors with undefined key",
        {},
        {"node_selector": {TEST_KEY: "test-value"}},
        None,
    ),
    (
        "Provisioner with Labels / should schedule pods that have matching requirements",
        {"labels": {TEST_KEY: "test-value"}},
        {"node_requirements": [requirement(TEST_KEY, "In", "test-value", "another-value")]},
        (TEST_KEY, "test-value"),
    ),
    (
        "Provisioner with Labels / should not schedule pods that have conflicting requirements",
        {"labels": {TEST_KEY: "test-value"}},
        {"node_requirements": [requirement(TEST_KEY, "In", "another-value")]},
        None,
    ),
    (
        "Well Known Labels / should use provisioner constraints",
        {"terms": [zones(Z2)]},
        {},
        (ZONE, Z2),
    ),
    (
        "Well Known Labels / should use node selectors",
        {"terms": [zones(Z1, Z2)]},
        {"node_selector": {ZONE: Z2}},
        (ZONE, Z2),
    ),
    (
        "Well Known Labels / should not schedule nodes with a hostname selector",
        {},
        {"node_selector": {HOSTNAME: "red-node"}},
        None,
    ),
    (
        "Well Known Labels / should not schedule the pod if nodeselector unknown",
        {"terms": [zones(Z1)]},
        {"node_selector": {ZONE: "unknown"}},
        None,
    ),
    (
        "Well Known Labels / should not schedule if node selector outside of provisioner constraints",
        {"terms": [zones(Z1)]},
        {"node_selector": {ZONE: Z2}},
        None,
    ),
    (
        "Well Known Labels / should schedule compatible requirements with Operator=In",
        {},
        {"node_requirements": [zones(Z3)]},
        (ZONE, Z3),
    ),
    (
        "Well Known Labels / should schedule compatible requirements with Operator=Gt",
        {"terms": [requirement(INSTANCE_CPU, "Gt", "8")]},
        {},
        (INSTANCE_CPU, "16"),
    ),
    (
        "Well Known Labels / should schedule compatible requirements with Operator=Lt",
        {"terms": [requirement(INSTANCE_CPU, "Lt", "8")]},
        {},
        (INSTANCE_CPU, "2"),
    ),
    (
        "Well Known Labels / should not schedule incompatible preferences and requirements with Operator=In",
        {},
        {"node_requirements": [zones("unknown")]},
        None,
    ),
    (
        "Well Known Labels / should schedule compatible requirements with Operator=NotIn",
        {},
        {"node_requirements": [requirement(ZONE, "NotIn", Z1, Z2, "unknown")]},
        (ZONE, Z3),
    ),
    (
        "Well Known Labels / should not schedule incompatible preferences and requirements with Operator=NotIn",
        {},
        {"node_requirements": [requirement(ZONE, "NotIn", Z1, Z2, Z3, "unknown")]},
        None,
    ),
    (
        "Well Known Labels / should schedule compatible preferences and requirements with Operator=In",
        {},
        {"node_requirements": [zones(Z1, Z2, Z3, "unknown")], "node_preferences": [zones(Z2, "unknown")]},
        (ZONE, Z2),
    ),
    (
        "Well Known Labels / should schedule incompatible preferences and requirements with Operator=In",
        {},
        {"node_requirements": [zones(Z1, Z2, Z3, "unknown")], "node_preferences": [zones("unknown")]},
        ("scheduled", ""),
    ),
    (
        "Well Known Labels / should schedule compatible preferences and requirements with Operator=NotIn",
        {},
        {
            "node_requirements": [zones(Z1, Z2, Z3, "unknown")],
            "node_preferences": [requirement(ZONE, "NotIn", Z1, Z3)],
        },
        (ZONE, Z2),
    ),
    (
        "Well Known Labels / should schedule incompatible preferences and requirements with Operator=NotIn",
        {},
        {
            "node_requirements": [zones(Z1, Z2, Z3, "unknown")],
            "node_preferences": [requirement(ZONE, "NotIn", Z1, Z2, Z3)],
        },
        ("scheduled", ""),
    ),
    (
        "Well Known Labels / should schedule compatible node selectors, preferences and requirements",
        {},
        {
            "node_selector": {ZONE: Z3},
            "node_requirements": [zones(Z1, Z2, Z3)],
            "node_preferences": [zones(Z1, Z2, Z3)],
        },
        (ZONE, Z3),
    ),
    (
        "Scheduling Logic / should not schedule pods that have node selectors with In operator and undefined key",
        {},
        {"node_requirements": [requirement(TEST_KEY, "In", "test-value")]},
        None,
    ),
    (
        "Scheduling Logic / should not schedule pods that have node selectors with Exists operator and undefined key",
        {},
        {"node_requirements": [requirement(TEST_KEY, "Exists")]},
        None,
    ),
    (
        "Scheduling Logic / should schedule unconstrained pods that don't have matching node selectors",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {},
        (TEST_KEY, "test-value"),
    ),
    (
        "Scheduling Logic / should schedule pods that have node selectors with matching value and In operator",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {"node_requirements": [requirement(TEST_KEY, "In", "test-value")]},
        (TEST_KEY, "test-value"),
    ),
    (
        "Scheduling Logic / should not schedule pods that have node selectors with matching value and NotIn operator",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {"node_requirements": [requirement(TEST_KEY, "NotIn", "test-value")]},
        None,
    ),
    (
        "Scheduling Logic / should schedule the pod with Exists operator and defined key",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {"node_requirements": [requirement(TEST_KEY, "Exists")]},
        (TEST_KEY, "test-value"),
    ),
    (
        "Scheduling Logic / should not schedule the pod with DoesNotExists operator and defined key",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {"node_requirements": [requirement(TEST_KEY, "DoesNotExist")]},
        None,
    ),
    (
        "Scheduling Logic / should not schedule pods that have node selectors with different value and In operator",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {"node_requirements": [requirement(TEST_KEY, "In", "another-value")]},
        None,
    ),
    (
        "Scheduling Logic / should schedule pods that have node selectors with different value and NotIn operator",
        {"terms": [requirement(TEST_KEY, "In", "test-value")]},
        {"node_requirements": [requirement(TEST_KEY, "NotIn", "another-value")]},
        (TEST_KEY, "test-value"),
    ),
    (
        "Scheduling Logic / Exists operator should not overwrite the existing value",
        {},
        {"node_requirements": [zones("non-existent-zone"), requirement(ZONE, "Exists")]},
        None,
    ),
    (
        "Constraints Validation / should not schedule pods that have node selectors with restricted labels"
        " (karpenter.sh/emptiness-timestamp)",
        {},
        {"node_requirements": [requirement(wk.EMPTINESS_TIMESTAMP, "In", "test")]},
        None,
    ),
    (
        "Constraints Validation / should not schedule pods that have node selectors with restricted labels"
        " (kubernetes.io/hostname)",
        {},
        {"node_requirements": [requirement(HOSTNAME, "In", "test")]},
        None,
    ),
    *(
        (
            f"Constraints Validation / should not schedule pods that have node selectors with restricted domains"
            f" ({domain})",
            {},
            {"node_requirements": [requirement(f"{domain}/test", "In", "test")]},
            None,
        )
        for domain in ("kubernetes.io", "k8s.io", "karpenter.sh")
    ),
    *(
        (
            f"Constraints Validation / should schedule pods that have node selectors with label in restricted domains"
            f" exceptions list ({domain})",
            {"terms": [requirement(f"{domain}/test", "In", "test-value")]},
            {},
            (f"{domain}/test", "test-value"),
        )
        for domain in ("kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io")
    ),
]


@pytest.mark.parametrize(
    ("go_case", "provisioner_options", "pod_options", "expected"), CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS]
)
def test_custom_and_well_known_constraints(
    strategy: str,
    go_case: str,
    provisioner_options: dict[str, Any],
    pod_options: dict[str, Any],
    expected: tuple[str, str] | None,
) -> None:
    """Custom Constraints / ...: the pod schedules onto a node with the expected label, or not at all."""
    options = dict(provisioner_options)
    terms = options.pop("terms", ())
    world = cluster(strategy, provisioner("default", *terms, **options))
    pod = make_pod(**pod_options)
    world.provision(pod)
    if expected is None:
        world.not_scheduled(pod)
        return
    node = world.scheduled(pod)
    key, value = expected
    if key != "scheduled":
        assert node.labels.get(key) == value


@pytest.mark.parametrize("operator", ["NotIn", "DoesNotExist"])
def test_should_schedule_pods_with_negative_operators_and_undefined_key(strategy: str, operator: str) -> None:
    """Scheduling Logic / should schedule pods that have node selectors with NotIn operator and undefined key; and
    "should schedule pods that with DoesNotExists operator and undefined key" """
    values = ("test-value",) if operator == "NotIn" else ()
    node = labels_of(strategy, make_pod(node_requirements=[requirement(TEST_KEY, operator, *values)]), provisioner())
    assert TEST_KEY not in node


def test_should_combine_multidimensional_node_selectors_preferences_and_requirements(strategy: str) -> None:
    """Well Known Labels / should combine multidimensional node selectors, preferences and requirements"""
    pod = make_pod(
        node_selector={ZONE: Z3, INSTANCE_TYPE: "arm-instance-type"},
        node_requirements=[
            zones(Z1, Z3),
            requirement(INSTANCE_TYPE, "In", "default-instance-type", "arm-instance-type"),
        ],
        node_preferences=[requirement(ZONE, "NotIn", "unknown"), requirement(INSTANCE_TYPE, "NotIn", "unknown")],
    )
    labels = labels_of(strategy, pod, provisioner())
    assert labels[ZONE] == Z3
    assert labels[INSTANCE_TYPE] == "arm-instance-type"


def test_should_schedule_pods_that_have_node_selectors_with_label_in_wellknown_label_list(strategy: str) -> None:
    """Constraints Validation / should schedule pods that have node selectors with label in wellknown label list"""
    world = cluster(strategy)
    pods = [
        make_pod(node_selector={ZONE: Z1}),
        make_pod(node_selector={INSTANCE_TYPE: "default-instance-type"}),
        make_pod(node_selector={ARCH: "arm64"}),
        make_pod(node_selector={wk.OS: "linux"}),
        make_pod(node_selector={CAPACITY_TYPE: "spot"}),
    ]
    world.provision(*pods)
    for pod in pods:
        world.scheduled(pod)


@pytest.mark.parametrize(
    ("second", "same_node", "second_value"),
    [
        (requirement(TEST_KEY, "NotIn", "another-value"), True, "test-value"),
        (requirement(TEST_KEY, "In", "another-value"), False, "another-value"),
    ],
    ids=["should schedule compatible pods to the same node", "should schedule incompatible pods to the different node"],
)
def test_scheduling_logic_compatible_pods(
    strategy: str, second: dict[str, Any], same_node: bool, second_value: str
) -> None:
    """Scheduling Logic / should schedule compatible pods to the same node; and "should schedule incompatible pods to
    the different node" """
    world = cluster(strategy, provisioner("default", requirement(TEST_KEY, "In", "test-value", "another-value")))
    pods = [
        make_pod(node_requirements=[requirement(TEST_KEY, "In", "test-value")]),
        make_pod(node_requirements=[second]),
    ]
    world.provision(*pods)
    one, two = world.scheduled(pods[0]), world.scheduled(pods[1])
    assert one.labels[TEST_KEY] == "test-value"
    assert two.labels[TEST_KEY] == second_value
    assert (one is two) == same_node


# --- Preferential Fallback ------------------------------------------------------------------------------------------


def test_required_should_not_relax_the_final_term(strategy: str) -> None:
    """Preferential Fallback / Required / should not relax the final term"""
    limited = provisioner("default", zones(Z1), requirement(INSTANCE_TYPE, "In", "default-instance-type"))
    not_scheduled(strategy, make_pod(required_terms=[[zones("invalid")]]), templates=[limited])


def test_required_should_relax_multiple_terms(strategy: str) -> None:
    """Preferential Fallback / Required / should relax multiple terms (ORed terms: the first satisfiable one wins)"""
    pod = make_pod(required_terms=[[zones("invalid")], [zones("invalid")], [zones(Z1)], [zones(Z2)]])
    assert labels_of(strategy, pod, provisioner())[ZONE] == Z1


def test_preferred_should_relax_all_terms(strategy: str) -> None:
    """Preferential Fallback / Preferred / should relax all terms"""
    pod = make_pod(preferred_terms=[(1, [zones("invalid")]), (1, [requirement(INSTANCE_TYPE, "In", "invalid")])])
    labels_of(strategy, pod, provisioner())


def test_preferred_should_relax_to_use_lighter_weights(strategy: str) -> None:
    """Preferential Fallback / Preferred / should relax to use lighter weights"""
    pod = make_pod(
        preferred_terms=[
            (100, [requirement(INSTANCE_TYPE, "In", "test-zone-3")]),
            (50, [zones(Z2)]),
            (1, [zones(Z1)]),
        ]
    )
    assert labels_of(strategy, pod, provisioner("default", zones(Z1, Z2)))[ZONE] == Z2


def test_preferred_should_schedule_even_if_preference_is_conflicting_with_requirement(strategy: str) -> None:
    """Preferential Fallback / Preferred / should schedule even if preference is conflicting with requirement"""
    pod = make_pod(required_terms=[[zones(Z3)]], preferred_terms=[(1, [requirement(ZONE, "NotIn", Z3)])])
    assert labels_of(strategy, pod, provisioner())[ZONE] == Z3


def test_preferred_should_schedule_even_if_preference_requirements_are_conflicting(strategy: str) -> None:
    """Preferential Fallback / Preferred / should schedule even if preference requirements are conflicting"""
    pod = make_pod(node_preferences=[zones("invalid"), requirement(ZONE, "NotIn", "invalid")])
    labels_of(strategy, pod, provisioner())


def test_should_tolerate_prefer_no_schedule_taint_only_after_trying_to_relax_affinity_terms(strategy: str) -> None:
    """Provisioning / Preferential Fallback / Preferences / should tolerate PreferNoSchedule taint only after trying
    to relax Affinity terms"""
    taint = Taint("foo", PREFER_NO_SCHEDULE, "bar")
    world = cluster(strategy, template_with(taints=[taint]))
    pod = make_pod(preferred_terms=[(1, [zones("invalid")]), (1, [requirement(INSTANCE_TYPE, "In", "invalid")])])
    plan = world.provision(pod)
    assert taint in world.scheduled(pod).taints
    assert plan.relaxed[pod.key][-1] == "tolerated PreferNoSchedule taints"


def template_with(name: str = "default", **options: Any) -> NodeClaimTemplate:
    """`test.Provisioner(...)` of provisioning/provisioner_test.go: no requirement of its own."""
    return template(FAKE_TABLE, name=name, **options)


# --- Instance Type Compatibility --------------------------------------------------------------------------------------

BOTH_ARCHES = requirement(ARCH, "In", "arm64", "amd64")


def test_should_not_schedule_if_requesting_more_resources_than_any_instance_type_has(strategy: str) -> None:
    """Instance Type Compatibility / should not schedule if requesting more resources than any instance type has"""
    not_scheduled(strategy, make_pod(cpu="512"))


@pytest.mark.parametrize(
    ("go_case", "selectors"),
    [
        ("should launch pods with different archs on different instances", [{ARCH: "amd64"}, {ARCH: "arm64"}]),
        (
            "should launch pods with different instance type node selectors on different instances",
            [{"beta.kubernetes.io/instance-type": "small-instance-type"}, {INSTANCE_TYPE: "default-instance-type"}],
        ),
        ("should launch pods with different zone selectors on different instances", [{ZONE: Z1}, {ZONE: Z2}]),
    ],
)
def test_should_launch_pods_with_different_selectors_on_different_instances(
    strategy: str, go_case: str, selectors: list[dict[str, str]]
) -> None:
    """Instance Type Compatibility / should launch pods with different archs / instance type node selectors / zone
    selectors on different instances"""
    world = cluster(strategy, provisioner("default", BOTH_ARCHES))
    pods = [make_pod(node_selector=s) for s in selectors]
    world.provision(*pods)
    assert len({world.scheduled(p).name for p in pods}) == 2


@pytest.mark.parametrize(
    ("go_case", "pod_options"),
    [
        (
            "should exclude instance types that are not supported by the pod constraints (node affinity/instance type)",
            {"node_requirements": [requirement(INSTANCE_TYPE, "In", "arm-instance-type")]},
        ),
        (  # no type of ours runs ios (Karpenter's arm type does, and is excluded by the arch): the pod stays pending
            "should exclude instance types that are not supported by the pod constraints (node affinity/operating"
            " system)",
            {"node_requirements": [requirement(wk.OS, "In", "ios")]},
        ),
        (
            "should exclude instance types that are not supported by the provider constraints (arch)",
            {"limits": {"cpu": "14"}},
        ),
    ],
)
def test_should_exclude_instance_types_not_supported(strategy: str, go_case: str, pod_options: dict[str, Any]) -> None:
    """Instance Type Compatibility / should exclude instance types that are not supported by the pod / provider
    constraints (a provisioner of amd64 only)"""
    not_scheduled(
        strategy, make_pod(**pod_options), templates=[provisioner("default", requirement(ARCH, "In", "amd64"))]
    )


def two_gpu_table() -> InstanceTable:
    """`fake.InstanceTypes(5)` with 25 of one GPU on the first type and 25 of another on the second."""
    types = benchmark_types(5)
    types[0] = fake_type("fake-it-0", cpu=1, memory_gib=2, pods=10, gpus=25, gpu_vendor="nvidia")
    types[1] = fake_type("fake-it-1", cpu=2, memory_gib=4, pods=20, gpus=25, gpu_vendor="amd")
    return InstanceTable(types)


def test_should_launch_pods_with_resources_that_arent_on_any_single_instance_type_on_different_instances(
    strategy: str,
) -> None:
    """Instance Type Compatibility / should launch pods with resources that aren't on any single instance type on
    different instances"""
    table = two_gpu_table()
    world = cluster(strategy, provisioner(table=table), table=table)
    pods = [make_pod(limits={"nvidia.com/gpu": "1"}), make_pod(limits={"amd.com/gpu": "1"})]
    world.provision(*pods)
    assert len({world.scheduled(p).name for p in pods}) == 2


def test_should_fail_to_schedule_a_pod_with_resources_requests_that_arent_on_a_single_instance_type(
    strategy: str,
) -> None:
    """Instance Type Compatibility / should fail to schedule a pod with resources requests that aren't on a single
    instance type"""
    table = two_gpu_table()
    world = cluster(strategy, provisioner(table=table), table=table)
    pod = make_pod(limits={"nvidia.com/gpu": "1", "amd.com/gpu": "1"})
    world.provision(pod)
    world.not_scheduled(pod)


def sized_table() -> InstanceTable:
    """`fake.InstanceTypes(5)`: fake-it-4 (5 cpu, 10Gi) is the only `large` one and the only one with the optional
    `special` label; here the large one is "more than 4 cpu" and the optional label is a GPU count."""
    types = benchmark_types(4)
    types.append(fake_type("fake-it-4", cpu=5, memory_gib=10, pods=50, gpus=1))
    return InstanceTable(types)


def test_provider_specific_labels_should_filter_instance_types_that_match_labels(strategy: str) -> None:
    """Instance Type Compatibility / Provider Specific Labels / should filter instance types that match labels"""
    table = sized_table()
    world = cluster(strategy, provisioner(table=table), table=table)
    large = make_pod(node_requirements=[requirement(INSTANCE_CPU, "Gt", "4")])
    small = make_pod(node_requirements=[requirement(INSTANCE_CPU, "Lt", "5")])
    world.provision(large, small)
    assert world.scheduled(large).labels[INSTANCE_TYPE] == "fake-it-4"
    assert world.scheduled(small).labels[INSTANCE_TYPE] == "fake-it-0"


def test_provider_specific_labels_should_not_schedule_with_incompatible_labels(strategy: str) -> None:
    """Instance Type Compatibility / Provider Specific Labels / should not schedule with incompatible labels"""
    table = sized_table()
    world = cluster(strategy, provisioner(table=table), table=table)
    pods = [
        make_pod(node_requirements=[requirement(INSTANCE_CPU, "Gt", "4")], node_selector={INSTANCE_TYPE: "fake-it-0"}),
        make_pod(node_requirements=[requirement(INSTANCE_CPU, "Lt", "5")], node_selector={INSTANCE_TYPE: "fake-it-4"}),
    ]
    world.provision(*pods)
    for pod in pods:
        world.not_scheduled(pod)


@pytest.mark.parametrize("operator", ["Exists", "DoesNotExist"])
def test_provider_specific_labels_optional_labels(strategy: str, operator: str) -> None:
    """Instance Type Compatibility / Provider Specific Labels / should schedule optional labels; and "should
    schedule without optional labels if disallowed" """
    table = sized_table()
    world = cluster(strategy, provisioner(table=table), table=table)
    pod = make_pod(node_requirements=[requirement(GPU_COUNT, operator)])
    world.provision(pod)
    labels = world.scheduled(pod).labels
    if operator == "Exists":
        assert GPU_COUNT in labels
        assert labels[INSTANCE_TYPE] == "fake-it-4"
    else:
        assert GPU_COUNT not in labels


# --- Binpacking -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("go_case", "pod_options", "instance_type"),
    [
        ("should schedule a small pod on the smallest instance", {"memory": "100M"}, "small-instance-type"),
        (
            "should schedule a small pod on the smallest possible instance type",
            {"memory": "2000M"},
            "small-instance-type",
        ),
        (  # the overhead the RuntimeClass admission plugin writes into the pod
            "should take pod runtime class into consideration",
            {"cpu": "1", "overhead": {"cpu": "2"}},
            "default-instance-type",
        ),
        (
            "should take into account initContainer resource requests when binpacking",
            {"cpu": "1", "memory": "1Gi", "init_requests": {"cpu": "2", "memory": "1Gi"}},
            "default-instance-type",
        ),
    ],
)
def test_binpacking_one_pod_instance_type(
    strategy: str, go_case: str, pod_options: dict[str, Any], instance_type: str
) -> None:
    """Binpacking / one pod, the instance type of its node"""
    assert labels_of(strategy, make_pod(**pod_options), provisioner())[INSTANCE_TYPE] == instance_type


@pytest.mark.parametrize(
    ("go_case", "pod_options"),
    [
        ("should not schedule pods that exceed every instance type's capacity", {"memory": "2Ti"}),
        (
            "should not schedule pods when initContainer resource requests are greater than available instance types",
            {"cpu": "1", "memory": "1Gi", "init_requests": {"cpu": "2", "memory": "1Ti"}},
        ),
    ],
)
def test_binpacking_too_large(strategy: str, go_case: str, pod_options: dict[str, Any]) -> None:
    """Binpacking / pods no instance type holds"""
    not_scheduled(strategy, make_pod(**pod_options))


def test_should_handle_zero_quantity_resource_requests(strategy: str) -> None:
    """Binpacking / should handle zero-quantity resource requests"""
    pod = make_pod(requests={"foo.com/weird-resources": "0"}, limits={"foo.com/weird-resources": "0"})
    labels_of(strategy, pod, provisioner())


@KARPENTER_ONLY
@pytest.mark.parametrize(
    ("go_case", "groups", "instance_type", "nodes"),
    [
        (
            "should schedule multiple small pods on the smallest possible instance type",
            [(5, {"memory": "10M"})],
            "small-instance-type",
            1,
        ),
        (
            "should create new nodes when a node is at capacity",
            [(40, {"memory": "1.8G", "node_selector": {ARCH: "amd64"}})],
            "default-instance-type",
            20,
        ),
        (
            "should pack small and large pods together",
            [
                (40, {"memory": "1.8G", "node_selector": {ARCH: "amd64"}}),
                (20, {"memory": "400M", "node_selector": {ARCH: "amd64"}}),
            ],
            "default-instance-type",
            20,
        ),
        (
            "should create new newNodes when a node is at capacity due to pod limits per node",
            [(25, {"memory": "1m", "cpu": "1m", "node_selector": {ARCH: "amd64"}})],
            "small-instance-type",
            5,
        ),
    ],
)
def test_binpacking_batches(
    strategy: str, go_case: str, groups: list[tuple[int, dict[str, Any]]], instance_type: str, nodes: int
) -> None:
    """Binpacking / a batch: every pod on the expected instance type, and the node count (Karpenter's packing)"""
    world = cluster(strategy)
    pods = [pod for count, options in groups for pod in make_pods(count, **options)]
    world.provision(*pods)
    assert {world.scheduled(p).labels[INSTANCE_TYPE] for p in pods} == {instance_type}
    assert len({world.scheduled(p).name for p in pods}) == nodes


def test_should_pack_new_nodes_tightly(strategy: str) -> None:
    """Binpacking / should pack newNodes tightly: the small pod gets a smaller node than the large one"""
    table = InstanceTable(benchmark_types(5))
    world = cluster(strategy, provisioner(table=table), table=table)
    pods = [make_pod(cpu="4.5"), make_pod(cpu="1")]
    world.provision(*pods)
    nodes = [world.scheduled(p) for p in pods]
    assert nodes[0].labels[INSTANCE_TYPE] != nodes[1].labels[INSTANCE_TYPE]


def priced_type(name: str, cpu: int, memory_gib: int, *offerings: tuple[str, str, float]) -> InstanceType:
    """A fake type with the given offerings (zone, capacity type, price)."""
    fake_type(name)  # registers its pod capacity (5) with the fake shape
    return InstanceType(
        name, cpu, memory_gib * 1024, ("amd64",), offerings=tuple(Offering(z, c, p) for z, c, p in offerings)
    )


def test_should_select_for_valid_instance_types_regardless_of_price(strategy: str) -> None:
    """Binpacking / should select for valid instance types, regardless of price: the cheapest (the largest) is
    launched; Karpenter passes all three valid types on (the cost strategy caps a claim at the price of the type it
    chose, so there only the launch is asserted)"""
    table = InstanceTable(
        [
            priced_type("medium", 2, 2, ("test-zone-1a", "on-demand", 3.0)),
            priced_type("small", 1, 1, ("test-zone-1a", "on-demand", 2.0)),
            priced_type("large", 4, 4, ("test-zone-1a", "on-demand", 1.0)),
        ]
    )
    world = cluster(strategy, provisioner(table=table), table=table)
    pod = make_pod(limits={"cpu": "1m", "memory": "1Mi"})
    world.provision(pod)
    assert world.scheduled(pod).labels[INSTANCE_TYPE] == "large"
    if strategy == KARPENTER:
        claim, _ = world.launched[0]
        assert {o.instance_type for o in claim.options} == {"small", "medium", "large"}


# --- In-Flight Nodes --------------------------------------------------------------------------------------------------


def test_should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod(strategy: str) -> None:
    """In-Flight Nodes / should not launch a second node if there is an in-flight node that can support the pod"""
    world = cluster(strategy)
    first, second = make_pod(limits={"cpu": "10m"}), make_pod(limits={"cpu": "10m"})
    world.provision(first)
    world.provision(second)
    assert world.scheduled(first) is world.scheduled(second)


def test_should_not_launch_a_second_node_if_an_in_flight_node_can_support_the_pod_node_selectors(strategy: str) -> None:
    """In-Flight Nodes / should not launch a second node if there is an in-flight node that can support the pod (node
    selectors)"""
    world = cluster(strategy)
    first = make_pod(limits={"cpu": "10m"}, node_requirements=[zones(Z2)])
    world.provision(first)
    second = make_pod(limits={"cpu": "10m"}, node_requirements=[zones(Z1, Z2)])
    world.provision(second)
    assert world.scheduled(second) is world.scheduled(first)
    third = make_pod(limits={"cpu": "10m"}, node_requirements=[zones(Z1, Z3)])
    world.provision(third)
    assert world.scheduled(third) is not world.scheduled(first)


@pytest.mark.parametrize(
    ("go_case", "first", "second"),
    [
        (
            "should launch a second node if a pod won't fit on the existingNodes node",
            {"limits": {"cpu": "1001m"}},
            {"limits": {"cpu": "1"}},
        ),
        (
            "should launch a second node if a pod isn't compatible with the existingNodes node (node selector)",
            {"limits": {"cpu": "10m"}},
            {"node_selector": {ARCH: "arm64"}},
        ),
    ],
)
def test_should_launch_a_second_node(
    strategy: str, go_case: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    """In-Flight Nodes / should launch a second node if a pod won't fit on / isn't compatible with the in-flight node"""
    world = cluster(strategy)
    pods = [make_pod(**first), make_pod(**second)]
    world.provision(pods[0])
    world.provision(pods[1])
    assert world.scheduled(pods[0]) is not world.scheduled(pods[1])


@pytest.mark.parametrize("taint", [None, Taint("foo.com/taint", NO_SCHEDULE, "tainted")], ids=["no taints", "tainted"])
def test_in_flight_taints(strategy: str, taint: Taint | None) -> None:
    """In-Flight Nodes / Taints / should assume pod will schedule to a tainted node with no taints; and "should not
    assume pod will schedule to a tainted node" (the node initialized, its pod deleted, a taint added)"""
    world = cluster(strategy)
    first = make_pod(limits={"cpu": "8"})
    world.provision(first)
    node = world.scheduled(first)
    world.delete(first)
    node.initialized = taint is not None
    node.taints = (taint,) if taint else ()
    second = make_pod()
    world.provision(second)
    assert (world.scheduled(second) is node) == (taint is None)


def test_should_pack_in_flight_nodes_before_launching_new_nodes(strategy: str) -> None:
    """In-Flight Nodes / should pack in-flight newNodes before launching new newNodes: ten batches of 0-9 one-cpu
    pods; at most one node is left with a cpu free. (Go's only type has 4.25 cpu and 4 pods; ours has 5 cpu, whole
    vcpus only, and 4 pods: 4 pods fill it either way.)"""
    table = InstanceTable([fake_type("medium", cpu=5, memory_gib=4, pods=4)])
    world = cluster(strategy, provisioner(table=table), table=table)
    draw = random.Random(7)
    for _ in range(10):
        pods = make_pods(draw.randrange(10), limits={"cpu": "1"})
        world.provision(*pods)
        for pod in pods:
            world.scheduled(pod)
    free = [n for n in world.nodes if n.allocatable[0] - sum(p.requests[0] for p in n.pods) >= 1000]
    assert len(free) <= 1


@pytest.mark.parametrize(
    "go_case",
    [
        "In-Flight Nodes / should order initialized nodes for scheduling un-initialized nodes when all other nodes are"
        " inflight",
        "Existing Nodes / should order initialized nodes for scheduling un-initialized nodes",
    ],
)
def test_should_order_initialized_nodes_before_uninitialized_nodes(strategy: str, go_case: str) -> None:
    """In-Flight Nodes and Existing Nodes / should order initialized nodes for scheduling un-initialized nodes: of 100
    nodes of the provisioner, the pod goes to the one initialized."""
    world = cluster(strategy)
    chosen = random.Random(go_case).randrange(100)
    nodes = [
        world.add_node(
            {wk.PROVISIONER_NAME: "default", INSTANCE_TYPE: "default-instance-type"},
            allocatable={"cpu": "3900m", "memory": "4086Mi", "pods": "5"},
            template="default",
            initialized=i == chosen,
        )
        for i in range(100)
    ]
    pod = make_pod()
    world.provision(pod)
    assert world.scheduled(pod) is nodes[chosen]


# --- Existing Nodes ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 100], ids=["a pod", "multiple pods"])
def test_should_schedule_pods_to_an_existing_node_unowned_by_karpenter(strategy: str, count: int) -> None:
    """Existing Nodes / should schedule a pod to an existing node unowned by Karpenter; and "should schedule multiple
    pods to an existing node unowned by Karpenter" """
    world = cluster(strategy)
    node = world.add_node(allocatable={"cpu": "10", "memory": "100Gi" if count > 1 else "10Gi", "pods": "110"})
    pods = make_pods(count, cpu="10m", limits={"cpu": "10m"})
    world.provision(*pods)
    for pod in pods:
        assert world.scheduled(pod) is node


def test_should_consider_a_pod_incompatible_with_an_existing_node_but_compatible_with_provisioner(
    strategy: str,
) -> None:
    """Existing Nodes / should consider a pod incompatible with an existing node but compatible with Provisioner"""
    world = cluster(strategy)
    world.templates = []
    world.add_node(allocatable={"cpu": "10", "memory": "10Gi", "pods": "110"})
    pod = make_pod(node_requirements=[zones(Z1)])
    world.provision(pod)
    world.not_scheduled(pod)
    world.templates = [provisioner()]
    world.provision(pod)
    world.scheduled(pod)


def test_should_not_subtract_daemonset_overhead_that_is_not_strictly_compatible_with_an_existing_node(
    strategy: str,
) -> None:
    """Existing Nodes / Daemonsets / should not subtract daemonset overhead that is not strictly compatible with an
    existing node: the node takes the pod; a new node of the provisioner would carry the (huge) DaemonSet, so the
    second pod stays pending. (Which DaemonSet pods are still to come on an existing node is the caller's count:
    none here, as for Karpenter.)"""
    daemon = make_pod(cpu="100", memory="100Gi", node_requirements=[zones(Z1)])
    world = cluster(strategy, daemons=[daemon])
    node = world.add_node(allocatable={"cpu": "1", "memory": "1Gi", "pods": "110"})
    first = make_pod(cpu="1", memory="1Gi")
    world.provision(first)
    assert world.scheduled(first) is node
    second = make_pod(cpu="1", memory="1Gi")
    world.provision(second)
    world.not_scheduled(second)


# --- No Pre-Binding ---------------------------------------------------------------------------------------------------


def test_should_not_bind_pods_to_new_nodes(strategy: str) -> None:
    """No Pre-Binding / should not bind pods to newNodes: the pending pods of both rounds share the node in flight"""
    world = cluster(strategy)
    first = make_pod(limits={"cpu": "10m"})
    world.provision(first, bind=False)
    world.not_scheduled(first)
    assert len(world.nodes) == 1
    second = make_pod(limits={"cpu": "10m"})
    world.provision(second, bind=False)
    world.not_scheduled(second)
    assert len(world.nodes) == 1


def test_should_respect_self_pod_affinity_without_pod_binding_zone(strategy: str) -> None:
    """No Pre-Binding / should respect self pod affinity without pod binding (zone): the first pod of a self-affine
    group takes the zone of the node in flight rather than any zone"""
    world = cluster(strategy)
    affinity = {"security": "s2"}
    pods = make_pods(2, labels=affinity, pod_requirements=[term(ZONE, affinity)])
    world.provision(pods[0], bind=False)
    world.provision(pods[1], bind=False)
    assert len(world.nodes) == 1


# --- Provisioning (pkg/controllers/provisioning/provisioner_test.go) ------------------------------------------------


def test_should_provision_nodes(strategy: str) -> None:
    """Provisioning / should provision nodes"""
    world = cluster(strategy, template_with())
    pod = make_pod()
    world.provision(pod)
    world.scheduled(pod)
    assert len(world.nodes) == 1


def test_should_continue_with_provisioning_when_a_provisioner_doesnt_have_resolved_instance_types(
    strategy: str,
) -> None:
    """Provisioning / should continue with provisioning when at least a provisioner doesn't have resolved instance
    types"""
    world = cluster(strategy, template_with("unresolved", admitted=[]), template_with("resolved"))
    pod = make_pod()
    world.provision(pod)
    assert world.scheduled(pod).template == "resolved"
    assert len(world.nodes) == 1


def test_should_provision_nodes_for_pods_with_supported_node_selectors(strategy: str) -> None:
    """Provisioning / should provision nodes for pods with supported node selectors"""
    world = cluster(strategy, template_with())
    schedulable = [
        make_pod(node_selector={wk.PROVISIONER_NAME: "default"}),
        make_pod(node_selector={ZONE: Z1}),
        make_pod(node_selector={INSTANCE_TYPE: "default-instance-type"}),
        make_pod(node_selector={ARCH: "arm64"}),
        make_pod(node_selector={wk.OS: "linux"}),
    ]
    unschedulable = [
        make_pod(node_selector={wk.PROVISIONER_NAME: "unknown"}),
        make_pod(node_selector={ZONE: "unknown"}),
        make_pod(node_selector={INSTANCE_TYPE: "unknown"}),
        make_pod(node_selector={ARCH: "unknown"}),
        make_pod(node_selector={wk.OS: "unknown"}),
        make_pod(node_selector={CAPACITY_TYPE: "unknown"}),
        make_pod(node_selector={"foo": "bar"}),
    ]
    world.provision(*schedulable)
    for pod in schedulable:
        world.scheduled(pod)
    world.provision(*unschedulable)
    for pod in unschedulable:
        world.not_scheduled(pod)


def test_should_provision_nodes_for_accelerators(strategy: str) -> None:
    """Provisioning / should provision nodes for accelerators"""
    world = cluster(strategy, template_with())
    pods = [make_pod(limits={"nvidia.com/gpu": "1"}), make_pod(limits={"amd.com/gpu": "1"})]
    world.provision(*pods)
    for pod in pods:
        world.scheduled(pod)


def test_should_provision_multiple_nodes_when_max_pods_is_set(strategy: str) -> None:
    """Provisioning / should provision multiple nodes when maxPods is set (the fake provider ignores the kubelet;
    the single-pod type is what limits)"""
    single = requirement(INSTANCE_TYPE, "In", "single-pod-instance-type")
    world = cluster(strategy, template(FAKE_TABLE, name="default", requirements=provisioner_requirements(single)))
    pods = make_pods(3)
    world.provision(*pods)
    for pod in pods:
        world.scheduled(pod)
    assert len(world.nodes) == 3


# Resource Limits


def test_should_not_schedule_when_limits_are_exceeded(strategy: str) -> None:
    """Provisioning / Resource Limits / should not schedule when limits are exceeded (Go sets the provisioner's
    status to 100 cpu in use; here a full node of it with 100 cpu does)"""
    world = cluster(strategy, template_with(limits={"cpu": Decimal(20)}))
    world.add_node(allocatable={}, capacity={"cpu": "100"}, template="default")
    pod = make_pod()
    world.provision(pod)
    world.not_scheduled(pod)


@pytest.mark.parametrize(
    ("go_case", "limits", "cpu", "schedules"),
    [
        ("should schedule if limits would be met", {"cpu": Decimal(2)}, "1.75", True),
        ("should not schedule if limits would be exceeded", {"cpu": Decimal(2)}, "2.1", False),
    ],
)
def test_resource_limits_one_pod(
    strategy: str, go_case: str, limits: dict[str, Decimal], cpu: str, schedules: bool
) -> None:
    """Provisioning / Resource Limits / should schedule if limits would be met; should not schedule if limits would
    be exceeded"""
    world = cluster(strategy, template_with(limits=limits))
    pod = make_pod(cpu=cpu)
    world.provision(pod)
    assert (pod.key in world.node_of) == schedules


def test_should_partially_schedule_if_limits_would_be_exceeded(strategy: str) -> None:
    """Provisioning / Resource Limits / should partially schedule if limits would be exceeded"""
    world = cluster(strategy, template_with(limits={"cpu": Decimal(3)}))
    labels = {"app": "foo"}
    pods = make_pods(2, cpu="1.5", labels=labels, pod_anti_requirements=[term(HOSTNAME, labels)])
    world.provision(*pods)
    assert sum(p.key in world.node_of for p in pods) == 1


def test_should_not_schedule_if_limits_would_be_exceeded_gpu(strategy: str) -> None:
    """Provisioning / Resource Limits / should not schedule if limits would be exceeded (GPU): the GPU type has more
    pods than the limit of 1"""
    not_scheduled(
        strategy, make_pod(limits={"nvidia.com/gpu": "1"}), templates=[template_with(limits={"pods": Decimal(1)})]
    )


def test_should_not_schedule_to_a_provisioner_after_a_scheduling_round_if_limits_would_be_exceeded(
    strategy: str,
) -> None:
    """Provisioning / Resource Limits / should not schedule to a provisioner after a scheduling round if limits would
    be exceeded"""
    world = cluster(strategy, template_with(limits={"cpu": Decimal(2)}))
    first = make_pod(cpu="1.75")
    world.provision(first)
    world.scheduled(first)
    second = make_pod(cpu="1.75")
    world.provision(second)
    world.not_scheduled(second)


# Daemonsets and Node Overhead

DS = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("go_case", "provisioner_options", "daemon_options", "pod_options", "capacity"),
    [
        ("should account for overhead", {}, {"requests": DS}, {"requests": DS}, ("4", "4Gi")),
        (
            "should account for overhead (with startup taint)",
            {"startup_taints": [Taint("foo.com/taint", NO_SCHEDULE)]},
            {"requests": DS},
            {"requests": DS},
            ("4", "4Gi"),
        ),
        (
            "should not schedule if overhead is too large",
            {},
            {"requests": {"cpu": "10000", "memory": "10000Gi"}},
            {},
            None,
        ),
        (
            "should not schedule if resource requests are not defined and limits (requests) are too large",
            {},
            {"requests": {"cpu": "1"}, "limits": {"cpu": "10000", "memory": "10000Gi"}},
            {},
            None,
        ),
        (
            "should schedule based on the max resource requests of containers and initContainers",
            {},
            {
                "requests": {"cpu": "2"},
                "limits": {"cpu": "2", "memory": "1Gi"},
                "init_resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "10000", "memory": "2Gi"}},
            },
            {},
            ("4", "4Gi"),
        ),
        (
            "should not schedule if combined max resources are too large for any node",
            {},
            {
                "requests": {"cpu": "1"},
                "limits": {"cpu": "10000", "memory": "1Gi"},
                "init_resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "10000", "memory": "10000Gi"}},
            },
            {},
            None,
        ),
        (
            "should not schedule if initContainer resources are too large",
            {},
            {"init_resources": {"requests": {"cpu": "10000", "memory": "10000Gi"}}},
            {},
            None,
        ),
        ("should be able to schedule pods if resource requests and limits are not defined", {}, {}, {}, ("2", "2Gi")),
        (
            "should ignore daemonsets without matching tolerations",
            {"taints": [Taint("foo", NO_SCHEDULE, "bar")]},
            {"requests": DS},
            {"requests": DS, "tolerations": [{"operator": "Exists"}]},
            ("2", "2Gi"),
        ),
        (
            "should ignore daemonsets with an invalid selector",
            {},
            {"requests": DS, "node_selector": {"node": "invalid"}},
            {"requests": DS},
            ("2", "2Gi"),
        ),
        (
            "should account daemonsets with NotIn operator and unspecified key",
            {},
            {"requests": DS, "node_requirements": [requirement("foo", "NotIn", "bar")]},
            {"requests": DS, "node_requirements": [zones(Z2)]},
            ("4", "4Gi"),
        ),
    ],
)
def test_daemonsets_and_node_overhead(
    strategy: str,
    go_case: str,
    provisioner_options: dict[str, Any],
    daemon_options: dict[str, Any],
    pod_options: dict[str, Any],
    capacity: tuple[str, str] | None,
) -> None:
    """Provisioning / Daemonsets and Node Overhead / ...: the capacity of the node the pod gets (None: no node)"""
    world = cluster(strategy, template_with(**provisioner_options), daemons=[make_pod(**daemon_options)])
    pod = make_pod(**pod_options)
    world.provision(pod)
    if capacity is None:
        world.not_scheduled(pod)
        return
    node = world.scheduled(pod)
    cpu, memory = capacity
    assert (node.capacity[0], node.capacity[1]) == (int(cpu) * 1000, int(memory.removesuffix("Gi")) * GI)


def test_should_account_for_daemonset_spec_affinity(strategy: str) -> None:
    """Provisioning / Daemonsets and Node Overhead / should account for daemonset spec affinity: a 4-cpu DaemonSet
    that only runs on foo=bar nodes does not count against the foo=voo provisioner (limited to 2 cpu)"""
    voo = template_with("voo", labels={"foo": "voo"}, limits={"cpu": Decimal(2)})
    bar = template_with("bar", labels={"foo": "bar"})
    daemon = make_pod(cpu="4", memory="4Gi", node_requirements=[requirement("foo", "In", "bar")])
    world = cluster(strategy, voo, bar, daemons=[daemon])
    pod = make_pod(cpu="1", memory="1Gi", node_selector={"foo": "voo"})
    world.provision(pod)
    assert world.scheduled(pod).template == "voo"


# Taints


def test_should_schedule_pods_that_tolerate_taints(strategy: str) -> None:
    """Provisioning / Taints / should schedule pods that tolerate taints"""
    world = cluster(strategy, template_with(taints=[Taint("nvidia.com/gpu", NO_SCHEDULE, "true")]))
    pods = [
        make_pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": NO_SCHEDULE}]),
        make_pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": NO_SCHEDULE}]),
        make_pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
        make_pod(tolerations=[{"operator": "Exists"}]),
    ]
    world.provision(*pods)
    for pod in pods:
        world.scheduled(pod)


# Multiple Provisioners


def test_should_schedule_to_an_explicitly_selected_provisioner(strategy: str) -> None:
    """Multiple Provisioners / should schedule to an explicitly selected provisioner"""
    pod = make_pod(node_selector={wk.PROVISIONER_NAME: "chosen"})
    labels = labels_of(strategy, pod, template_with("chosen"), template_with("other"))
    assert labels[wk.PROVISIONER_NAME] == "chosen"


def test_should_schedule_to_a_provisioner_by_labels(strategy: str) -> None:
    """Multiple Provisioners / should schedule to a provisioner by labels"""
    pod = make_pod(node_selector={"foo": "bar"})
    labels = labels_of(strategy, pod, template_with("labelled", labels={"foo": "bar"}), template_with("other"))
    assert labels[wk.PROVISIONER_NAME] == "labelled"


def test_should_not_match_provisioner_with_prefer_no_schedule_taint_when_other_provisioner_match(strategy: str) -> None:
    """Multiple Provisioners / should not match provisioner with PreferNoSchedule taint when other provisioner match"""
    tainted = template_with("a-tainted", taints=[Taint("foo", PREFER_NO_SCHEDULE, "bar")])
    labels = labels_of(strategy, make_pod(), tainted, template_with("b-plain"))
    assert labels[wk.PROVISIONER_NAME] == "b-plain"


def test_weighted_provisioners_should_schedule_to_the_provisioner_with_the_highest_priority_always(
    strategy: str,
) -> None:
    """Multiple Provisioners / Weighted Provisioners / should schedule to the provisioner with the highest priority
    always"""
    world = cluster(strategy, template_with("a"), template_with("b", weight=20), template_with("c", weight=100))
    pods = make_pods(3)
    world.provision(*pods)
    for pod in pods:
        assert world.scheduled(pod).template == "c"


def test_weighted_provisioners_should_schedule_to_explicitly_selected_provisioner(strategy: str) -> None:
    """Multiple Provisioners / Weighted Provisioners / should schedule to explicitly selected provisioner even if
    other provisioners are higher priority"""
    pod = make_pod(node_selector={wk.PROVISIONER_NAME: "a"})
    world = cluster(strategy, template_with("a"), template_with("b", weight=20), template_with("c", weight=100))
    world.provision(pod)
    assert world.scheduled(pod).template == "a"


# --- Instance Type Selection (provisioner_instance_selection_test.go) ---------------------------------------------

ASSORTED = InstanceTable(assorted_types())
MIN_PRICE = min(o.price for it in ASSORTED.types for o in it.offerings)
SELECTION_DEFAULT = (requirement(CAPACITY_TYPE, "In", "spot", "on-demand"), BOTH_ARCHES)

#: (Go case, provisioner requirements (None: the suite's), pod requirements, labels every option must have,
#: the (capacity type, zone) offering every option must have).
SELECTION: list[tuple[str, list[dict[str, Any]] | None, list[dict[str, Any]], dict[str, str], tuple[str, str] | None]]
SELECTION = [
    ("should schedule on one of the cheapest instances", None, [], {}, None),
    ("(pod arch = amd64)", None, [requirement(ARCH, "In", "amd64")], {ARCH: "amd64"}, None),
    ("(pod arch = arm64)", None, [requirement(ARCH, "In", "arm64")], {ARCH: "arm64"}, None),
    ("(prov arch = amd64)", [requirement(ARCH, "In", "amd64")], [], {ARCH: "amd64"}, None),
    ("(prov arch = arm64)", [requirement(ARCH, "In", "arm64")], [], {ARCH: "arm64"}, None),
    ("(pod os = linux)", None, [requirement(wk.OS, "In", "linux")], {wk.OS: "linux"}, None),
    ("(prov zone = test-zone-2)", [zones(Z2)], [], {ZONE: Z2}, None),
    ("(pod zone = test-zone-2)", None, [zones(Z2)], {ZONE: Z2}, None),
    ("(prov ct = spot)", [requirement(CAPACITY_TYPE, "In", "spot")], [], {CAPACITY_TYPE: "spot"}, None),
    ("(pod ct = spot)", None, [requirement(CAPACITY_TYPE, "In", "spot")], {CAPACITY_TYPE: "spot"}, None),
    (
        "(prov ct = ondemand, prov zone = test-zone-1)",
        [requirement(CAPACITY_TYPE, "In", "on-demand"), zones(Z1)],
        [],
        {},
        ("on-demand", Z1),
    ),
    (
        "(pod ct = spot, pod zone = test-zone-1)",
        None,
        [requirement(CAPACITY_TYPE, "In", "spot"), zones(Z1)],
        {},
        ("spot", Z1),
    ),
    (
        "(prov ct = spot, pod zone = test-zone-2)",
        [requirement(CAPACITY_TYPE, "In", "spot")],
        [zones(Z2)],
        {},
        ("spot", Z2),
    ),
    (
        "(prov = spot/test-zone-2, pod = amd64/linux)",
        [requirement(ARCH, "In", "amd64"), requirement(wk.OS, "In", "linux")],
        [requirement(CAPACITY_TYPE, "In", "spot"), zones(Z2)],
        {wk.OS: "linux", ARCH: "amd64"},
        ("spot", Z2),
    ),
    (
        "(pod ct = spot/test-zone-2/amd64/linux)",
        None,
        [
            requirement(ARCH, "In", "amd64"),
            requirement(wk.OS, "In", "linux"),
            requirement(CAPACITY_TYPE, "In", "spot"),
            zones(Z2),
        ],
        {wk.OS: "linux", ARCH: "amd64"},
        ("spot", Z2),
    ),
]


@pytest.mark.parametrize(
    ("go_case", "terms", "pod_terms", "labels", "offering"), SELECTION, ids=[c[0] for c in SELECTION]
)
def test_instance_selection_cheapest(
    strategy: str,
    go_case: str,
    terms: list[dict[str, Any]] | None,
    pod_terms: list[dict[str, Any]],
    labels: dict[str, str],
    offering: tuple[str, str] | None,
) -> None:
    """Instance Type Selection / should schedule on one of the cheapest instances ...: the launch is at the cheapest
    price of all types, and every type the claim may launch satisfies the requirements and has the offering"""
    chosen = provisioner("default", *(terms or SELECTION_DEFAULT), table=ASSORTED)
    world = cluster(strategy, chosen, table=ASSORTED)
    pod = make_pod(node_requirements=pod_terms or None)
    world.provision(pod)
    world.scheduled(pod)
    claim, _ = world.launched[0]
    assert claim.price == MIN_PRICE
    for option in claim.options:
        it = ASSORTED.types[ASSORTED.position[option.instance_type]]
        type_labels = it.labels()
        offered = {(o.capacity_type, o.zone) for o in it.offerings}
        for key, value in labels.items():
            if key == ZONE:
                assert value in {z for _, z in offered}
            elif key == CAPACITY_TYPE:
                assert value in {c for c, _ in offered}
            else:
                assert type_labels[key] == value
        if offering is not None:
            assert offering in offered


def without_arm(zone: str | None = None) -> InstanceTable:
    """The assorted types without arm64 (in `zone` only, when given)."""
    return InstanceTable(
        it
        for it in assorted_types()
        if "arm64" not in it.architectures or (zone is not None and zone not in it.zones())
    )


@pytest.mark.parametrize(
    ("go_case", "table", "terms", "pod_terms"),
    [
        ("(pod arch = arm)", without_arm(), SELECTION_DEFAULT, [requirement(ARCH, "In", "arm64")]),
        (
            "(pod arch = arm zone=test-zone-2)",
            without_arm(Z2),
            SELECTION_DEFAULT,
            [requirement(ARCH, "In", "arm64"), zones(Z2)],
        ),
        ("(prov arch = arm / pod zone=test-zone-2)", without_arm(Z2), (requirement(ARCH, "In", "arm64"),), [zones(Z2)]),
    ],
)
def test_instance_selection_should_not_schedule_if_no_instance_type_matches_selector(
    strategy: str, go_case: str, table: InstanceTable, terms: Sequence[dict[str, Any]], pod_terms: list[dict[str, Any]]
) -> None:
    """Instance Type Selection / should not schedule if no instance type matches selector ...: no claim either"""
    world = cluster(strategy, provisioner("default", *terms, table=table), table=table)
    pod = make_pod(node_requirements=pod_terms)
    world.provision(pod)
    world.not_scheduled(pod)
    assert world.launched == []


@KARPENTER_ONLY
def test_instance_selection_should_schedule_on_an_instance_with_enough_resources(strategy: str) -> None:
    """Instance Type Selection / should schedule on an instance with enough resources: three pods of each size on one
    node (Karpenter's packing), every type of the claim holding the three plus its reserved cpu and memory"""
    for cpu in ("0.1", "1.0", "2", "2.5", "4", "8", "16"):
        for memory in ("0.1", "1.0", "2", "4", "8", "16", "32"):
            world = cluster(strategy, provisioner("default", *SELECTION_DEFAULT, table=ASSORTED), table=ASSORTED)
            pods = make_pods(3, cpu=cpu, memory=f"{memory}Gi")
            world.provision(*pods)
            assert len({world.scheduled(p).name for p in pods}) == 1
            claim, _ = world.launched[0]
            needed = [sum(p.requests[r] for p in pods) for r in (0, 1)]
            for option in claim.options:
                it = ASSORTED.types[ASSORTED.position[option.instance_type]]
                assert needed[0] + 100 < it.vcpu * 1000
                assert needed[1] + 10 * 2**20 < it.memory_mib * 2**20


def test_instance_selection_should_schedule_on_cheaper_on_demand_instance(strategy: str) -> None:
    """Instance Type Selection / should schedule on cheaper on-demand instance even when spot price ordering would
    place other instance types first"""
    table = InstanceTable(
        [
            priced_type("test-instance1", 1, 1, ("test-zone-1a", "on-demand", 1.0), ("test-zone-1a", "spot", 0.2)),
            priced_type("test-instance2", 1, 1, ("test-zone-1a", "on-demand", 1.3), ("test-zone-1a", "spot", 0.1)),
        ]
    )
    chosen = provisioner("default", requirement(CAPACITY_TYPE, "In", "on-demand"), table=table)
    world = cluster(strategy, chosen, table=table)
    pod = make_pod()
    world.provision(pod)
    assert world.scheduled(pod).labels[INSTANCE_TYPE] == "test-instance1"
