"""Drift of a NodePool's nodes by Karpenter v1.14.1's rules: the node carries its NodePool's and EC2NodeClass's
static hashes with their versions (`api.v1.statichash`), stamped at launch; it drifts when a hash differs from its
set's now under the same version (a missing or stale version: no static drift), or when its labels no longer meet
the NodePool's requirements (a key it lacks included, well-known or not). Ported cases name core's
pkg/controllers/nodeclaim/disruption/drift_test.go and aws's pkg/cloudprovider/suite_test.go at v1.14.1, with their
lines; each changes the NodePool or class the way the Go test does, on the constraint set examples/v1/controller
compiles to, and asks the controller's `drift_reason` about a node `Scene` launched from the original."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.api.constraintset import ConstraintSet, ProviderSettings
from karpenter_policy.api.v1.statichash import (
    EC2NODECLASS_HASH,
    EC2NODECLASS_HASH_VERSION_KEY,
    NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION_KEY,
)
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.model.taints import Taint
from karpenter_policy.reconcile.claims.conditions import drift_reason as drift_condition_reason
from karpenter_policy.reconcile.disruption.decider import drift_reason, image_drift
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
POOL = "NodePool/default"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1drift") / "build")


@pytest.fixture(scope="module")
def launched(compiled: Path) -> tuple[ConstraintSet, dict[str, Any]]:
    """The NodePool `default`'s set and a node the controller's node builder made from it."""
    scene = Scene(compiled)
    name = scene.add_node(POOL, "c6a.large")
    node = scene.node(name)
    assert node is not None
    return next(s for s in scene.loaded.sets if s.pool == POOL), node


def drift(node: dict[str, Any], constraint_set: ConstraintSet) -> str:
    return drift_reason(node, constraint_set, Templates(), POOL)


def with_annotations(node: dict[str, Any], **changes: str | None) -> dict[str, Any]:
    copied = copy.deepcopy(node)
    annotations = copied["metadata"]["annotations"]
    for key, value in changes.items():
        key = {"hash": NODEPOOL_HASH, "version": NODEPOOL_HASH_VERSION_KEY, "class_hash": EC2NODECLASS_HASH,
               "class_version": EC2NODECLASS_HASH_VERSION_KEY}[key]
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    return copied


def test_a_nodepools_node_is_stamped_with_both_hashes_and_their_versions(launched: Any) -> None:
    constraint_set, node = launched
    annotations = objects.annotations(node)
    assert annotations[NODEPOOL_HASH].startswith("sha256:")
    assert annotations[NODEPOOL_HASH_VERSION_KEY] == NODEPOOL_HASH_VERSION == "v3"
    assert annotations[EC2NODECLASS_HASH].startswith("sha256:")
    assert annotations[EC2NODECLASS_HASH_VERSION_KEY] == "v5"
    assert drift(node, constraint_set) == ""


def _extras(constraint_set: ConstraintSet, **changes: Any) -> ConstraintSet:
    return dataclasses.replace(constraint_set, nodepool={**(constraint_set.nodepool or {}), **changes})


def _class(constraint_set: ConstraintSet, **changes: Any) -> ConstraintSet:
    provider = constraint_set.provider
    assert provider is not None and provider.spec is not None
    spec = {**provider.spec, **changes}
    return dataclasses.replace(constraint_set, provider=ProviderSettings(provider.source, provider.name, spec))


STATIC = {
    # drift_test.go:474-480, "should detect drift on changes to the static fields"
    "Annotations (drift_test.go:474)": lambda s: dataclasses.replace(
        s, annotations={**s.annotations, "keyAnnotationTest": "valueAnnotationTest"}),
    "Labels (drift_test.go:475)": lambda s: dataclasses.replace(
        s, labels={**s.labels, "keyLabelTest": "valueLabelTest"}),
    "Taints (drift_test.go:476)": lambda s: dataclasses.replace(
        s, taints=(*s.taints, Taint("keytest2taint", "NoExecute"))),
    "StartupTaints (drift_test.go:477)": lambda s: dataclasses.replace(
        s, startup_taints=(*s.startup_taints, Taint("keytest2taint", "NoExecute"))),
    "NodeClassRef Name (drift_test.go:478)": lambda s: dataclasses.replace(
        s, provider=ProviderSettings(s.provider.source, "testName", s.provider.spec)),
    "ExpireAfter (drift_test.go:479)": lambda s: _extras(s, expireAfter="100m"),
    "TerminationGracePeriod (drift_test.go:480)": lambda s: _extras(s, terminationGracePeriod="100m"),
}


@pytest.mark.parametrize("change", list(STATIC.values()), ids=list(STATIC))
def test_a_change_to_a_static_field_drifts_the_node(launched: Any, change: Any) -> None:
    constraint_set, node = launched
    why = drift(node, change(constraint_set))
    assert why.startswith("NodePoolDrifted")
    assert drift_condition_reason(why) == "NodePoolDrifted"  # the NodeClaim's Drifted reason, as drift.go sets it


def test_the_same_duration_written_otherwise_and_reordered_taints_do_not_drift(launched: Any) -> None:
    constraint_set, node = launched
    expire = (constraint_set.nodepool or {}).get("expireAfter")
    assert expire == "720h"
    assert drift(node, _extras(constraint_set, expireAfter="43200m")) == ""  # hashed as its length
    assert drift(node, dataclasses.replace(constraint_set, taints=tuple(reversed(constraint_set.taints)))) == ""


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"hash": None}, "drift_test.go:489: no karpenter.sh/nodepool-hash on the NodeClaim"),
        ({"version": "v2"}, "drift_test.go:498: its hash version does not match the NodePool's"),
        ({"version": None}, "drift_test.go:512: no karpenter.sh/nodepool-hash-version on the NodeClaim"),
    ],
)
def test_without_a_current_hash_version_a_changed_nodepool_does_not_drift_the_node(
    launched: Any, changes: dict[str, str | None], why: str
) -> None:
    constraint_set, node = launched
    changed = dataclasses.replace(constraint_set, labels={**constraint_set.labels, "keyLabelTest": "x"})
    assert drift(with_annotations(node, **changes), changed) == "", why


CLASS_STATIC = {
    # aws pkg/cloudprovider/suite_test.go:1128-1146, "should return drifted if a statically drifted
    # EC2NodeClass.Spec field is updated" (a sample of its entries: each field is hashed alike)
    "UserData (suite_test.go:1128)": {"userData": "userdata-test-2"},
    "Tags (suite_test.go:1129)": {"tags": {"keyTag-test-3": "valueTag-test-3"}},
    "DetailedMonitoring (suite_test.go:1131)": {"detailedMonitoring": True},
    "MetadataOptions HTTPPutResponseHopLimit (suite_test.go:1136)": {
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 10,
                            "httpTokens": "required"}},
    "BlockDeviceMapping VolumeType (suite_test.go:1146)": {
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "io1"}}]},
    "AMI family (ec2nodeclass.go Hash: the resolved family)": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]},
}


@pytest.mark.parametrize("changes", list(CLASS_STATIC.values()), ids=list(CLASS_STATIC))
def test_a_change_to_a_hashed_ec2nodeclass_field_drifts_the_node(launched: Any, changes: dict[str, Any]) -> None:
    constraint_set, node = launched
    why = drift(node, _class(constraint_set, **changes))
    assert why.startswith("NodeClassDrifted")
    assert drift_condition_reason(why) == "NodeClassDrift"  # aws pkg/cloudprovider/drift.go `areStaticFieldsDrifted`


@pytest.mark.parametrize(
    "changes",
    [
        # suite_test.go:1178-1179 "should not return drifted if dynamic fields are updated": subnets and security
        # groups are cloud drift (their resolved ids), not the hash
        {"subnetSelectorTerms": [{"tags": {"sn-key-1": "sn-value-1"}}]},
        {"securityGroupSelectorTerms": [{"tags": {"sg-key": "sg-value"}}]},
        # the alias's family written out as amiFamily: the same resolved family
        {"amiFamily": "AL2"},
    ],
    ids=["subnets", "security groups", "amiFamily as the alias's"],
)
def test_unhashed_ec2nodeclass_fields_do_not_drift_the_node(launched: Any, changes: dict[str, Any]) -> None:
    constraint_set, node = launched
    assert drift(node, _class(constraint_set, **changes)) == ""


def test_a_stale_ec2nodeclass_hash_version_is_no_drift(launched: Any) -> None:
    # suite_test.go:1193 "should not return drifted if the NodeClaim's ec2nodeclass-hash-version annotation does not
    # match the EC2NodeClass's"; :1181 without the hash annotation
    constraint_set, node = launched
    changed = _class(constraint_set, userData="userdata-test-2")
    assert drift(with_annotations(node, class_version="v4"), changed) == ""
    assert drift(with_annotations(node, class_hash=None), changed) == ""


CT, ARCH, OS = wk.CAPACITY_TYPE, wk.ARCH, wk.OS


def _req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


REQUIREMENTS = [
    # drift_test.go "NodeRequirement Drift" table, each Entry at its line: (old, new, node labels, drifted)
    pytest.param([_req(CT, "In", "on-demand"), _req(ARCH, "In", "amd64"), _req(OS, "In", "linux")],
                 [_req(CT, "In", "spot")], {CT: "on-demand", ARCH: "amd64", OS: "linux"}, True,
                 id="the requirement is updated (drift_test.go:228)"),
    pytest.param([_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
                 [_req(CT, "In", "on-demand"), _req(OS, "In", "linux"), _req(ARCH, "In", "amd64")],
                 {CT: "on-demand", OS: "linux"}, True, id="a requirement is added (drift_test.go:244)"),
    pytest.param([_req(CT, "In", "on-demand"), _req(OS, "In", "linux", "windows")],
                 [_req(CT, "In", "on-demand"), _req(OS, "In", "windows")], {CT: "on-demand", OS: "linux"}, True,
                 id="a requirement is reduced (drift_test.go:261)"),
    pytest.param([_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
                 [_req(CT, "In", "on-demand"), _req(OS, "In", "linux", "windows")], {CT: "on-demand", OS: "linux"},
                 False, id="a requirement is expanded (drift_test.go:277)"),
    pytest.param([_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
                 [_req(CT, "In", "on-demand"), _req(OS, "Exists")], {CT: "on-demand", OS: "linux"}, False,
                 id="a requirement set to Exists (drift_test.go:293)"),
    pytest.param([_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
                 [_req(CT, "In", "on-demand"), _req(OS, "DoesNotExist")], {CT: "on-demand", OS: "linux"}, True,
                 id="a requirement set to DoesNotExist (drift_test.go:309)"),
    pytest.param([_req(CT, "In", "on-demand"), _req("test-label", "Gt", "2")],
                 [_req(CT, "In", "on-demand"), _req("test-label", "Gt", "10")], {CT: "on-demand", "test-label": "5"},
                 True, id="Gt raised above the label (drift_test.go:325)"),
    pytest.param([_req(CT, "In", "on-demand"), _req("test-label", "Lt", "5")],
                 [_req(CT, "In", "on-demand"), _req("test-label", "Lt", "1")], {CT: "on-demand", "test-label": "2"},
                 True, id="Lt lowered below the label (drift_test.go:341)"),
]


@pytest.mark.parametrize(("old", "new", "labels", "drifted"), REQUIREMENTS)
def test_requirement_drift_is_karpenter_v1s(
    launched: Any, old: list[dict[str, Any]], new: list[dict[str, Any]], labels: dict[str, str], drifted: bool
) -> None:
    constraint_set, stamped = launched
    node = with_annotations(stamped)
    node["metadata"]["labels"] = {wk.NODEPOOL: "default", **labels}
    assert drift(node, dataclasses.replace(constraint_set, requirements=tuple(old))) == ""
    why = drift(node, dataclasses.replace(constraint_set, requirements=tuple(new)))
    assert why.startswith("RequirementsDrifted") if drifted else why == "", why
    if drifted:
        assert drift_condition_reason(why) == "RequirementsDrifted"


def test_a_changed_nodepool_replaces_its_nodes_in_the_controller(compiled: Path, tmp_path: Path) -> None:
    """End to end: a node launched from the NodePool, the NodePool's template labels then changed and compiled
    again: the controller replaces the node (a new one with the new label)."""
    policies = tmp_path / "policies"
    shutil.copytree(EXAMPLE / "policies", policies)
    build = compile_policies(policies, tmp_path / "build")
    scene = Scene(build)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (first,) = [n for n, node in scene.nodes().items() if objects.labels(node).get(wk.NODEPOOL) == "default"]
    manifest = policies / "nodepools.yaml"
    text = manifest.read_text()
    assert text.count("team: web") == 1
    manifest.write_text(text.replace("team: web", "team: shop"))
    compile_policies(policies, build)
    scene.run(controller, 600, until=lambda: first not in scene.nodes())
    assert first not in scene.nodes()
    (second,) = [node for node in scene.nodes().values() if objects.labels(node).get(wk.NODEPOOL) == "default"]
    assert objects.labels(second)["team"] == "shop"
    assert scene.unbound() == []


def test_an_image_drift_is_the_claims_amidrift() -> None:
    """aws pkg/cloudprovider/drift.go `isAMIDrifted` returns `AMIDrift`: the Drifted condition's reason."""
    node = {"metadata": {"name": "n", "annotations": {node_info.ANNOTATION_IMAGE: "ami-0aaaaaaaaaaaaaaaa"}}}
    why = image_drift(node, "ami-0bbbbbbbbbbbbbbbb")
    assert why and drift_condition_reason(why) == "AMIDrift"
    assert drift_condition_reason("something else") == "Drifted"
