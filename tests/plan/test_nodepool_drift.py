"""Drift of Karpenter v1 NodePools' nodes as v1.14.1 decides it (`nodepooldrift`): the NodePool template's hashed
fields (`pkg/apis/v1/nodepool.go` `Hash`; requirements `hash:"ignore"`), the EC2NodeClass's (aws
`pkg/apis/v1/ec2nodeclass.go` `Hash`: the selector terms ignored, the resolved AMI family hashed), only on NodeClaims
whose hash version is current (`nodeclaim/disruption/drift.go` `areStaticFieldsDrifted`), requirement drift with no
well-known exception (`areRequirementsDrifted`), forceful expiry from the NodeClaim's own expireAfter, removed
NodePools — and Karpenter's own tables as data, each naming its Go file and line (core `drift_test.go`, aws
`ec2nodeclass_hash_test.go`)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import yaml

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.commands.plan.drift import NodeDrift, PolicySide
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules, node_class_changes, nodepool_changes
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import listing
from tests.plan.v1snapshots import HASHES, claim, node_class, nodepool, pool_node

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)


def stored(document: str) -> dict[str, Any]:
    return stored_form(yaml.safe_load(document))


def side(*nodepools: str, classes: tuple[str, ...] = ()) -> PolicySide:
    pools = [stored(d) for d in nodepools]
    made = [stored(d) for d in classes or (node_class(),)]
    return PolicySide("x", {}, {}, {p["metadata"]["name"]: p for p in pools},
                      {c["metadata"]["name"]: c for c in made})


def drift_of(base: PolicySide, head: PolicySide, *items: dict[str, Any]) -> tuple[NodeDrift, NodePoolDriftRules]:
    fleet = fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json"))
    rules = NodePoolDriftRules(base, head, START)
    return rules(next(iter(fleet.nodes.values()))), rules


def test_a_changed_template_label_drifts_a_nodeclaim_with_a_current_hash_and_names_the_field() -> None:
    base, head = side(nodepool()), side(nodepool(labels="team: platform"))

    drifted, _ = drift_of(base, head, pool_node("n1"), claim("n1"))

    assert drifted.drifted
    assert drifted.reasons == ("spec.template.metadata.labels.team changed (nodepool default)",)


@pytest.mark.parametrize(
    ("annotations", "note"),
    [
        ({**HASHES, "karpenter.sh/nodepool-hash-version": "v2"},
         "karpenter.sh/nodepool-hash-version 'v2', not 'v3'"),
        ({k: v for k, v in HASHES.items() if k != "karpenter.sh/nodepool-hash-version"},
         "no karpenter.sh/nodepool-hash-version"),
        ({}, "no karpenter.sh/nodepool-hash annotation"),
    ],
)
def test_a_stale_or_missing_hash_version_means_no_static_drift_and_a_note(annotations: dict[str, str],
                                                                          note: str) -> None:
    base, head = side(nodepool()), side(nodepool(labels="team: platform"))

    drift, rules = drift_of(base, head, pool_node("n1"), claim("n1", annotations=annotations))

    assert not drift.drifted and drift.reasons == ()
    assert rules.notes() == [f"1 node of nodepool default: {note}: Karpenter does not drift it statically (it "
                             "re-annotates the NodeClaim with the current hash)"]


def test_the_nodeclaims_annotations_decide_not_the_nodes() -> None:
    base, head = side(nodepool()), side(nodepool(labels="team: platform"))

    drift, _ = drift_of(base, head, pool_node("n1", annotations=HASHES), claim("n1", annotations={}))

    assert not drift.drifted


@pytest.mark.parametrize(
    ("base_extra", "head_extra", "said"),
    [
        ("", "      taints: [{key: dedicated, value: web, effect: NoSchedule}]\n",
         ["spec.template.spec.taints added"]),
        ("      startupTaints: [{key: a, effect: NoSchedule}, {key: b, effect: NoSchedule}]\n",
         "      startupTaints: [{key: b, effect: NoSchedule}, {key: a, effect: NoSchedule}]\n", []),  # as sets
        ("", "      expireAfter: 168h\n", ["spec.template.spec.expireAfter changed"]),
        ("", "      expireAfter: 720h\n", []),  # the default, stored either way
        ("      expireAfter: 60m\n", "      expireAfter: 1h\n", []),  # a duration hashes as its value
        ("", "      expireAfter: Never\n", ["spec.template.spec.expireAfter removed"]),
        ("", "      terminationGracePeriod: 24h\n", ["spec.template.spec.terminationGracePeriod added"]),
    ],
)
def test_which_template_spec_fields_are_hashed(base_extra: str, head_extra: str, said: list[str]) -> None:
    assert nodepool_changes(stored(nodepool(template_extra=base_extra)),
                            stored(nodepool(template_extra=head_extra))) == said


def test_requirements_budgets_limits_and_weight_are_not_hashed_but_node_class_ref_and_annotations_are() -> None:
    base = stored(nodepool())
    head = stored(nodepool(zones="[us-east-1a]", budgets='[{nodes: "0"}]', extra="  limits: {cpu: 100}\n"
                           "  weight: 10\n"))
    moved = stored(nodepool(node_class="other").replace("      labels: {team: web}",
                                                        "      labels: {team: web}\n      annotations: {a: b}"))

    assert nodepool_changes(base, head) == []
    assert nodepool_changes(base, moved) == ["spec.template.metadata.annotations added",
                                             "spec.template.spec.nodeClassRef.name changed"]


@pytest.mark.parametrize(
    ("base", "head", "said"),
    [
        (node_class(), node_class(extra="  userData: echo hi\n  tags: {team: web}\n"),
         ["spec.tags added", "spec.userData added"]),
        (node_class(), node_class().replace("discovery: prod}}]", "discovery: staging}}]"), []),  # selectors
        (node_class(), node_class(alias="al2023@v20240807"), []),  # an AMI version: cloud drift, not static
        (node_class(), node_class(extra="  amiFamily: AL2023\n"), []),  # the same family, resolved
        (node_class(), node_class(alias="bottlerocket@latest"),
         ["AMI family AL2023 → Bottlerocket (spec.amiFamily / spec.amiSelectorTerms alias)"]),
        (node_class(), node_class(extra="  kubelet: {maxPods: 58}\n"), ["spec.kubelet added"]),
    ],
)
def test_which_node_class_fields_are_hashed(base: str, head: str, said: list[str]) -> None:
    assert node_class_changes(stored(base), stored(head)) == said


def test_node_class_drift_needs_its_own_current_hash_version() -> None:
    base = side(nodepool())
    head = side(nodepool(), classes=(node_class(extra="  userData: echo 2\n"),))
    stale = {**HASHES, "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4"}

    current, _ = drift_of(base, head, pool_node("n1"), claim("n1"))
    old, rules = drift_of(base, head, pool_node("n2"), claim("n2", annotations=stale))

    assert current.reasons == ("EC2NodeClass default: spec.userData added",)
    assert not old.drifted and "karpenter.k8s.aws/ec2nodeclass-hash-version 'v4', not 'v5'" in rules.notes()[0]


def test_requirement_drift_names_the_label_and_allows_no_undefined_well_known_key() -> None:
    base = side(nodepool(zones="[us-east-1a, us-east-1b, us-east-1c]"))
    head = side(nodepool(zones="[us-east-1a, us-east-1b]"))
    generation = side(nodepool().replace(
        "      nodeClassRef", "        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ['4']}\n"
        "      nodeClassRef"))

    moved, _ = drift_of(base, head, pool_node("n1", zone="us-east-1c"), claim("n1", zone="us-east-1c"))
    lacking, _ = drift_of(base, generation, pool_node("n2"), claim("n2"))

    assert moved.reasons == ("requirement drift: topology.kubernetes.io/zone In [us-east-1a, us-east-1b] not in "
                             "[us-east-1c] (nodepool default's spec.template.spec.requirements)",)
    # v1's Compatible has no AllowUndefinedWellKnownLabels: a well-known key the NodeClaim lacks drifts it
    assert lacking.reasons == ("requirement drift: label karpenter.k8s.aws/instance-generation does not have known "
                               "values (nodepool default's spec.template.spec.requirements)",)


def test_expiry_is_the_nodeclaims_own_expire_after_and_carries_its_termination_grace() -> None:
    pools = side(nodepool(template_extra="      expireAfter: 24h\n"))  # HEAD's 24h is not the NodeClaim's

    old, _ = drift_of(pools, pools, pool_node("n1"), claim("n1", created="2026-10-30T08:59:59Z", grace="30m"))
    young, _ = drift_of(pools, pools, pool_node("n2"), claim("n2", created="2026-11-29T12:00:00Z"))
    never, _ = drift_of(pools, pools, pool_node("n3"), claim("n3", created="2020-01-01T00:00:00Z",
                                                              expire_after="Never"))

    assert old.expires and not old.drifted and old.termination_grace == 1800.0
    assert old.reasons == ("expired: created 2026-10-30T08:59:59Z + expireAfter 720h0m0s (forceful: no budget, no "
                           "replacement first)",)
    assert not young.expires and young.expires_at == dt.datetime(2026, 12, 29, 12, tzinfo=dt.UTC)
    assert not never.expires and never.expires_at is None


def test_without_a_nodeclaim_bases_expire_after_and_the_nodes_labels_and_annotations_count() -> None:
    base = side(nodepool(template_extra="      expireAfter: 240h\n"))
    head = side(nodepool(labels="team: platform", template_extra="      expireAfter: 240h\n"))

    drift, _ = drift_of(base, head, pool_node("n1", created="2026-11-10T00:00:00Z", annotations=HASHES))

    assert drift.drifted and drift.expires
    assert drift.reasons[0] == "spec.template.metadata.labels.team changed (nodepool default)"


def test_a_removed_nodepool_an_unknown_one_and_an_already_drifted_nodeclaim() -> None:
    base, head = side(nodepool(), nodepool("old")), side(nodepool())

    removed, _ = drift_of(base, head, pool_node("n1", "old"), claim("n1", "old"))
    unknown, _ = drift_of(base, head, pool_node("n2", "elsewhere"), claim("n2", "elsewhere"))
    already, _ = drift_of(base, head, pool_node("n3"), claim("n3", drifted=True))

    assert removed.removed and removed.reasons == ("nodepool old removed",)
    assert unknown.unknown and not unknown.disrupted
    assert already.drifted and already.reasons == (
        "already drifted: NodeClaim default-n3's Drifted condition is true in the snapshot",)


def _requirements(*terms: tuple[str, str, list[str]]) -> list[dict[str, Any]]:
    return [{"key": key, "operator": operator, "values": values} for key, operator, values in terms]


def _pool(requirements: list[dict[str, Any]]) -> PolicySide:
    document = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                "spec": {"template": {"spec": {"requirements": requirements, "nodeClassRef": {
                    "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
    return PolicySide("x", {}, {}, {"default": stored_form(document)}, {"default": stored(node_class())})


CT, ARCH, OS = "karpenter.sh/capacity-type", "kubernetes.io/arch", "kubernetes.io/os"
#: core v1.14.1 pkg/controllers/nodeclaim/disruption/drift_test.go, "NodeRequirement Drift": each Entry's old and new
#: NodePool requirements, the NodeClaim's labels, whether it drifts, and the Entry's line.
REQUIREMENT_DRIFT = [
    (_requirements((CT, "In", ["on-demand"]), (ARCH, "In", ["amd64"]), (OS, "In", ["linux"])),
     _requirements((CT, "In", ["spot"])), {CT: "on-demand", ARCH: "amd64", OS: "linux"}, True, 228),
    (_requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux"])),
     _requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux"]), (ARCH, "In", ["amd64"])),
     {CT: "on-demand", OS: "linux"}, True, 244),
    (_requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux", "windows"])),
     _requirements((CT, "In", ["on-demand"]), (OS, "In", ["windows"])), {CT: "on-demand", OS: "linux"}, True, 261),
    (_requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux"])),
     _requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux", "windows"])), {CT: "on-demand", OS: "linux"},
     False, 277),
    (_requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux"])),
     _requirements((CT, "In", ["on-demand"]), (OS, "Exists", [])), {CT: "on-demand", OS: "linux"}, False, 293),
    (_requirements((CT, "In", ["on-demand"]), (OS, "In", ["linux"])),
     _requirements((CT, "In", ["on-demand"]), (OS, "DoesNotExist", [])), {CT: "on-demand", OS: "linux"}, True, 309),
    (_requirements((CT, "In", ["on-demand"]), ("test-label", "Gt", ["2"])),
     _requirements((CT, "In", ["on-demand"]), ("test-label", "Gt", ["10"])), {CT: "on-demand", "test-label": "5"},
     True, 325),
    (_requirements((CT, "In", ["on-demand"]), ("test-label", "Lt", ["5"])),
     _requirements((CT, "In", ["on-demand"]), ("test-label", "Lt", ["1"])), {CT: "on-demand", "test-label": "2"},
     True, 341),
]


@pytest.mark.parametrize(("old", "new", "labels", "drifts", "line"), REQUIREMENT_DRIFT,
                         ids=[f"drift_test.go:{entry[-1]}" for entry in REQUIREMENT_DRIFT])
def test_karpenters_requirement_drift_table(old: list[dict[str, Any]], new: list[dict[str, Any]],
                                            labels: dict[str, str], drifts: bool, line: int) -> None:
    before, after = _pool(old), _pool(new)
    made = claim("n1")  # labelled as drift_test.go:45-51 labels its NodeClaim, then the Entry's labels
    made["metadata"]["labels"] = {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large",
                                  "topology.kubernetes.io/zone": "test-zone-1a", CT: "spot", **labels}
    items = (pool_node("n1"), made)

    unchanged, _ = drift_of(before, before, *items)
    changed, _ = drift_of(before, after, *items)

    assert not unchanged.drifted  # Karpenter's first reconcile: not drifted on the old requirements
    assert changed.drifted is drifts
    assert all(r.startswith("requirement drift:") for r in changed.reasons)


#: core v1.14.1 drift_test.go:474–480, "should detect drift on changes to the static fields": each field set on a
#: NodePool that had it unset (its default) drifts a NodeClaim of the old hash.
STATIC_FIELDS = [
    ("      annotations: {keyAnnotationTest: valueAnnotationTest}\n", "", 474),
    ("      labels: {keyLabelTest: valueLabelTest}\n", "", 475),
    ("", "      taints: [{key: keytest2taint, effect: NoExecute}]\n", 476),
    ("", "      startupTaints: [{key: keytest2taint, effect: NoExecute}]\n", 477),
    ("", "", 478),  # nodeClassRef name: below
    ("", "      expireAfter: 100m\n", 479),
    ("", "      terminationGracePeriod: 100m\n", 480),
]


@pytest.mark.parametrize(("metadata", "spec", "line"), STATIC_FIELDS,
                         ids=[f"drift_test.go:{entry[-1]}" for entry in STATIC_FIELDS])
def test_karpenters_static_drift_table(metadata: str, spec: str, line: int) -> None:
    plain = ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n"
             "    metadata: {}\n    spec:\n      requirements: []\n"
             "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n")
    changed = plain.replace("    metadata: {}\n", "    metadata:\n" + metadata if metadata else "    metadata: {}\n")
    changed += spec
    if line == 478:
        changed = plain.replace("EC2NodeClass, name: default}", "EC2NodeClass, name: testName}")

    drift, _ = drift_of(side(plain), side(changed), pool_node("n1"), claim("n1"))

    assert drift.drifted and drift.fields


#: aws v1.14.1 pkg/apis/v1/ec2nodeclass_hash_test.go:38-73: the EC2NodeClass its hash tests start from.
HASH_TEST_CLASS: dict[str, Any] = {"spec": {
    "role": "role-1", "tags": {"keyTag-1": "valueTag-1", "keyTag-2": "valueTag-2"}, "context": "fake-context",
    "detailedMonitoring": False, "associatePublicIPAddress": False,
    "metadataOptions": {"httpEndpoint": "disabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1,
                        "httpTokens": "optional"},
    "blockDeviceMappings": [
        {"deviceName": "map-device-1", "rootVolume": False, "ebs": {
            "deleteOnTermination": False, "encrypted": False, "iops": 0, "kmsKeyID": "fakeKMSKeyID",
            "snapshotID": "fakeSnapshot", "throughput": 0, "volumeSize": "2G", "volumeType": "standard"}},
        {"deviceName": "map-device-2"}],
    "userData": "userdata-test-1"}}
#: ec2nodeclass_hash_test.go:141-163 ("should change hash when static fields are updated"), each Entry's change
#: merged into the class as mergo merges it (maps key by key, slices element by element), and its line.
HASH_CHANGES: list[tuple[dict[str, Any], int]] = [
    ({"userData": "userdata-test-2"}, 141),
    ({"tags": {"keyTag-test-3": "valueTag-test-3"}}, 142),
    ({"context": "context-2"}, 143),
    ({"detailedMonitoring": True}, 144),
    ({"instanceStorePolicy": "RAID0"}, 145),
    ({"associatePublicIPAddress": True}, 146),
    ({"metadataOptions": {"httpEndpoint": "enabled"}}, 147),
    ({"metadataOptions": {"httpProtocolIPv6": "enabled"}}, 148),
    ({"metadataOptions": {"httpPutResponseHopLimit": 10}}, 149),
    ({"metadataOptions": {"httpTokens": "required"}}, 150),
    ({"blockDeviceMappings": [{"deviceName": "map-device-test-3"}]}, 151),
    ({"blockDeviceMappings": [{"rootVolume": True}]}, 152),
    ({"blockDeviceMappings": [{"ebs": {"deleteOnTermination": True}}]}, 153),
    ({"blockDeviceMappings": [{"ebs": {"encrypted": True}}]}, 154),
    ({"blockDeviceMappings": [{"ebs": {"iops": 10}}]}, 155),
    ({"blockDeviceMappings": [{"ebs": {"kmsKeyID": "test"}}]}, 156),
    ({"blockDeviceMappings": [{"ebs": {"snapshotID": "test"}}]}, 157),
    ({"blockDeviceMappings": [{"ebs": {"throughput": 10}}]}, 158),
    ({"blockDeviceMappings": [{"ebs": {"volumeType": "io1"}}]}, 159),
    ({"connectionTracking": {"tcpEstablishedTimeout": 300}}, 160),
    ({"connectionTracking": {"udpStreamTimeout": 120}}, 161),
    ({"connectionTracking": {"udpTimeout": 45}}, 162),
    ({"cpuOptions": {"nestedVirtualization": "enabled"}}, 163),
    ({"blockDeviceMappings": [{"ebs": {"volumeSize": "10G"}}]}, 167),
    ({"role": "", "instanceProfile": "other-instance-profile"}, 173),
]
#: ec2nodeclass_hash_test.go:181-200: what leaves the hash alone (re-ordered tags and block devices; the
#: selector terms, which Karpenter resolves at run time).
HASH_KEPT: list[tuple[dict[str, Any], int]] = [
    ({"tags": {"keyTag-2": "valueTag-2", "keyTag-1": "valueTag-1"}}, 181),
    ({"blockDeviceMappings": list(reversed(HASH_TEST_CLASS["spec"]["blockDeviceMappings"]))}, 187),
    ({"subnetSelectorTerms": [{"tags": {"subnet-test-key": "subnet-test-value"}}],
      "securityGroupSelectorTerms": [{"tags": {"security-group-test-key": "security-group-test-value"}}],
      "amiSelectorTerms": [{"tags": {"ami-test-key": "ami-test-value"}}]}, 193),
]


def _merged(base: Any, change: Any) -> Any:
    if isinstance(base, dict) and isinstance(change, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in change.items()}}
    if isinstance(base, list) and isinstance(change, list):  # mergo.WithSliceDeepCopy: element by element
        return [_merged(b, change[i]) if i < len(change) else b for i, b in enumerate(base)]
    return change


@pytest.mark.parametrize(("change", "line"), HASH_CHANGES,
                         ids=[f"ec2nodeclass_hash_test.go:{c[1]}" for c in HASH_CHANGES])
def test_karpenters_node_class_hash_changes(change: dict[str, Any], line: int) -> None:
    assert node_class_changes(HASH_TEST_CLASS, {"spec": _merged(HASH_TEST_CLASS["spec"], change)}) != []


@pytest.mark.parametrize(("change", "line"), HASH_KEPT, ids=[f"ec2nodeclass_hash_test.go:{c[1]}" for c in HASH_KEPT])
def test_karpenters_node_class_hash_kept(change: dict[str, Any], line: int) -> None:
    changed = {"spec": {**HASH_TEST_CLASS["spec"], **change}}

    assert node_class_changes(HASH_TEST_CLASS, changed) == []
