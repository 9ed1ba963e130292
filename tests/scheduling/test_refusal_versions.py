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
