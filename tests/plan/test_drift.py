"""Drift as Karpenter v0.31.1 decides it, from the two revisions and the snapshot's node: the static hash fields
(`pkg/apis/v1alpha5/provisioner.go` `Hash`, `hash:"ignore"` fields excepted; `nodeclaim/disruption/drift.go`
`areStaticFieldsDrifted`: only on nodes carrying the hash annotation), the node template's (aws
`pkg/cloudprovider/drift.go`), requirement drift (`areRequirementsDrifted`), expiry and removed provisioners."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import yaml

from karpenter_policy.commands.plan.drift import (
    NodeDrift,
    PolicySide,
    node_drift,
    provisioner_changes,
    template_changes,
)
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import NODE_TEMPLATE, listing, node, provisioner

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)


def side(*documents: str) -> PolicySide:
    docs = [yaml.safe_load(d) for d in (*documents, NODE_TEMPLATE)]
    return PolicySide("x", {d["metadata"]["name"]: d for d in docs if d["kind"] == "Provisioner"},
                      {d["metadata"]["name"]: d for d in docs if d["kind"] == "AWSNodeTemplate"})


def drift_of(obj: dict[str, Any], base: PolicySide, head: PolicySide, **kwargs: Any) -> NodeDrift:
    fleet = fleet_of(read_snapshot(json.dumps(listing(obj)).encode(), "s.json"))
    return node_drift(next(iter(fleet.nodes.values())), base, head, START, **kwargs)


def test_a_changed_label_drifts_the_nodes_that_carry_the_hash_and_names_the_field() -> None:
    base, head = side(provisioner()), side(provisioner(labels="team: platform"))

    drifted = drift_of(node("n1"), base, head)
    unhashed = drift_of(node("n2", annotations={}), base, head)

    assert drifted.drifted and drifted.reasons == ("spec.labels.team changed (provisioner default)",)
    assert not unhashed.drifted and unhashed.reasons == ()  # as Karpenter: no annotation, no static drift


@pytest.mark.parametrize(
    ("base_extra", "head_extra", "said"),
    [
        ("", "  taints: [{key: dedicated, value: web, effect: NoSchedule}]\n", ["spec.taints added"]),
        ("  taints: [{key: a, effect: NoSchedule}, {key: b, effect: NoSchedule}]\n",
         "  taints: [{key: b, effect: NoSchedule}, {key: a, effect: NoSchedule}]\n", []),  # slices as sets
        ("  kubeletConfiguration: {maxPods: 110}\n", "  kubeletConfiguration: {maxPods: 58}\n",
         ["spec.kubeletConfiguration.maxPods changed"]),
        ("  annotations: {owner: a}\n", "", ["spec.annotations removed"]),
        ("", "  startupTaints: [{key: init, effect: NoSchedule}]\n", ["spec.startupTaints added"]),
        ("", "  labels: {}\n", []),  # an empty map hashes as none (IgnoreZeroValue)
        ("  ttlSecondsAfterEmpty: 30\n  weight: 5\n", "  ttlSecondsAfterEmpty: 60\n  weight: 50\n"
         "  limits: {resources: {cpu: 10}}\n  consolidation: {enabled: false}\n", []),  # hash:"ignore" fields
    ],
)
def test_which_provisioner_fields_are_hashed(base_extra: str, head_extra: str, said: list[str]) -> None:
    base = yaml.safe_load(provisioner(labels="x: y", extra=base_extra))
    head = yaml.safe_load(provisioner(labels="x: y", extra=head_extra))
    if head_extra.startswith("  labels"):
        head["spec"]["labels"] = {"x": "y"}

    assert provisioner_changes(base, head) == said


def test_node_template_fields_drift_but_not_its_selectors() -> None:
    old = yaml.safe_load(NODE_TEMPLATE)
    new = yaml.safe_load(NODE_TEMPLATE.replace("prod}", "staging}") + "  userData: echo hi\n  tags: {team: web}\n")

    assert template_changes(old, new) == ["spec.tags added", "spec.userData added"]


def test_node_template_drift_needs_its_hash_annotation() -> None:
    base = side(provisioner())
    template = NODE_TEMPLATE + "  userData: echo 2\n"
    head = PolicySide("h", base.provisioners, {"default": yaml.safe_load(template)})

    with_hash = drift_of(node("n1", annotations={"karpenter.k8s.aws/nodetemplate-hash": "1"}), base, head)
    without = drift_of(node("n2", annotations={}), base, head)

    assert with_hash.reasons == ("AWSNodeTemplate default: spec.userData added",)
    assert not without.drifted


def test_requirement_drift_names_the_label_no_longer_allowed() -> None:
    base = side(provisioner(zones="[us-east-1a, us-east-1b, us-east-1c]"))
    head = side(provisioner(zones="[us-east-1a, us-east-1b]"))

    moved = drift_of(node("n1", zone="us-east-1c", annotations={}), base, head)
    kept = drift_of(node("n2", zone="us-east-1a", annotations={}), base, head)

    assert moved.drifted and moved.reasons == (
        "requirement drift: topology.kubernetes.io/zone In [us-east-1a, us-east-1b] not in [us-east-1c] "
        "(provisioner default's spec.requirements)",)
    assert not kept.drifted


def test_a_custom_requirement_the_node_lacks_drifts_it_a_well_known_one_does_not() -> None:
    base = side(provisioner())
    head = side(provisioner(extra="").replace(
        "  providerRef", "    - {key: example.com/pool, operator: In, values: [a]}\n"
        "    - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: ['2', '4']}\n  providerRef"))

    drift = drift_of(node("n1", annotations={}), base, head)

    assert drift.reasons == ("requirement drift: label example.com/pool does not have known values (provisioner "
                             "default's spec.requirements)",)


def test_drift_disabled_keeps_only_expiry_and_removed_provisioners() -> None:
    base = side(provisioner(), provisioner("old"))
    head = side(provisioner(labels="team: platform", zones="[us-east-1b]",
                            extra="  ttlSecondsUntilExpired: 86400\n"))

    changed = drift_of(node("n1", created="2026-11-01T00:00:00Z"), base, head, drift_enabled=False)
    removed = drift_of(node("n2", provisioner="old"), base, head, drift_enabled=False)

    assert not changed.drifted and changed.expires
    assert changed.reasons == ("expired: created 2026-11-01T00:00:00Z + ttlSecondsUntilExpired 86400s",)
    assert removed.removed and removed.reasons == ("provisioner old removed",)


def test_expiry_is_heads_ttl_from_the_nodes_creation() -> None:
    base = side(provisioner())
    head = side(provisioner(extra="  ttlSecondsUntilExpired: 604800\n"))

    old = drift_of(node("n1", created="2026-11-22T08:59:59Z", annotations={}), base, head)
    young = drift_of(node("n2", created="2026-11-23T09:00:01Z", annotations={}), base, head)

    assert old.expires and not old.drifted
    assert not young.expires and young.expires_at == dt.datetime(2026, 11, 30, 9, 0, 1, tzinfo=dt.UTC)


def test_a_node_of_no_provisioner_or_of_one_in_neither_revision_is_left_alone() -> None:
    base = head = side(provisioner())

    assert not drift_of(node("n1", provisioner=None), base, head).disrupted
    other = drift_of(node("n2", provisioner="elsewhere"), base, head)
    assert other.unknown and not other.disrupted
