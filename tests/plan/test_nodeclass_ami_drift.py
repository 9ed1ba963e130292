"""AMI drift of Karpenter v1 NodeClaims from the EC2 and SSM answers the user saved (`amidrift` with
`ec2answers`; aws v1.14.1 `pkg/cloudprovider/drift.go` `isAMIDrifted`): HEAD's EC2NodeClass's `amiSelectorTerms`
resolved as v1.14.1's AMI provider does — the "NodeClaim Drift" cases of `pkg/cloudprovider/suite_test.go` ported
(each naming its line) with the images and terms of its BeforeEach; a move of the alias `al2023@latest` to
`al2023@v20241011` drifts the nodes on the old release, naming both AMIs and the parameter; a node without a
NodeClaim's `status.imageID` is judged by its instance's `ImageId`; missing answers are counted and named, never a
silent "no drift"; the plan's JSON and markdown show the reason; `--redact` names no AMI; a malformed answer is exit
2 naming the file and the field."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.amidrift import AmiDriftRules
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.ec2answers import read_ec2_answers
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import listing, pod, write
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node, v1_policies

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
SUITE = "aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/suite_test.go"
ARM, AMD, FAKE = "ami-0arm000000000000a1", "ami-0amd000000000000a2", "ami-0fake00000000000a3"
OLD, NEW = "ami-0old000000000000b1", "ami-0new000000000000b2"
X86 = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64"
ARM64 = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64"
LATEST = f"{X86}/standard/recommended/image_id"
PINNED = f"{X86}/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20241011/image_id"


def image(image_id: str, arch: str = "x86_64", tags: dict[str, str] | None = None,
          created: str = "2026-10-01T00:00:00.000Z", name: str = "eks-node") -> dict[str, Any]:
    return {"ImageId": image_id, "Architecture": arch, "CreationDate": created, "Name": name, "State": "available",
            "OwnerId": "111122223333", "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()]}


#: suite_test.go:676-703: the images its "NodeClaim Drift" BeforeEach answers DescribeImages with
SUITE_IMAGES = {"Images": [image(ARM, "arm64", {"ami-key-1": "ami-value-1"}),
                           image(AMD, "x86_64", {"ami-key-2": "ami-value-2"})]}
#: terms selecting them, as the BeforeEach's status.amis holds them (one per architecture)
SUITE_TERMS = "[{tags: {ami-key-1: ami-value-1}}, {tags: {ami-key-2: ami-value-2}}]"


#: the images of both releases, as `aws ec2 describe-images --image-ids` prints them
BOTH = {"Images": [image(OLD, created="2026-09-01T00:00:00.000Z"), image(NEW)]}


def al2023_parameters(x86_standard: str, *, pinned: bool = False) -> dict[str, Any]:
    """What `aws ssm get-parameters --names <the five al2023 names>` prints when only x86 standard exists."""
    names = [f"{X86}/{v}/" + (f"amazon-eks-node-al2023-x86_64-{v}-1.31-v20241011" if pinned else "recommended")
             + "/image_id" for v in ("standard", "nvidia", "neuron")]
    names += [f"{ARM64}/{v}/" + (f"amazon-eks-node-al2023-arm64-{v}-1.31-v20241011" if pinned else "recommended")
              + "/image_id" for v in ("standard", "nvidia")]
    return {"Parameters": [{"Name": names[0], "Type": "String", "Value": x86_standard}],
            "InvalidParameters": names[1:]}


def terms_class(terms: str, name: str = "default") -> str:
    return node_class(name).replace('amiSelectorTerms: [{alias: "al2023@latest"}]',
                                    f"amiFamily: AL2023\n  amiSelectorTerms: {terms}")


def side(*classes: str) -> PolicySide:
    made = [stored_form(yaml.safe_load(d)) for d in classes]
    pool = stored_form(yaml.safe_load(nodepool()))
    return PolicySide("x", {}, {}, {"default": pool}, {c["metadata"]["name"]: c for c in made})


def dump(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def with_image(item: dict[str, Any], image_id: str | None) -> dict[str, Any]:
    if image_id is not None:
        item["status"]["imageID"] = image_id
    return item


def ami_drift(tmp_path: Path, base: PolicySide, head: PolicySide, items: list[dict[str, Any]], *,
              images: Any = None, ssm: Any = None, instances: Any = None,
              instance_ids: dict[str, str] | None = None) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Each node's AMIDrift reasons and the notes, the answers given as files."""
    answers = read_ec2_answers(
        (dump(tmp_path, "instances.json", instances),) if instances is not None else (),
        (dump(tmp_path, "images.json", images),) if images is not None else (),
        (dump(tmp_path, "ssm.json", ssm),) if ssm is not None else ())
    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")
    assert snapshot.errors == []
    ami = AmiDriftRules(base, head, snapshot.node_classes, answers, load_catalog(), instance_ids or {}, START)
    rules = NodePoolDriftRules(base, head, START, snapshot.node_classes, ami=ami)
    fleet = fleet_of(snapshot)
    reasons = {name: tuple(r for r in rules(n).reasons if r.startswith("AMIDrift")) for name, n in fleet.nodes.items()}
    return reasons, rules.notes()


#: (Go line, It, the NodeClaim's instance type, its status.imageID, AMIDrift expected)
SUITE_CASES = [
    (810, "BeforeEach: the NodeClaim runs the amd64 AMI of its amd64 type", "m5.large", AMD, False),
    (829, "should return drifted if the AMI is not valid", "m5.large", FAKE, True),
    (868, "should not return drifted if the NodeClaim is valid", "m5.large", AMD, False),
    (1017, "should return drifted if the AMI no longer matches the existing NodeClaims instance type (the arm64 "
           "AMI on an amd64 type)", "m5.large", ARM, True),
    (0, "(the arm64 type's AMI is the arm64 one)", "m6g.large", ARM, False),
]


@pytest.mark.parametrize(("line", "it", "instance_type", "running", "drifts"), SUITE_CASES,
                         ids=[f"suite_test.go:{c[0]}" for c in SUITE_CASES])
def test_karpenters_nodeclaim_drift_cases_from_saved_answers(tmp_path: Path, line: int, it: str,
                                                             instance_type: str, running: str, drifts: bool) -> None:
    classes = side(terms_class(SUITE_TERMS))
    items = [pool_node("n1", instance_type=instance_type),
             with_image(claim("n1", instance_type=instance_type, labels={
                 "kubernetes.io/arch": "arm64" if instance_type.startswith("m6g") else "amd64"}), running)]

    reasons, _ = ami_drift(tmp_path, classes, classes, items, images=SUITE_IMAGES)

    assert bool(reasons["n1"]) == drifts, f"{SUITE}:{line} {it}: {reasons}"
    if drifts:
        assert reasons["n1"][0] == (
            f"AMIDrift: NodeClaim default-n1's status.imageID {running} is not {AMD}, the AMI EC2NodeClass default's "
            f"spec.amiSelectorTerms resolve to for m5.large (tags ami-key-2=ami-value-2)")


def test_a_nodeclaim_without_image_id_is_not_assessed_whatever_its_instance_runs(tmp_path: Path) -> None:
    """suite_test.go:999 ("should error if the NodeClaim doesn't have ImageID"): Karpenter's `isAMIDrifted` errors
    (drift.go:98, "no ami ID found in nodeClaim status") and decides nothing, so the plan gives no verdict either —
    not even from the instance's ImageId in --instances (the old plan drifted it by that) —: the node is counted as
    not assessed, and the note says how to get the answer. A node whose NodeClaim the snapshot lacks is still read by
    its instance (the id the NodeClaim's status copies at launch)."""
    classes = side(terms_class(SUITE_TERMS))
    items = [pool_node("n1"), with_image(claim("n1"), None), pool_node("n2")]

    instances = {"Reservations": [{"Instances": [{"InstanceId": "i-n1", "ImageId": FAKE},
                                                 {"InstanceId": "i-n2", "ImageId": FAKE}]}]}
    with_instances, notes = ami_drift(tmp_path, classes, classes, items, images=SUITE_IMAGES, instances=instances,
                                      instance_ids={"n1": "i-n1", "n2": "i-n2"})
    without, notes_without = ami_drift(tmp_path, classes, classes, items[:2], images=SUITE_IMAGES)

    assert with_instances["n1"] == () and without["n1"] == ()
    assert with_instances["n2"] == (
        f"AMIDrift: node n2's instance (--instances) {FAKE} is not {AMD}, the AMI EC2NodeClass default's "
        "spec.amiSelectorTerms resolve to for m5.large (tags ami-key-2=ami-value-2)",)
    expected = ("1 node of EC2NodeClass default: AMI drift not assessed: its NodeClaim has no status.imageID: "
                "Karpenter's check errors (\"no ami ID found in nodeClaim status\") and decides nothing until the "
                "NodeClaim is launched (snapshot it again: `kubectl get nodeclaims -o json`)")
    assert notes == notes_without == [expected]


def test_a_nodeclaim_without_image_id_is_not_assessed_by_id_terms_or_the_clusters_status(tmp_path: Path) -> None:
    """The same Karpenter error (drift.go:98) without saved answers: HEAD's class of id terms, or the snapshot's
    EC2NodeClass `status.amis`, decides nothing for a NodeClaim without `status.imageID` — counted, not "no drift"
    as the old plan said silently."""
    classes = side(terms_class([{"id": AMD}]))
    items = [pool_node("n1"), with_image(claim("n1"), None)]

    reasons, notes = ami_drift(tmp_path, classes, classes, items)

    assert reasons["n1"] == ()
    assert len(notes) == 1 and notes[0].startswith(
        "1 node of EC2NodeClass default: AMI drift not assessed: its NodeClaim has no status.imageID")


def test_pinning_the_alias_drifts_the_nodes_on_the_latest_release_naming_both_amis_and_the_parameter(
    tmp_path: Path
) -> None:
    base, head = side(node_class(alias="al2023@latest")), side(node_class(alias="al2023@v20241011"))
    items = [pool_node("n1"), with_image(claim("n1"), NEW), pool_node("n2"), with_image(claim("n2"), OLD)]

    reasons, notes = ami_drift(tmp_path, base, head, items, ssm=al2023_parameters(OLD, pinned=True), images=BOTH)

    assert reasons == {"n1": (
        f"AMIDrift: NodeClaim default-n1's status.imageID {NEW} is not {OLD}, the AMI EC2NodeClass default's "
        f"spec.amiSelectorTerms resolve to for m5.large (alias al2023@v20241011 (SSM {PINNED}))",), "n2": ()}
    assert notes == []


def test_a_new_release_of_latest_drifts_the_nodes_on_the_old_one(tmp_path: Path) -> None:
    classes = side(node_class(alias="al2023@latest"))
    items = [pool_node("n1"), with_image(claim("n1"), OLD)]

    reasons, _ = ami_drift(tmp_path, classes, classes, items, ssm=al2023_parameters(NEW), images=BOTH)

    assert reasons["n1"] and f"is not {NEW}" in reasons["n1"][0] and f"(SSM {LATEST})" in reasons["n1"][0]


def test_an_alias_whose_image_is_not_in_images_is_not_assessed_and_the_note_names_the_image(tmp_path: Path) -> None:
    """v1.14.1 describes the images an alias's SSM parameters name (ami.go `amis`: DescribeImages on the values)
    before it keeps one — available or not, deprecated or not. With the parameter saved but its image missing from
    --images (or no --images at all) the plan cannot tell either: not assessed, counted, the note gives the
    describe-images command (the old plan took the image as available and not deprecated, and drifted `n1`)."""
    classes = side(node_class(alias="al2023@latest"))
    items = [pool_node("n1"), with_image(claim("n1"), OLD)]

    missing, notes = ami_drift(tmp_path, classes, classes, items, ssm=al2023_parameters(NEW),
                               images={"Images": [image(OLD)]})
    none, notes_none = ami_drift(tmp_path, classes, classes, items, ssm=al2023_parameters(NEW))

    assert missing["n1"] == () and none["n1"] == ()
    expected = ["1 node of EC2NodeClass default: AMI drift not assessed: its terms' images are not in --images",
                f"EC2NodeClass default's spec.amiSelectorTerms: give `aws ec2 describe-images --image-ids {NEW} "
                "--output json` as --images"]
    assert notes == notes_none == expected


def test_missing_parameters_are_counted_and_the_note_names_them_exactly(tmp_path: Path) -> None:
    base, head = side(node_class(alias="al2023@latest")), side(node_class(alias="al2023@v20241011"))
    items = [pool_node("n1"), with_image(claim("n1"), NEW), pool_node("n2"), with_image(claim("n2"), OLD)]
    # only the latest release's parameters were saved: the pinned ones are neither found nor known absent
    reasons, notes = ami_drift(tmp_path, base, head, items, ssm=al2023_parameters(NEW))

    assert reasons == {"n1": (), "n2": ()}
    pinned = sorted(
        [f"{X86}/{v}/amazon-eks-node-al2023-x86_64-{v}-1.31-v20241011/image_id" for v in ("standard", "nvidia",
                                                                                           "neuron")]
        + [f"{ARM64}/{v}/amazon-eks-node-al2023-arm64-{v}-1.31-v20241011/image_id" for v in ("standard", "nvidia")])
    assert notes == [
        "2 nodes of EC2NodeClass default: AMI drift not assessed: its terms' SSM parameters are not in "
        "--ssm-parameters",
        f"EC2NodeClass default's spec.amiSelectorTerms: give `aws ssm get-parameters --names {' '.join(pinned)} "
        "--output json` as --ssm-parameters"]


def test_name_and_owner_terms_need_images_and_select_the_newest(tmp_path: Path) -> None:
    classes = side(terms_class('[{name: "eks-node-*", owner: "111122223333"}]'))
    items = [pool_node("n1"), with_image(claim("n1"), OLD)]
    images = {"Images": [image(OLD, name="eks-node-1", created="2026-09-01T00:00:00Z"),
                         image(NEW, name="eks-node-2", created="2026-10-01T00:00:00Z"),
                         image(FAKE, name="other", created="2026-11-01T00:00:00Z")]}

    without, notes = ami_drift(tmp_path, classes, classes, items, instances={"Reservations": []})
    reasons, _ = ami_drift(tmp_path, classes, classes, items, images=images)

    assert without["n1"] == () and notes[0].endswith("its name, tags or owner terms need --images (`aws ec2 "
                                                     "describe-images --owners self amazon --output json`)")
    assert reasons["n1"] and f"{OLD} is not {NEW}" in reasons["n1"][0]


def test_an_ssm_parameter_term_resolves_through_the_saved_parameter(tmp_path: Path) -> None:
    classes = side(terms_class('[{ssmParameter: "/platform/eks/ami"}]'))
    items = [pool_node("n1"), with_image(claim("n1"), OLD)]

    reasons, notes = ami_drift(tmp_path, classes, classes, items, images={"Images": [image(NEW)]},
                               ssm={"Parameters": [{"Name": "/platform/eks/ami", "Value": NEW}]})
    missing, missing_notes = ami_drift(tmp_path, classes, classes, items, images={"Images": [image(NEW)]},
                                       ssm={"Parameters": []})

    assert reasons["n1"] and "(ssmParameter /platform/eks/ami)" in reasons["n1"][0] and notes == []
    assert missing["n1"] == () and "--names /platform/eks/ami --output json" in missing_notes[-1]


# --- the CLI -----------------------------------------------------------------------------------------------------


def plan(tmp_path: Path, output: str = "json", **options: Any) -> Any:
    base = v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]'),
                       node_classes=(node_class(alias="al2023@latest"),))
    head = v1_policies(tmp_path / "head", nodepool(budgets='[{nodes: "1"}]'),
                       node_classes=(node_class(alias="al2023@v20241011"),))
    items = [pool_node("n1"), with_image(claim("n1"), NEW), pod("web-1", "n1", "web"),
             pool_node("n2"), with_image(claim("n2"), OLD), pod("web-2", "n2", "web")]
    return plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start="2026-11-30T09:00:00Z",
                                    output=output, base=base, head=head, consolidation_timeout="0s", **options),
                        load_catalog())


def test_the_plan_json_and_markdown_show_the_alias_drift(tmp_path: Path) -> None:
    ssm = (dump(tmp_path, "ssm.json", al2023_parameters(OLD, pinned=True)),)
    images = (dump(tmp_path, "images.json", BOTH),)

    result = plan(tmp_path, ssm_parameters=ssm, images=images)
    markdown = plan(tmp_path, "markdown", ssm_parameters=ssm, images=images)

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    nodes = {n["name"]: n for n in document["nodes"]}
    assert nodes["n1"]["drifted"] and not nodes["n2"]["drifted"]
    assert nodes["n1"]["reasons"] == [
        f"AMIDrift: NodeClaim default-n1's status.imageID {NEW} is not {OLD}, the AMI EC2NodeClass default's "
        f"spec.amiSelectorTerms resolve to for m5.large (alias al2023@v20241011 (SSM {PINNED}))"]
    field = ("EC2NodeClass default: AMIDrift (not the AMI spec.amiSelectorTerms (alias al2023@v20241011) resolve "
             "to)")
    assert [d["field"] for d in document["drift"]] == [field]
    assert markdown.exit_code == 0 and f"| `{field}` | 1 |" in markdown.stdout


def test_the_plan_without_answers_notes_the_unassessed_alias_change(tmp_path: Path) -> None:
    document = json.loads(plan(tmp_path).stdout)
    assert not any(n["drifted"] for n in document["nodes"])
    assert any("HEAD changes spec.amiSelectorTerms" in note and "--ssm-parameters" in note
               for note in document["notes"])


def test_redact_finds_the_drift_and_names_no_ami(tmp_path: Path) -> None:
    result = plan(tmp_path, ssm_parameters=(dump(tmp_path, "ssm.json", al2023_parameters(OLD, pinned=True)),),
                  images=(dump(tmp_path, "images.json", BOTH),), redact=True)
    document = json.loads(result.stdout)
    assert sum(n["drifted"] for n in document["nodes"]) == 1
    for secret in (NEW, OLD):
        assert secret not in result.stdout


@pytest.mark.parametrize(("flag", "data", "message"), [
    ("ssm_parameters", {"Parameters": [], "InvalidParameters": [7]}, "bad.json: InvalidParameters[0]: not a parameter "
     "name: 7"),
    ("ssm_parameters", {"Parameters": [], "InvalidParameters": "x"}, 'bad.json: InvalidParameters: not a list: "x"'),
    ("images", {"Images": [dict(image(NEW), DeprecationTime=5)]}, "bad.json: Images[0].DeprecationTime: not a "
     "string: 5"),
])
def test_a_malformed_answer_is_exit_2_naming_the_file_and_field(tmp_path: Path, flag: str, data: Any,
                                                                message: str) -> None:
    result = plan(tmp_path, **{flag: (dump(tmp_path, "bad.json", data),)})
    assert result.exit_code == 2 and result.stdout == ""
    assert message in result.stderr and "Traceback" not in result.stderr


def test_where_the_answers_cannot_tell_the_clusters_resolved_amis_still_do(tmp_path: Path) -> None:
    """Only v0.31's --instances given: the alias's parameters are missing, but the snapshot's EC2NodeClass resolved
    the very terms HEAD keeps — its status.amis decides, and no note calls the node unassessed."""
    classes = side(node_class(alias="al2023@latest"))
    resolved = stored_form(yaml.safe_load(node_class(alias="al2023@latest")))
    resolved["status"] = {"amis": [{"id": NEW, "requirements": [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}
    items = [pool_node("n1"), with_image(claim("n1"), OLD), resolved]

    reasons, notes = ami_drift(tmp_path, classes, classes, items, instances={"Reservations": []})
    unresolved, unresolved_notes = ami_drift(tmp_path, classes, classes, items[:2], instances={"Reservations": []})

    assert reasons["n1"] and "status.amis maps to its instance type in the snapshot" in reasons["n1"][0]
    assert notes == []
    assert unresolved["n1"] == () and unresolved_notes[0] == (
        "1 node of EC2NodeClass default: AMI drift not assessed: its terms' SSM parameters are not in "
        "--ssm-parameters")
    assert "/<kubernetes-version>/amazon-linux-2023/" in unresolved_notes[1]
