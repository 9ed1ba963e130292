"""Subnet and security-group drift (`networkdrift`; aws v1.14.1 and v0.31.1 `pkg/cloudprovider/drift.go`,
`areSecurityGroupsDrifted`, `isSubnetDrifted`): the "NodeClaim Drift" cases of v1.14.1 `suite_test.go` and the
"Machine Drift" cases of v0.31.1 `machine_test.go` that concern them, each naming its line; Karpenter's order
(static, AMI, security groups, subnets); HEAD's changed terms resolved from `--subnets` / `--security-groups` (ids,
`*` tags, names, terms OR'd), and the exact `aws ec2 describe-…` calls named when they are missing; the CLI's JSON,
markdown and `--redact`; malformed answers and snapshots are exit 2 naming the file and the field."""

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
from karpenter_policy.cloud.networkselection import SUBNET_ID, Described, select, term_filter_sets
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import DriftRules, PolicySide
from karpenter_policy.commands.plan.ec2answers import read_ec2_answers
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.networkdrift import NetworkDriftRules
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import NODE_TEMPLATE, listing, node, pod, policies, provisioner, write
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node, v1_policies
from tests.profiles import deterministic

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
SUITE = "aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/suite_test.go"
MACHINE = "aws/karpenter-provider-aws v0.31.1 pkg/cloudprovider/machine_test.go"
SUBNET_1, SUBNET_2, FAKE_SUBNET = "subnet-0valid0000000001", "subnet-0valid0000000002", "subnet-0fake00000000003"
GROUP, FAKE_GROUP = "sg-0valid0000000000001", "sg-0fake00000000000002"


def dump(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def instances(subnet: str | None = SUBNET_1, groups: tuple[str, ...] = (GROUP,), instance: str = "i-n1",
              image: str = "ami-0amd000000000000a2") -> dict[str, Any]:
    """`aws ec2 describe-instances` of one instance (suite_test.go:788-802's, by default)."""
    item: dict[str, Any] = {"InstanceId": instance, "ImageId": image, "InstanceType": "m5.large",
                            "SecurityGroups": [{"GroupId": g, "GroupName": "x"} for g in groups]}
    if subnet is not None:
        item["SubnetId"] = subnet
    return {"Reservations": [{"Instances": [item]}]}


def subnets_json(*subnets: tuple[str, dict[str, str]]) -> dict[str, Any]:
    return {"Subnets": [{"SubnetId": i, "AvailabilityZone": "us-east-1a", "AvailableIpAddressCount": 100,
                         "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]} for i, tags in subnets]}


def groups_json(*groups: tuple[str, str, dict[str, str]]) -> dict[str, Any]:
    return {"SecurityGroups": [{"GroupId": i, "GroupName": n,
                                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]} for i, n, tags in groups]}


def imaged(node_name: str) -> dict[str, Any]:
    """The NodeClaim of `node_name` with the BeforeEach's `status.imageID` (suite_test.go:810: Karpenter's AMI check,
    which runs before subnets and security groups, errors without one)."""
    made = claim(node_name)
    made["status"]["imageID"] = "ami-0amd000000000000a2"
    return made


def side(*classes: str) -> PolicySide:
    made = [stored_form(yaml.safe_load(d)) for d in classes]
    pool = stored_form(yaml.safe_load(nodepool()))
    return PolicySide("x", {}, {}, {"default": pool}, {c["metadata"]["name"]: c for c in made})


def cluster_class(subnets: list[str], groups: list[str], document: str | None = None) -> dict[str, Any]:
    """The cluster's EC2NodeClass as `kubectl get ec2nodeclasses -o json` prints it, its status resolved
    (suite_test.go:744-756's `status.subnets` and `status.securityGroups`)."""
    made = stored_form(yaml.safe_load(document or node_class()))
    made["status"] = {"subnets": [{"id": s, "zone": "us-east-1a"} for s in subnets],
                      "securityGroups": [{"id": g, "name": "test-securitygroup"} for g in groups]}
    return made


def network_drift(tmp_path: Path, base: PolicySide, head: PolicySide, items: list[dict[str, Any]], *,
                  instances_answer: Any = None, subnets: Any = None,
                  groups: Any = None) -> tuple[dict[str, tuple[str, ...]], list[str], dict[str, tuple[str, ...]]]:
    """Each v1 node's drift reasons (all of them), the notes, and each node's fields, the answers given as files."""
    answers = read_ec2_answers(
        (dump(tmp_path, "instances.json", instances_answer),) if instances_answer is not None else (),
        subnets=(dump(tmp_path, "subnets.json", subnets),) if subnets is not None else (),
        security_groups=(dump(tmp_path, "groups.json", groups),) if groups is not None else ())
    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")
    assert snapshot.errors == []
    network = NetworkDriftRules(base, head, snapshot.node_classes, answers, {"n1": "i-n1", "n2": "i-n2"})
    rules = NodePoolDriftRules(base, head, START, snapshot.node_classes, network=network)
    fleet = fleet_of(snapshot)
    drifts = {name: rules(n) for name, n in fleet.nodes.items()}
    return ({n: d.reasons for n, d in drifts.items()}, rules.notes(), {n: d.fields for n, d in drifts.items()})


# --- Karpenter v1.14.1's cases: the cluster's status.subnets / status.securityGroups ------------------------------

#: (Go line, It, status.subnets, status.securityGroups, the instance's subnet and groups, the reason's kind or None)
SUITE_CASES = [
    (852, "should return drifted if the subnet is not valid", [SUBNET_1, SUBNET_2], [GROUP], FAKE_SUBNET, (GROUP,),
     "SubnetDrift"),
    (861, "should return an error if subnets are empty (no drift)", [], [GROUP], FAKE_SUBNET, (GROUP,), None),
    (868, "should not return drifted if the NodeClaim is valid", [SUBNET_1, SUBNET_2], [GROUP], SUBNET_1, (GROUP,),
     None),
    (873, "should return an error if the security groups are empty (no drift)", [SUBNET_1], [], SUBNET_1,
     (FAKE_GROUP,), None),
    (881, "should return drifted if the instance security groups doesn't match the discovered values",
     [SUBNET_1, SUBNET_2], [GROUP], SUBNET_1, (FAKE_GROUP,), "SecurityGroupDrift"),
    (891, "should return drifted if there are more instance security groups present than in the discovered values",
     [SUBNET_1, SUBNET_2], [GROUP], SUBNET_1, (FAKE_GROUP, GROUP), "SecurityGroupDrift"),
    (901, "should return drifted if more security groups are present than instance security groups then discovered "
     "from nodeclass", [SUBNET_1, SUBNET_2], [GROUP, FAKE_GROUP], SUBNET_1, (GROUP,), "SecurityGroupDrift"),
    (989, "should not return drifted if the security groups match", [SUBNET_1, SUBNET_2], [GROUP], SUBNET_1,
     (GROUP,), None),
]


@pytest.mark.parametrize(("line", "it", "status_subnets", "status_groups", "subnet", "groups", "kind"),
                         SUITE_CASES, ids=[f"suite_test.go:{c[0]}" for c in SUITE_CASES])
def test_karpenters_nodeclaim_drift_cases_from_the_clusters_status(
    tmp_path: Path, line: int, it: str, status_subnets: list[str], status_groups: list[str], subnet: str,
    groups: tuple[str, ...], kind: str | None,
) -> None:
    classes = side(node_class())
    items = [pool_node("n1"), imaged("n1"), cluster_class(status_subnets, status_groups)]

    reasons, notes, _ = network_drift(tmp_path, classes, classes, items, instances_answer=instances(subnet, groups))

    assert [r.split(":", 1)[0] for r in reasons["n1"]] == ([kind] if kind else []), f"{SUITE}:{line} {it}"
    if not status_subnets or not status_groups:
        assert notes and "Karpenter's drift check errors and drifts nothing" in notes[-1]


def test_both_kinds_drift_in_karpenters_order_after_static_and_ami_drift(tmp_path: Path) -> None:
    """suite_test.go:835 ("should return drifted if there are multiple drift reasons": static drift is returned
    first) and drift.go's order — static, AMI (`isAMIDrifted`), then security groups before subnets
    (`lo.FindOrElse([securitygroupDrifted, subnetDrifted, …])`): the plan lists every reason in that order."""
    ami = "ami-0amd000000000000a2"
    base = side(node_class())
    head = side(node_class(extra="  tags: {team: web}\n").replace('[{alias: "al2023@latest"}]',
                                                                  f"[{{id: {ami}}}]"))
    items = [pool_node("n1"), dict(claim("n1"), status={**claim("n1")["status"], "imageID": "ami-0fake00000000000a3"}),
             cluster_class([SUBNET_1], [GROUP], yaml.safe_dump(head.node_classes["default"]))]

    reasons, _, fields = network_drift(tmp_path, base, head, items,
                                       instances_answer=instances(FAKE_SUBNET, (FAKE_GROUP,)))

    kinds = [r.split(" ", 1)[0] for r in reasons["n1"]]
    static = len(kinds) - 3
    assert static >= 1 and kinds == ["EC2NodeClass"] * static + ["AMIDrift:", "SecurityGroupDrift:", "SubnetDrift:"]
    assert reasons["n1"][-2:] == (
        f"SecurityGroupDrift: the security groups of node n1 ({FAKE_GROUP}) are not EC2NodeClass default's "
        f"spec.securityGroupSelectorTerms (status.securityGroups: {GROUP})",
        f"SubnetDrift: subnet {FAKE_SUBNET} of node n1 is not among EC2NodeClass default's spec.subnetSelectorTerms "
        f"(status.subnets: {SUBNET_1})")
    assert fields["n1"][-2:] == (
        "EC2NodeClass default: SecurityGroupDrift (spec.securityGroupSelectorTerms (status.securityGroups))",
        "EC2NodeClass default: SubnetDrift (spec.subnetSelectorTerms (status.subnets))")


# --- HEAD changes the terms: resolved from the saved answers ---------------------------------------------------

PRIVATE = "  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod, tier: private}}]\n"
SUBNETS = subnets_json((SUBNET_1, {"karpenter.sh/discovery": "prod", "tier": "private"}),
                       (SUBNET_2, {"karpenter.sh/discovery": "prod", "tier": "public"}),
                       ("subnet-0valid0000000004", {"karpenter.sh/discovery": "prod", "tier": "private"}))


def private_class() -> str:
    return node_class().replace("  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]\n", PRIVATE)


def test_a_changed_subnet_selector_drifts_the_nodes_it_no_longer_selects(tmp_path: Path) -> None:
    base, head = side(node_class()), side(private_class())
    items = [pool_node("n1"), imaged("n1"), pool_node("n2"), imaged("n2"),
             cluster_class([SUBNET_1, SUBNET_2, "subnet-0valid0000000004"], [GROUP])]
    answer = {"Reservations": [*instances(SUBNET_1)["Reservations"],
                               *instances(SUBNET_2, instance="i-n2")["Reservations"]]}

    reasons, notes, fields = network_drift(tmp_path, base, head, items, instances_answer=answer, subnets=SUBNETS)

    assert reasons == {"n1": (), "n2": (
        f"SubnetDrift: EC2NodeClass default's spec.subnetSelectorTerms changed → subnet {SUBNET_2} of node n2 is no "
        f"longer selected (now: {SUBNET_1}, subnet-0valid0000000004)",)}
    assert fields["n2"] == ("EC2NodeClass default: SubnetDrift (spec.subnetSelectorTerms changed)",)
    assert notes == []


def test_a_changed_selector_without_answers_is_counted_with_the_exact_calls_to_run(tmp_path: Path) -> None:
    base, head = side(node_class()), side(private_class())
    items = [pool_node("n1"), imaged("n1"), pool_node("n2"), imaged("n2")]

    reasons, notes, _ = network_drift(tmp_path, base, head, items)

    assert reasons == {"n1": (), "n2": ()}
    assert notes == [
        "2 nodes of EC2NodeClass default: subnet drift not assessed: HEAD changes spec.subnetSelectorTerms, not "
        "resolved without --subnets",
        "2 nodes of EC2NodeClass default: subnet drift not assessed: its instance's network is not in --instances "
        "(`aws ec2 describe-instances --output json`, found by the node's spec.providerID)",
        "EC2NodeClass default's spec.subnetSelectorTerms: give `aws ec2 describe-subnets --filters "
        "Name=tag:karpenter.sh/discovery,Values=prod Name=tag:tier,Values=private --output json` as --subnets"]


def test_a_nodeclaim_without_image_id_is_not_judged_as_karpenters_ami_check_errors_first(tmp_path: Path) -> None:
    """suite_test.go:999 ("should error if the NodeClaim doesn't have ImageID"): `isAMIDrifted` errors and
    `isNodeClassDrifted` returns before the security groups and the subnet are compared — counted, no drift."""
    classes = side(node_class())
    items = [pool_node("n1"), claim("n1"), cluster_class([SUBNET_1], [GROUP])]

    reasons, notes, _ = network_drift(tmp_path, classes, classes, items,
                                      instances_answer=instances(FAKE_SUBNET, (FAKE_GROUP,)))

    assert reasons == {"n1": ()}
    assert notes[-1] == ("1 node of EC2NodeClass default: no NodeClaim status.imageID: Karpenter's AMI drift check "
                         "errors before security groups and subnets are compared: no drift of either")


def test_nothing_given_and_nothing_changed_says_nothing(tmp_path: Path) -> None:
    classes = side(node_class())
    reasons, notes, _ = network_drift(tmp_path, classes, classes, [pool_node("n1"), imaged("n1")])
    assert reasons == {"n1": ()} and notes == []


def test_security_group_terms_or_ids_names_and_star_tags(tmp_path: Path) -> None:
    """v1.14.1 `getFilterSets` (securitygroup.go): `id` terms gathered into one `group-id` filter, `name` terms into
    one `group-name` filter, a tags term its own set (`*`: `tag-key`); the calls' answers united."""
    terms = '  securityGroupSelectorTerms: [{id: sg-a}, {name: "nodes-*"}, {tags: {team: "*"}}]\n'
    head = side(node_class().replace("  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]\n",
                                     terms))
    groups = groups_json(("sg-a", "a", {}), ("sg-b", "nodes-web", {}), ("sg-c", "c", {"team": "x"}),
                         ("sg-d", "d", {"other": "x"}))
    items = [pool_node("n1"), imaged("n1"), pool_node("n2"), imaged("n2")]
    answer = {"Reservations": [*instances(groups=("sg-a", "sg-b", "sg-c"))["Reservations"],
                               *instances(groups=("sg-a", "sg-b"), instance="i-n2")["Reservations"]]}

    reasons, notes, _ = network_drift(tmp_path, side(node_class()), head, items, instances_answer=answer,
                                      groups=groups)

    assert reasons["n1"] == ()
    assert reasons["n2"] == (
        "SecurityGroupDrift: EC2NodeClass default's spec.securityGroupSelectorTerms changed → the security groups of "
        "node n2 (sg-a, sg-b) are not the ones selected (now: sg-a, sg-b, sg-c)",)
    assert any("subnet drift not assessed: HEAD keeps spec.subnetSelectorTerms" in n for n in notes)


@deterministic(200)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "*"]), min_size=1,
                                max_size=2), min_size=1, max_size=3),
       st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]), max_size=3),
                max_size=5))
def test_terms_select_the_union_of_what_each_term_selects(terms: list[dict[str, str]],
                                                          tagged: list[dict[str, str]]) -> None:
    """Terms are OR'd: what a list of tags terms selects is the union of what each selects alone, and a subnet is
    selected by a term exactly when it carries every tag of it (`*`: any value)."""
    subnets = [Described(f"subnet-{i}", "", tags) for i, tags in enumerate(tagged)]
    together = set(select(term_filter_sets([{"tags": t} for t in terms], SUBNET_ID), subnets, SUBNET_ID))
    alone = [set(select(term_filter_sets([{"tags": t}], SUBNET_ID), subnets, SUBNET_ID)) for t in terms]
    assert together == set().union(*alone)
    for term, selected in zip(terms, alone, strict=True):
        assert selected == {s.id for s in subnets
                            if all(k in s.tags and (v == "*" or s.tags[k] == v) for k, v in term.items())}


# --- Karpenter v0.31.1: an AWSNodeTemplate's selectors against the saved answers ---------------------------------


def v031_side(template: str = NODE_TEMPLATE) -> PolicySide:
    docs = [yaml.safe_load(d) for d in (provisioner(), template)]
    return PolicySide("x", {d["metadata"]["name"]: d for d in docs if d["kind"] == "Provisioner"},
                      {d["metadata"]["name"]: d for d in docs if d["kind"] == "AWSNodeTemplate"})


#: (Go line, It, the template's extra spec, the subnets and groups the selectors select (the BeforeEach's status,
#: machine_test.go:185-196: two subnets, one security group, answered by --subnets / --security-groups), the
#: instance's subnet and groups, the reason's kind or None)
MACHINE_CASES = [
    (283, "should return drifted if the subnet is not valid", "", [SUBNET_1, SUBNET_2], [GROUP], FAKE_SUBNET,
     (GROUP,), "SubnetDrift"),
    (289, "should return an error if AWSNodeTemplate subnets are empty (no drift)", "", [], [GROUP], FAKE_SUBNET,
     (GROUP,), None),
    (295, "should not return drifted if the machine is valid", "", [SUBNET_1, SUBNET_2], [GROUP], SUBNET_1, (GROUP,),
     None),
    (300, "should return an error if the AWSNodeTemplate securitygroup are empty (no drift)", "", [SUBNET_1], [],
     SUBNET_1, (FAKE_GROUP,), None),
    (308, "should return drifted if the instance securitygroup do not match the AWSNodeTemplateStatus", "",
     [SUBNET_1], [GROUP], SUBNET_1, (FAKE_GROUP,), "SecurityGroupDrift"),
    (315, "should return drifted if there are more instance securitygroups are present than AWSNodeTemplate Status",
     "", [SUBNET_1], [GROUP], SUBNET_1, (FAKE_GROUP, GROUP), "SecurityGroupDrift"),
    (322, "should return drifted if more AWSNodeTemplate securitygroups are present than instance securitygroups",
     "", [SUBNET_1], [GROUP, FAKE_GROUP], SUBNET_1, (GROUP,), "SecurityGroupDrift"),
    (338, "should not return drifted if launchTemplateName is defined", "launchTemplate", [SUBNET_1], [],
     SUBNET_1, (FAKE_GROUP,), None),
    (346, "should not return drifted if the securitygroups match", "", [SUBNET_1, SUBNET_2], [GROUP], SUBNET_1,
     (GROUP,), None),
]


@pytest.mark.parametrize(("line", "it", "extra", "selected_subnets", "selected_groups", "subnet", "groups", "kind"),
                         MACHINE_CASES, ids=[f"machine_test.go:{c[0]}" for c in MACHINE_CASES])
def test_karpenters_machine_drift_cases_from_saved_answers(
    tmp_path: Path, line: int, it: str, extra: str, selected_subnets: list[str], selected_groups: list[str],
    subnet: str, groups: tuple[str, ...], kind: str | None,
) -> None:
    template = NODE_TEMPLATE
    if extra == "launchTemplate":
        template = template.replace("  securityGroupSelector: {karpenter.sh/discovery: prod}\n",
                                    "  launchTemplate: validLaunchTemplateName\n")
    head = v031_side(template)
    prod = {"karpenter.sh/discovery": "prod"}
    described_subnets = [(i, prod if i in selected_subnets else {}) for i in (SUBNET_1, SUBNET_2, FAKE_SUBNET)]
    described_groups = [(i, "g", prod if i in selected_groups else {}) for i in (GROUP, FAKE_GROUP)]
    answers = read_ec2_answers(
        (dump(tmp_path, "i.json", instances(subnet, groups)),),
        subnets=(dump(tmp_path, "s.json", subnets_json(*described_subnets)),),
        security_groups=(dump(tmp_path, "g.json", groups_json(*described_groups)),))
    network = NetworkDriftRules(head, head, [], answers, {"n1": "i-n1"})
    rules = DriftRules(head, head, START, network=network)

    reasons = rules(fleet_of(read_snapshot(json.dumps(listing(node("n1"))).encode(), "s.json")).nodes["n1"]).reasons

    assert [r.split(":", 1)[0] for r in reasons] == ([kind] if kind else []), f"{MACHINE}:{line} {it}"
    if not selected_subnets or (not selected_groups and not extra):
        assert "Karpenter's drift check errors and drifts nothing" in network.notes()[-1]


def test_a_changed_template_selector_resolves_against_the_answers_and_names_the_field(tmp_path: Path) -> None:
    base = v031_side()
    head = v031_side(NODE_TEMPLATE.replace("subnetSelector: {karpenter.sh/discovery: prod}",
                                           "subnetSelector: {karpenter.sh/discovery: prod, tier: 'private,intra'}"))
    answers = read_ec2_answers((dump(tmp_path, "i.json", instances(SUBNET_2)),),
                               subnets=(dump(tmp_path, "s.json", SUBNETS),))
    network = NetworkDriftRules(base, head, [], answers, {"n1": "i-n1"})
    rules = DriftRules(base, head, START, network=network)

    drift = rules(fleet_of(read_snapshot(json.dumps(listing(node("n1"))).encode(), "s.json")).nodes["n1"])

    assert drift.reasons == (
        f"SubnetDrift: AWSNodeTemplate default's spec.subnetSelector changed → subnet {SUBNET_2} of node n1 is no "
        f"longer selected (now: {SUBNET_1}, subnet-0valid0000000004)",)
    assert network.notes() == [
        "1 node of AWSNodeTemplate default: security-group drift not assessed: HEAD keeps spec.securityGroupSelector, "
        "not resolved without --security-groups",
        "AWSNodeTemplate default's spec.securityGroupSelector: give `aws ec2 describe-security-groups --filters "
        "Name=tag:karpenter.sh/discovery,Values=prod --output json` as --security-groups"]


def test_drift_disabled_leaves_v031_network_drift_alone(tmp_path: Path) -> None:
    head = v031_side()
    answers = read_ec2_answers((dump(tmp_path, "i.json", instances(FAKE_SUBNET)),),
                               subnets=(dump(tmp_path, "s.json", SUBNETS),))
    rules = DriftRules(head, head, START, drift_enabled=False,
                       network=NetworkDriftRules(head, head, [], answers, {"n1": "i-n1"}))
    node_n1 = fleet_of(read_snapshot(json.dumps(listing(node("n1"))).encode(), "s.json")).nodes["n1"]
    assert rules(node_n1).reasons == ()


# --- the CLI ---------------------------------------------------------------------------------------------------


def plan(tmp_path: Path, output: str = "json", cluster: tuple[dict[str, Any], ...] = (), **options: Any) -> Any:
    base = v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]'), node_classes=(node_class(),))
    head = v1_policies(tmp_path / "head", nodepool(budgets='[{nodes: "1"}]'), node_classes=(private_class(),))
    items = [dict(pool_node("n1"), spec={"providerID": "aws:///us-east-1a/i-n1"}), imaged("n1"),
             pod("web-1", "n1", "web"),
             dict(pool_node("n2"), spec={"providerID": "aws:///us-east-1a/i-n2"}), imaged("n2"),
             pod("web-2", "n2", "web"), *cluster]
    return plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start="2026-11-30T09:00:00Z",
                                    output=output, base=base, head=head, consolidation_timeout="0s", **options),
                        load_catalog())


def answers(tmp_path: Path) -> dict[str, tuple[str, ...]]:
    both = {"Reservations": [*instances(SUBNET_1)["Reservations"],
                             *instances(SUBNET_2, instance="i-n2")["Reservations"]]}
    return {"instances": (dump(tmp_path, "i.json", both),), "subnets": (dump(tmp_path, "sn.json", SUBNETS),)}


def test_the_plan_json_markdown_and_text_show_the_subnet_drift(tmp_path: Path) -> None:
    result = plan(tmp_path, **answers(tmp_path))
    markdown = plan(tmp_path, "markdown", **answers(tmp_path))
    text = plan(tmp_path, "text", **answers(tmp_path))

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    nodes = {n["name"]: n for n in document["nodes"]}
    reason = (f"SubnetDrift: EC2NodeClass default's spec.subnetSelectorTerms changed → subnet {SUBNET_2} of node n2 "
              f"is no longer selected (now: {SUBNET_1}, subnet-0valid0000000004)")
    assert nodes["n2"]["drifted"] and nodes["n2"]["reasons"] == [reason] and nodes["n2"]["wave"] is not None
    assert not nodes["n1"]["drifted"]
    field = "EC2NodeClass default: SubnetDrift (spec.subnetSelectorTerms changed)"
    assert [d["field"] for d in document["drift"]] == [field]
    assert f"| `{field}` | 1 |" in markdown.stdout
    assert f"  {field} → 1 node drift" in text.stdout


def test_redact_names_the_subnets_by_a_stable_hash(tmp_path: Path) -> None:
    result = plan(tmp_path, redact=True, **answers(tmp_path))
    again = plan(tmp_path, redact=True, **answers(tmp_path))

    assert result.stdout == again.stdout
    assert SUBNET_2 not in result.stdout and SUBNET_1 not in result.stdout
    reasons = [r for n in json.loads(result.stdout)["nodes"] for r in n["reasons"]]
    assert reasons == [f"SubnetDrift: EC2NodeClass default's spec.subnetSelectorTerms changed → subnet "
                       f"{hashed('subnet', SUBNET_2)} of node {hashed('node', 'n2')} is no longer selected (now: "
                       f"{hashed('subnet', SUBNET_1)}, {hashed('subnet', 'subnet-0valid0000000004')})"]


@pytest.mark.parametrize(("flag", "data", "message"), [
    ("subnets", {"Subnets": [{"Tags": []}]}, "bad.json: Subnets[0].SubnetId: missing"),
    ("subnets", {"Vpcs": []}, "bad.json: not what `aws ec2 describe-subnets --output json` prints (no Subnets list)"),
    ("security_groups", {"SecurityGroups": [{"GroupId": "sg-1", "Tags": [{"Key": 7}]}]},
     "bad.json: SecurityGroups[0].Tags[0].Key: not a string: 7"),
    ("instances", {"Reservations": [{"Instances": [{"InstanceId": "i-1", "ImageId": "ami-1",
                                                     "SecurityGroups": [{"GroupName": "x"}]}]}]},
     "bad.json: Reservations[0].Instances[0].SecurityGroups[0].GroupId: missing"),
    ("instances", {"Reservations": [{"Instances": [{"InstanceId": "i-1", "ImageId": "ami-1", "SubnetId": 3}]}]},
     "bad.json: Reservations[0].Instances[0].SubnetId: not a string: 3"),
])
def test_a_malformed_answer_is_exit_2_naming_the_file_and_field(tmp_path: Path, flag: str, data: Any,
                                                                message: str) -> None:
    result = plan(tmp_path, **{flag: (dump(tmp_path, "bad.json", data),)})
    assert result.exit_code == 2 and result.stdout == ""
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("status", "message"), [
    ({"subnets": "subnet-1"}, "status.subnets is not a list: 'subnet-1'"),
    ({"securityGroups": [{"name": "x"}]}, "status.securityGroups[0] has no id"),
])
def test_a_malformed_cluster_class_status_is_a_snapshot_problem(status: dict[str, Any], message: str) -> None:
    made = stored_form(yaml.safe_load(node_class()))
    made["status"] = status
    snapshot = read_snapshot(json.dumps(listing(made)).encode(), "s.json")
    assert any(message in str(p) for p in snapshot.errors), snapshot.errors


def test_redact_keeps_the_cluster_class_status_that_decides(tmp_path: Path) -> None:
    """The cluster's EC2NodeClass survives `--redact` (its name, terms and resolved status only): the security groups
    its status lists still decide, and the verdicts are the unredacted plan's."""
    status = cluster_class([SUBNET_1], [FAKE_GROUP], private_class())
    plain = json.loads(plan(tmp_path, cluster=(status,), **answers(tmp_path)).stdout)
    redacted = plan(tmp_path, cluster=(status,), redact=True, **answers(tmp_path))

    hidden = json.loads(redacted.stdout)
    names = {hashed("node", n["name"]): n for n in plain["nodes"]}
    assert {n["name"]: (n["drifted"], len(n["reasons"])) for n in hidden["nodes"]} == {
        name: (n["drifted"], len(n["reasons"])) for name, n in names.items()}
    assert any(r.startswith("SecurityGroupDrift") and f"(status.securityGroups: {hashed('sg', FAKE_GROUP)})" in r
               for n in hidden["nodes"] for r in n["reasons"])
    assert FAKE_GROUP not in redacted.stdout and GROUP not in redacted.stdout


def test_the_v031_plan_drifts_a_node_its_templates_new_subnet_selector_leaves(tmp_path: Path) -> None:
    """The CLI on Provisioner nodes: HEAD's AWSNodeTemplate narrows `subnetSelector`; the node's instance sits in a
    subnet it no longer selects (--instances, --subnets) — drifted, in a wave, the reason naming both sides."""
    base = policies(tmp_path / "base", provisioner())
    head_dir = tmp_path / "head"
    head_dir.mkdir()
    (head_dir / "policies.yaml").write_text("---\n".join([provisioner(), NODE_TEMPLATE.replace(
        "subnetSelector: {karpenter.sh/discovery: prod}", "subnetSelector: {tier: private}")]))
    items = [dict(node("n1"), spec={"providerID": "aws:///us-east-1a/i-n1"}), pod("web-1", "n1", "web")]
    result = plan_command(PlanOptions(
        snapshot=(write(tmp_path / "s.json", *items),), start="2026-11-30T09:00:00Z", output="json", base=base,
        head=str(head_dir), consolidation_timeout="0s", instances=(dump(tmp_path, "i.json", instances(SUBNET_2)),),
        subnets=(dump(tmp_path, "sn.json", SUBNETS),)), load_catalog())

    assert result.exit_code == 0, result.stderr
    (n1,) = json.loads(result.stdout)["nodes"]
    assert n1["drifted"] and n1["wave"] is not None
    assert n1["reasons"] == [f"SubnetDrift: AWSNodeTemplate default's spec.subnetSelector changed → subnet {SUBNET_2} "
                             f"of node n1 is no longer selected (now: {SUBNET_1}, subnet-0valid0000000004)"]
