"""Which pods Karpenter ignores, per API version (`scheduling/refusal.py`): v0.31.1's `Provisioner.Validate` for a
Provisioner, v1.14.1's for a NodePool (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/provisioner.go:
`validateKarpenterManagedLabelCanExist` :574, `validateNodeSelector` :606, `validateAffinity` :624,
`validateNodeSelectorTerm` :638). The v1.14.1 scheduling suite's "Constraints Validation" cases
(pkg/controllers/provisioning/scheduling/suite_test.go:426/:882 and :442/:893) are ported as data beside the cases
that tell the versions apart; a scheduler with both kinds places a pod refused by one kind on the other's pools."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import Scheduler
from karpenter_policy.scheduling.refusal import provisioning_refusal, provisioning_refusal_v1

from .cluster import cluster, make_pod, provisioner, requirement, spec
from .test_karpenter_v1_topology import nodepool

SUITE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"
PROVISIONER_GO = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/provisioner.go"
HOSTNAME_IN = requirement(wk.HOSTNAME, "In", "test")

#: (case, where it comes from, the pod spec, refused by v0.31.1, refused by v1.14.1)
CASES: list[tuple[str, str, dict[str, Any], bool, bool]] = [
    ("should not schedule pods that have node selectors with restricted labels", f"{SUITE}:426 (:882)",
     spec(node_requirements=[HOSTNAME_IN]), True, True),
    ("should not schedule pods that have node selectors with restricted domains", f"{SUITE}:442 (:893)",
     spec(node_requirements=[requirement("karpenter.sh/test", "In", "test")]), True, True),
    ("validateNodeSelector: a nodeSelector entry is an In requirement (v0.31 never read it)", f"{PROVISIONER_GO}:606",
     spec(node_selector={wk.HOSTNAME: "test"}), False, True),
    ("validateNodeSelector: a well-known label's unknown value", f"{PROVISIONER_GO}:606",
     spec(node_selector={wk.CAPACITY_TYPE: "ondemand"}), False, True),
    ("validateAffinity: required terms only (v0.31 validated preferred ones too)", f"{PROVISIONER_GO}:624",
     spec(node_preferences=[HOSTNAME_IN]), True, False),
    ("validateNodeSelectorTerm: matchFields in a required term", f"{PROVISIONER_GO}:638",
     {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}}}, True, True),
    ("validateNodeSelectorTerm: matchFields in a preferred term (not validated by v1)", f"{PROVISIONER_GO}:624",
     {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
         "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}}]}}}, True, False),
    ("validateKarpenterManagedLabelCanExist: nodepool DoesNotExist", f"{PROVISIONER_GO}:574",
     spec(node_requirements=[requirement(wk.NODEPOOL, "DoesNotExist")]), True, True),
    ("v1's well-known label (AWS provider labels.go): instance-cpu-manufacturer", f"{PROVISIONER_GO}:638",
     spec(node_requirements=[requirement(wk.INSTANCE_CPU_MANUFACTURER, "In", "amd")]), True, False),
    ("v1's restricted domains are karpenter.sh and karpenter.k8s.aws only: kubernetes.io/test",
     "kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go IsRestrictedLabel",
     spec(node_requirements=[requirement("kubernetes.io/test", "In", "x")]), True, False),
    ("a custom label is never refused", f"{PROVISIONER_GO}:638",
     spec(node_selector={"example.com/team": "a"}, node_requirements=[requirement("example.com/tier", "In", "b")]),
     False, False),
]  # fmt: skip


@pytest.mark.parametrize(("name", "source", "pod", "v031", "v1"), CASES, ids=[c[0][:60] for c in CASES])
def test_each_version_refuses_the_pods_its_validate_refuses(
    name: str, source: str, pod: dict[str, Any], v031: bool, v1: bool
) -> None:
    assert (provisioning_refusal(pod) is not None) == v031, f"{source}: {name} (v0.31.1)"
    assert (provisioning_refusal_v1(pod) is not None) == v1, f"{source}: {name} (v1.14.1)"


def test_v1_words_name_the_selector_and_the_restricted_label() -> None:
    refused = provisioning_refusal_v1(spec(node_selector={wk.HOSTNAME: "test"}))
    assert refused is not None
    assert refused.startswith(
        "nodeSelector kubernetes.io/hostname: using label kubernetes.io/hostname is not allowed as it might interfere "
        "with the internal provisioning logic"
    )


_KEYS = st.sampled_from([wk.HOSTNAME, "karpenter.sh/test", "kubernetes.io/test", wk.ZONE, wk.CAPACITY_TYPE,
                         wk.INSTANCE_CPU_MANUFACTURER, "example.com/team", "Bad Key"])
_VALUES = st.sampled_from(["a", "spot", "on-demand", "-bad-", ""])


@deterministic(200)
@given(base=_KEYS, other=_KEYS, value=_VALUES, operator=st.sampled_from(["In", "NotIn", "Exists", "Bogus"]))
def test_preferences_never_change_v1s_reading_and_selectors_never_change_v031s(
    base: str, other: str, value: str, operator: str
) -> None:
    """Whatever a preferred term or a nodeSelector says, v1.14.1 reads the pod as it reads it without the
    preference, and v0.31.1 as without the selector."""
    required = [requirement(base, "In", value)]
    plain = spec(node_requirements=required)
    preferring = spec(node_requirements=required, node_preferences=[requirement(other, operator, value)])
    selecting = spec(node_requirements=required, node_selector={other: value})
    assert provisioning_refusal_v1(preferring) == provisioning_refusal_v1(plain)
    assert provisioning_refusal(selecting) == provisioning_refusal(plain)


def test_with_both_kinds_a_pod_refused_by_one_lands_on_the_other(strategy: str) -> None:
    """A preferred hostname term: v0.31 ignores the pod, v1.14.1 provisions for it (the preference relaxed);
    the Provisioner refuses it in v0.31's words, the NodePool takes it."""
    world = cluster(strategy, provisioner("old", weight=100), nodepool("new"))
    pod = make_pod(node_preferences=[HOSTNAME_IN])
    world.provision(pod)
    assert world.scheduled(pod).template == "new"


def test_with_both_kinds_a_pod_both_refuse_is_left_out_with_both_reasons(strategy: str) -> None:
    templates = (provisioner("old"), nodepool("new"))
    pod = make_pod(node_requirements=[requirement(wk.NODEPOOL, "DoesNotExist")], node_selector={wk.HOSTNAME: "h"})
    failure = Scheduler(templates).solve([pod]).failures[pod.key]
    assert failure.reasons == {}
    assert failure.refused is not None
    assert "(Karpenter v0.31, Provisioners)" in failure.refused
    assert "nodeSelector kubernetes.io/hostname" in failure.refused
    world = cluster(strategy, *templates)
    world.provision(pod)
    world.not_scheduled(pod)


def test_a_template_refuses_a_pod_its_kind_ignores_with_that_kinds_words() -> None:
    pod = make_pod(node_selector={wk.HOSTNAME: "h"})  # v1.14.1 ignores it, v0.31 does not
    plan = Scheduler((provisioner("old"), nodepool("new"))).solve([pod])
    reason = plan.failures[pod.key].reasons["new"]
    assert reason.kind == "refused"
    assert "nodeSelector kubernetes.io/hostname: using label" in str(reason)


def test_a_pod_a_kind_ignores_never_joins_a_claim_of_that_kind(strategy: str) -> None:
    """A first pod opens a Provisioner's claim; a second, small enough to share it but ignored by v0.31 (a preferred
    hostname term), goes to the NodePool instead."""
    world = cluster(strategy, provisioner("old", weight=100), nodepool("new"))
    first = make_pod(cpu="100m")
    second = make_pod(cpu="100m", node_preferences=[HOSTNAME_IN])
    world.provision(first, second)
    assert world.scheduled(first).template == "old"
    assert world.scheduled(second).template == "new"


def test_a_pod_a_kind_ignores_never_joins_an_existing_node_of_that_kind(strategy: str) -> None:
    """A Provisioner's node runs with room to spare; a pod v0.31 ignores (a preferred hostname term) that would fit
    there goes to the NodePool: Karpenter v0.31 never schedules it anywhere, its existing nodes included."""
    world = cluster(strategy, provisioner("old", weight=100), nodepool("new"))
    first = make_pod(cpu="100m")
    world.provision(first)
    assert world.scheduled(first).template == "old"
    second = make_pod(cpu="100m", node_preferences=[HOSTNAME_IN])
    world.provision(second)
    assert world.scheduled(second).template == "new"
    assert len(world.nodes) == 2


def test_a_pod_v1_ignores_never_joins_a_nodepools_node_but_may_join_a_node_of_neither_kind(strategy: str) -> None:
    """A nodeSelector on `kubernetes.io/hostname` (v1.14.1's `validateNodeSelector` ignores the pod; v0.31 reads it
    as a requirement): pinned to a NodePool's running node it stays pending — no Provisioner's node is so named;
    pinned to a node no Karpenter launched, v0.31's reading places it there."""
    world = cluster(strategy, provisioner("old"), nodepool("new"))
    room = {"cpu": "4", "memory": "8Gi", "pods": "10"}
    ours = world.add_node({wk.HOSTNAME: "np-node", wk.NODEPOOL: "new"}, room, template="new", name="np-node")
    world.add_node({wk.HOSTNAME: "byo-node"}, room, name="byo-node")
    pinned = make_pod(cpu="100m", node_selector={wk.HOSTNAME: ours.name})
    elsewhere = make_pod(cpu="100m", node_selector={wk.HOSTNAME: "byo-node"})
    plan = world.provision(pinned, elsewhere)
    world.not_scheduled(pinned)
    assert plan.failures[pinned.key].reasons["new"].kind == "refused"
    assert world.scheduled(elsewhere).name == "byo-node"


_NODE_LABELS = {"kubernetes.io/test": "x", "karpenter.sh/test": "x"}
#: pod specs by the kinds whose Karpenter ignores them: none, v0.31 (a required `kubernetes.io/…` term, restricted
#: in v0.31 only), v1.14.1 (a `karpenter.sh/…` nodeSelector, validated by v1 only), both; every node carries both
#: labels, so a node's kind alone decides whether the pod may join it
_IGNORED_BY: dict[tuple[bool, bool], dict[str, Any]] = {
    (False, False): {},
    (True, False): {"node_requirements": [requirement("kubernetes.io/test", "In", "x")]},
    (False, True): {"node_selector": {"karpenter.sh/test": "x"}},
    (True, True): {"node_requirements": [requirement("kubernetes.io/test", "In", "x")],
                   "node_selector": {"karpenter.sh/test": "x"}},
}  # fmt: skip


@deterministic(100)
@given(
    kinds=st.lists(st.sampled_from([None, False, True]), min_size=1, max_size=6),
    pods=st.lists(st.sampled_from(sorted(_IGNORED_BY)), min_size=1, max_size=8),
    karpenter=st.booleans(),
)
def test_no_pod_joins_an_existing_node_of_a_kind_that_ignores_it(
    kinds: list[bool | None], pods: list[tuple[bool, bool]], karpenter: bool
) -> None:
    """Whatever the mix of nodes (a Provisioner's, a NodePool's, neither's) and of pods: a pod placed on an existing
    node is one that node's kind provisions for, and a pod no node's kind ignores takes an existing node (they all
    have room for every pod)."""
    owner = {None: {}, False: {wk.PROVISIONER_NAME: "old"}, True: {wk.NODEPOOL: "new"}}
    world = cluster("karpenter" if karpenter else "cost", provisioner("old"), nodepool("new"))
    room = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    for i, kind in enumerate(kinds):
        template = None if kind is None else ("new" if kind else "old")
        world.add_node({**_NODE_LABELS, **owner[kind]}, room, template=template, name=f"node-{i}")
    made = [(make_pod(cpu="100m", **_IGNORED_BY[ignored]), ignored) for ignored in pods]
    plan = world.provision(*(pod for pod, _ in made))
    kind_of = dict(zip((f"node-{i}" for i in range(len(kinds))), kinds, strict=True))
    for pod, (v031, v1) in made:
        node = next((name for name, placed in plan.existing.items() if pod.key in {p.key for p in placed}), None)
        open_kinds = {k for k in kinds if k is None or (k is False and not v031) or (k is True and not v1)}
        if node is None:
            assert not open_kinds or (v031 and v1), f"{pod.key} ({v031}, {v1}) left existing nodes {kinds} unused"
        else:
            assert kind_of[node] in open_kinds, f"{pod.key} ({v031}, {v1}) joined {node} of kind {kind_of[node]}"
