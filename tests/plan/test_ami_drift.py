"""AMI drift of Karpenter v1 NodeClaims (`amidrift`; aws v1.14.1 `pkg/cloudprovider/drift.go` `isAMIDrifted`)
where HEAD's EC2NodeClass names its AMIs by `id` or keeps the terms the cluster's EC2NodeClass resolved (its
`status.amis`): the "NodeClaim Drift" cases of aws v1.14.1
`pkg/cloudprovider/suite_test.go` that a snapshot can state, as data naming their line; a plan whose HEAD pins a
new AMI replaces the nodes on the old one, naming both; a change of alias the plan cannot resolve is a note, never
a silent "no drift"; a NodeClaim whose `status.imageID` is not a string is refused; and, as a property, the AMI
mapped from the cluster's `status.amis` is the first whose requirements the labels meet, and another (or none)
drifts."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.amidrift import mapped_ami, selected_ami_ids
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import listing, pod, write
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node, v1_policies
from tests.profiles import deterministic

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
AMD, ARM, OTHER = "ami-0amd64aaaaaaaaaa1", "ami-0arm64aaaaaaaaaa2", "ami-0fake0000000000003"
SUITE = "aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/suite_test.go"


def ids_class(*ids: str, name: str = "default") -> str:
    """An EC2NodeClass naming its AMIs by id (the AMI family said apart, as v1 requires without an alias)."""
    terms = ", ".join(f"{{id: {i}}}" for i in ids)
    return node_class(name).replace('amiSelectorTerms: [{alias: "al2023@latest"}]',
                                    f"amiFamily: AL2023\n  amiSelectorTerms: [{terms}]")


def side(*classes: str) -> PolicySide:
    made = [stored_form(yaml.safe_load(d)) for d in classes]
    pool = stored_form(yaml.safe_load(nodepool()))
    return PolicySide("x", {}, {}, {"default": pool}, {c["metadata"]["name"]: c for c in made})


def with_image(item: dict[str, Any], image: Any) -> dict[str, Any]:
    if image is not None:
        item["status"]["imageID"] = image
    return item


#: (Go line, what it says, HEAD's class (None: absent), the NodeClaim's status.imageID, AMIDrift expected)
SUITE_CASES = [
    (810, "BeforeEach: the NodeClaim runs the class's AMI — not drifted", ids_class(AMD, ARM), AMD, False),
    (817, "should not fail if NodeClass does not exist", None, AMD, False),
    (829, "should return drifted if the AMI is not valid", ids_class(AMD, ARM), OTHER, True),
    (999, "should error if the NodeClaim doesn't have ImageID (no drift)", ids_class(AMD), None, False),
    (1017, "should return drifted if the AMI no longer matches the existing NodeClaims instance type",
     ids_class(AMD), ARM, True),
]


@pytest.mark.parametrize(("line", "says", "head_class", "image", "drifts"), SUITE_CASES,
                         ids=[f"suite_test.go:{c[0]}" for c in SUITE_CASES])
def test_karpenters_nodeclaim_drift_cases(line: int, says: str, head_class: str | None, image: str | None,
                                          drifts: bool) -> None:
    base = side(ids_class(AMD, ARM))
    head = side(head_class) if head_class is not None else PolicySide("x", {}, {}, base.nodepools, {})
    fleet = fleet_of(read_snapshot(json.dumps(listing(pool_node("n1"), with_image(claim("n1"), image))).encode(),
                                   "s.json"))
    drift = NodePoolDriftRules(base, head, START)(fleet.nodes["n1"])

    ami = [r for r in drift.reasons if r.startswith("AMIDrift")]
    assert bool(ami) == drifts, f"{SUITE}:{line} {says}: {drift.reasons}"
    assert drift.drifted == drifts
    if drifts:
        assert ami[0].startswith(f"AMIDrift: NodeClaim default-n1's status.imageID {image} is not among "
                                 "EC2NodeClass default's spec.amiSelectorTerms ids (")


@pytest.mark.parametrize(("terms", "ids"), [
    ("[{id: ami-1}, {id: ami-2}]", ("ami-1", "ami-2")),
    ("[{id: ami-1}, {tags: {a: b}}]", None),
    ('[{alias: "al2023@latest"}]', None),
    ("[{id: ami-1, owner: self}]", None),
    ("[]", None),
])
def test_only_a_class_of_id_terms_names_its_amis(terms: str, ids: tuple[str, ...] | None) -> None:
    assert selected_ami_ids({"spec": {"amiSelectorTerms": yaml.safe_load(terms)}}) == ids


def test_a_plan_pinning_a_new_ami_replaces_the_nodes_on_the_old_one(tmp_path: Path) -> None:
    base = v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]'), node_classes=(ids_class(OTHER),))
    head = v1_policies(tmp_path / "head", nodepool(budgets='[{nodes: "1"}]'), node_classes=(ids_class(AMD),))
    items = [pool_node("n1"), with_image(claim("n1"), OTHER), pod("web-1", "n1", "web"),
             pool_node("n2"), with_image(claim("n2"), AMD), pod("web-2", "n2", "web")]

    result = plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start="2026-11-30T09:00:00Z",
                                      output="json", base=base, head=head), load_catalog())

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [(n["name"], n["drifted"]) for n in document["nodes"]] == [("n1", True), ("n2", False)]
    assert document["nodes"][0]["reasons"] == [
        f"AMIDrift: NodeClaim default-n1's status.imageID {OTHER} is not among EC2NodeClass default's "
        f"spec.amiSelectorTerms ids ({AMD})"]
    assert [d["field"] for d in document["drift"]] == [
        "EC2NodeClass default: AMIDrift (status.imageID not the AMI it resolves to)"]


def test_a_changed_alias_is_a_note_not_a_silent_no_drift() -> None:
    base = side(node_class(alias="al2023@v20241010"))
    head = side(node_class(alias="al2023@v20241120"))
    fleet = fleet_of(read_snapshot(json.dumps(listing(pool_node("n1"), with_image(claim("n1"), AMD))).encode(),
                                   "s.json"))
    rules = NodePoolDriftRules(base, head, START)

    drift = rules(fleet.nodes["n1"])

    assert not drift.drifted
    assert rules.notes() == ["1 node of EC2NodeClass default: HEAD changes spec.amiSelectorTerms, which EC2 resolves "
                             "(alias, tags, name, owner): their AMI drift is not planned (give what EC2 and SSM "
                             "answer: --instances, --images, --ssm-parameters)"]


def test_an_image_id_that_is_not_a_string_is_refused() -> None:
    snapshot = read_snapshot(json.dumps(listing(pool_node("n1"), with_image(claim("n1"), 7))).encode(), "s.json")

    assert [str(p) for p in snapshot.errors] == [
        "s.json: item 1: error: NodeClaim default-n1: status.imageID is not a string: 7"]


NEW, OLD, GPU = "ami-0new00000000000001", "ami-0old00000000000002", "ami-0gpu00000000000003"
AMD64 = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
ARM64 = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]
NO_GPU = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]
WITH_GPU = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"}]


def cluster_class(amis: list[dict[str, Any]], alias: str = "al2023@latest") -> dict[str, Any]:
    """The cluster's EC2NodeClass as `kubectl get ec2nodeclasses -o json` prints it, its AMIs resolved."""
    made = stored_form(yaml.safe_load(node_class(alias=alias)))
    made["status"] = {"amis": amis}
    return made


#: (what it shows, the cluster's status.amis (newest first), the NodeClaim's status.imageID, the AMI it should run)
RESOLVED_CASES = [
    ("a new release of the alias: the node on the old one drifts",
     [{"id": NEW, "requirements": AMD64}, {"id": OLD, "requirements": AMD64}], OLD, NEW),
    ("the node already on the newest", [{"id": NEW, "requirements": AMD64}, {"id": OLD, "requirements": AMD64}],
     NEW, None),
    (f"{SUITE}:1017 the AMI no longer matches the instance type", [{"id": AMD, "requirements": AMD64}], ARM, AMD),
    ("the arm64 AMI first is not the amd64 node's", [{"id": ARM, "requirements": ARM64},
                                                   {"id": AMD, "requirements": AMD64}], AMD, None),
    ("a node without a GPU meets DoesNotExist, not Exists",
     [{"id": GPU, "requirements": AMD64 + WITH_GPU}, {"id": OLD, "requirements": AMD64 + NO_GPU}], OLD, None),
    ("no AMI fits: drifted (v1.14.1 drift.go:104, no mapped AMI contains the NodeClaim's)",
     [{"id": ARM, "requirements": ARM64}], AMD, ""),
]


@pytest.mark.parametrize(("says", "amis", "image", "mapped"), RESOLVED_CASES, ids=[c[0] for c in RESOLVED_CASES])
def test_the_clusters_resolved_amis_decide_when_head_keeps_the_terms(says: str, amis: list[dict[str, Any]],
                                                                     image: str, mapped: str | None) -> None:
    base = head = side(node_class())
    snapshot = read_snapshot(json.dumps(listing(pool_node("n1"), with_image(claim("n1"), image),
                                                cluster_class(amis))).encode(), "s.json")
    assert snapshot.errors == []

    drift = NodePoolDriftRules(base, head, START, snapshot.node_classes)(fleet_of(snapshot).nodes["n1"])

    expected = () if mapped is None else (
        f"AMIDrift: NodeClaim default-n1's status.imageID {image}: EC2NodeClass default's status.amis in the "
        "snapshot map no AMI to its instance type",) if not mapped else (
        f"AMIDrift: NodeClaim default-n1's status.imageID {image} is not {mapped}, the AMI EC2NodeClass default's "
        "status.amis maps to its instance type in the snapshot",)
    assert drift.reasons == expected, says


def test_the_clusters_amis_are_not_heads_when_head_changes_the_terms() -> None:
    base, head = side(node_class()), side(node_class(alias="al2023@v20241120"))
    snapshot = read_snapshot(json.dumps(listing(pool_node("n1"), with_image(claim("n1"), OLD), cluster_class(
        [{"id": NEW, "requirements": AMD64}]))).encode(), "s.json")
    rules = NodePoolDriftRules(base, head, START, snapshot.node_classes)

    drift = rules(fleet_of(snapshot).nodes["n1"])

    assert not drift.drifted and len(rules.notes()) == 1


@pytest.mark.parametrize(("status", "message"), [
    ({"amis": "ami-1"}, "status.amis is not a list: 'ami-1'"),
    ({"amis": [{"name": "x"}]}, "status.amis[0] has no id: {'name': 'x'}"),
    ({"amis": [{"id": NEW, "requirements": [{"key": "a", "operator": "Near"}]}]},
     "status.amis[0].requirements are not node selector requirements"),
])
def test_a_malformed_resolved_ami_is_refused(status: dict[str, Any], message: str) -> None:
    made = cluster_class([])
    made["status"] = status
    snapshot = read_snapshot(json.dumps(listing(pool_node("n1"), made)).encode(), "s.json")

    assert len(snapshot.errors) == 1 and f"EC2NodeClass default: {message}" in str(snapshot.errors[0])


KEYS = ("kubernetes.io/arch", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-family")
VALUES = ("a", "b", "c")


def _meets(labels: dict[str, str], requirement: dict[str, Any]) -> bool:
    """A label set meeting one node selector requirement, as a Node's labels meet one (the oracle)."""
    key, operator, values = requirement["key"], requirement["operator"], requirement.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


requirements = st.lists(st.fixed_dictionaries({
    "key": st.sampled_from(KEYS), "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    "values": st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True)}).map(
    lambda r: {k: v for k, v in r.items() if k != "values" or r["operator"] in ("In", "NotIn")}), max_size=3,
    unique_by=lambda r: r["key"])


@deterministic(300)
@given(amis=st.lists(requirements, min_size=1, max_size=4),
       labels=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES)),
       running=st.integers(0, 4))
def test_the_mapped_ami_is_the_first_whose_requirements_the_labels_meet_and_only_another_drifts(
    amis: list[list[dict[str, Any]]], labels: dict[str, str], running: int
) -> None:
    resolved = [{"id": f"ami-{i}", "requirements": r} for i, r in enumerate(amis)]
    fitting = [a["id"] for a in resolved if all(_meets(labels, r) for r in a["requirements"])]
    image = f"ami-{running}"
    node = pool_node("n1")
    made = with_image(claim("n1"), image)
    made["metadata"]["labels"] = labels
    snapshot = read_snapshot(json.dumps(listing(node, made, cluster_class(resolved))).encode(), "s.json")
    base = side(node_class())

    drift = NodePoolDriftRules(base, base, START, snapshot.node_classes)(fleet_of(snapshot).nodes["n1"])

    assert mapped_ami(resolved, labels) == (fitting[0] if fitting else None)
    ami_drift = [r for r in drift.reasons if r.startswith("AMIDrift")]
    assert bool(ami_drift) == (not fitting or image != fitting[0])  # none mapped: drifted (drift.go:104)
