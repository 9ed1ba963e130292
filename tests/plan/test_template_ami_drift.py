"""Karpenter v0.31 AMI drift from the EC2 and SSM answers the user saved (`plan --instances/--images/--ssm-parameters`;
aws v0.31.1 `pkg/cloudprovider/drift.go` `isAMIDrifted`): the "Machine Drift" cases of aws v0.31.1
`pkg/cloudprovider/machine_test.go` that concern the AMI (v0.31.1 keeps them there, not in suite_test.go), as data
naming their line; an `amiSelector` resolved as v0.31.1 resolves it (newest image per architecture, name
wildcards, owners, tags); the CLI with each file; a malformed file is a clear error (exit 2); `--redact` still
finds the drift and names neither instance nor AMI; and without any file the plan is what it was."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cli import main
from karpenter_policy.cloud.amiselection import Image, image_for, newest_first, selector_matches
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import DriftRules, PolicySide
from karpenter_policy.commands.plan.ec2answers import read_ec2_answers
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import read_snapshot
from karpenter_policy.commands.plan.templateamidrift import TemplateAmiDrift
from tests.plan.snapshots import NODE_TEMPLATE, listing, node, provisioner, write
from tests.profiles import deterministic

START = "2026-11-30T09:00:00Z"
SUITE = "aws/karpenter-provider-aws v0.31.1 pkg/cloudprovider/machine_test.go"
VALID, OTHER = "ami-0valid00000000001", "ami-0other00000000002"
NEWER, ARM = "ami-0newer00000000003", "ami-0arm000000000004"
INSTANCE = "i-0aaaaaaaaaaaaaaa1"
#: The SSM parameter of AL2's default image for an m5.large under Kubernetes 1.28 (`default_parameter`).
AL2_M5 = "/aws/service/eks/optimized-ami/1.28/amazon-linux-2/recommended/image_id"
def template(extra: str = "") -> str:
    return NODE_TEMPLATE + extra


def with_instance(item: dict[str, Any], instance: str | None = INSTANCE) -> dict[str, Any]:
    if instance is not None:
        item["spec"]["providerID"] = f"aws:///us-east-1a/{instance}"
    return item


def instances_json(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"Reservations": [{"Instances": [{"InstanceId": i, "ImageId": a, "InstanceType": "m5.large"}
                                            for i, a in pairs]}]}


def image_json(image: str, arch: str = "x86_64", created: str = "2026-10-01T00:00:00.000Z", name: str = "eks-node",
               tags: dict[str, str] | None = None, owner: str = "111122223333") -> dict[str, Any]:
    return {"ImageId": image, "Architecture": arch, "CreationDate": created, "Name": name, "OwnerId": owner,
            "State": "available", "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()]}


def dump(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def side(*documents: str) -> PolicySide:
    docs = [yaml.safe_load(d) for d in documents]
    return PolicySide("x", {d["metadata"]["name"]: d for d in docs if d["kind"] == "Provisioner"},
                      {d["metadata"]["name"]: d for d in docs if d["kind"] == "AWSNodeTemplate"})


def ami_reasons(tmp_path: Path, head: PolicySide, item: dict[str, Any], *, instances: Any = None,
                images: Any = None, parameters: Any = None) -> tuple[list[str], list[str]]:
    """The AMIDrift reasons DriftRules gives the snapshot's one node, and the AMI check's notes."""
    answers = read_ec2_answers(
        [dump(tmp_path, "i.json", instances)] if instances is not None else [],
        [dump(tmp_path, "im.json", images)] if images is not None else [],
        [dump(tmp_path, "p.json", parameters)] if parameters is not None else [],
    )
    snapshot = read_snapshot(json.dumps(listing(item)).encode(), "s.json")
    fleet = fleet_of(snapshot)
    ids = {n["metadata"]["name"]: n["spec"]["providerID"].rsplit("/", 1)[-1]
           for n in snapshot.nodes if "providerID" in n["spec"]}
    ami = TemplateAmiDrift(head, answers, load_catalog(), ids)
    rules = DriftRules(head, head, dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC), ami=ami)
    drift = rules(next(iter(fleet.nodes.values())))
    return [r for r in drift.reasons if r.startswith("AMIDrift")], ami.notes()


SSM = {"Parameters": [{"Name": AL2_M5, "Value": VALID, "Type": "String"}], "InvalidParameters": []}

#: (Go line, what it says, HEAD's documents, the node, its instance's ImageId (None: not in --instances), drifts)
MACHINE_DRIFT_CASES: list[tuple[int, str, tuple[str, ...], dict[str, Any], str | None, bool]] = [
    (243, "should not fail if node template does not exist", (provisioner(),),
     with_instance(node("n1")), OTHER, False),
    (249, "should return false if providerRef is not defined",
     (provisioner().replace("  providerRef: {name: default}\n", ""), template()), with_instance(node("n1")), OTHER,
     False),
    (262, "should return drifted if the AMI is not valid", (provisioner(), template()), with_instance(node("n1")),
     OTHER, True),
    (295, "should not return drifted if the machine is valid", (provisioner(), template()),
     with_instance(node("n1")), VALID, False),
    (338, "should not return drifted if launchTemplateName is defined",
     (provisioner(), template("  launchTemplate: my-template\n")), with_instance(node("n1")), OTHER, False),
    (351, "should error if the machine doesn't have the instance-type label (no drift)", (provisioner(), template()),
     with_instance(node("n1", instance_type="")), OTHER, False),
    (358, "should error drift if machine doesn't have provider id (no drift)", (provisioner(), template()),
     with_instance(node("n1"), None), OTHER, False),
    (364, "should error drift if the underlying machine does not exist (no drift)", (provisioner(), template()),
     with_instance(node("n1")), None, False),
]


@pytest.mark.parametrize(("line", "says", "head", "item", "image", "drifts"), MACHINE_DRIFT_CASES,
                         ids=[f"machine_test.go:{c[0]}" for c in MACHINE_DRIFT_CASES])
def test_karpenters_machine_drift_cases(tmp_path: Path, line: int, says: str, head: tuple[str, ...],
                                        item: dict[str, Any], image: str | None, drifts: bool) -> None:
    """BeforeEach (machine_test.go:167): SSM answers the default AMI, the instance runs it."""
    instances = instances_json((INSTANCE, image)) if image is not None else instances_json()
    reasons, _ = ami_reasons(tmp_path, side(*head), item, instances=instances, parameters=SSM)
    assert bool(reasons) == drifts, f"{SUITE}:{line} {says}: {reasons}"


def test_a_default_ami_drift_names_both_amis_and_the_parameter(tmp_path: Path) -> None:
    reasons, _ = ami_reasons(tmp_path, side(provisioner(), template()), with_instance(node("n1")),
                             instances=instances_json((INSTANCE, OTHER)), parameters=SSM)
    assert reasons == [f"AMIDrift: its instance runs {OTHER}, not {VALID}, the AL2 default for m5.large (SSM "
                       f"{AL2_M5}) (AWSNodeTemplate default)"]


def test_a_missing_parameter_is_counted_and_the_note_names_it(tmp_path: Path) -> None:
    reasons, notes = ami_reasons(tmp_path, side(provisioner(), template()), with_instance(node("n1")),
                                 instances=instances_json((INSTANCE, OTHER)))
    assert reasons == []
    assert "1 node of AWSNodeTemplate default: AMI drift not assessed: its AL2 default AMI needs its SSM parameter" \
        in notes
    assert any("/aws/service/eks/optimized-ami/<kubernetes-version>/amazon-linux-2/recommended/image_id" in n
               for n in notes), notes


SELECTOR = "  amiSelector: {team: platform}\n"
IMAGES = {"Images": [
    image_json(VALID, created="2026-09-01T00:00:00.000Z", tags={"team": "platform"}),
    image_json(NEWER, created="2026-11-01T00:00:00.000Z", tags={"team": "platform"}),
    image_json(ARM, arch="arm64", created="2026-12-01T00:00:00.000Z", tags={"team": "platform"}),
    image_json(OTHER, created="2026-12-01T00:00:00.000Z", tags={"team": "web"}),
]}


@pytest.mark.parametrize(("running", "drifts"), [(NEWER, False), (VALID, True), (ARM, True), (OTHER, True)])
def test_an_ami_selector_maps_the_newest_image_of_the_types_architecture(tmp_path: Path, running: str,
                                                                          drifts: bool) -> None:
    """`MapToInstanceTypes` over `Get`'s newest-first images: an amd64 m5.large gets NEWER (ARM is newer but Arm64,
    OTHER newer but not selected); the older VALID drifts."""
    reasons, _ = ami_reasons(tmp_path, side(provisioner(), template(SELECTOR)), with_instance(node("n1")),
                             instances=instances_json((INSTANCE, running)), images=IMAGES)
    assert bool(reasons) == drifts, reasons
    if drifts:
        assert NEWER in reasons[0] and "amiSelector {'team': 'platform'}" in reasons[0]


def test_of_two_images_created_in_the_same_second_the_greater_name_is_mapped() -> None:
    """v0.31.1 `getAMIs` (ami.go:211-217): a candidate of the same creation time and a smaller name is skipped; the
    dates compared as RFC 3339 times, not as text (`.000Z` or not); an unreadable date is Go's zero time."""
    m5 = load_catalog().get("m5.large")
    assert m5 is not None
    images = [Image("ami-1", "amd64", "2026-10-01T00:00:00Z", "eks-b"),
              Image("ami-2", "amd64", "2026-10-01T00:00:00.000Z", "eks-a"),
              Image("ami-3", "amd64", "someday", "eks-z")]
    for order in (images, images[::-1]):
        assert newest_first(order)[0].id == "ami-1"
        assert image_for(newest_first(order), m5) == images[0]
    assert newest_first(images)[-1].id == "ami-3"


def test_an_ami_selector_without_images_is_counted(tmp_path: Path) -> None:
    reasons, notes = ami_reasons(tmp_path, side(provisioner(), template(SELECTOR)), with_instance(node("n1")),
                                 instances=instances_json((INSTANCE, OTHER)))
    assert reasons == [] and notes == [
        "1 node of AWSNodeTemplate default: AMI drift not assessed: its amiSelector needs --images (aws ec2 "
        "describe-images)"]


@pytest.mark.parametrize(("selector", "image", "selected"), [
    ({"aws::name": "eks-node-*"}, Image("a", "amd64", "", "eks-node-1.28", owner_alias="amazon"), True),
    ({"aws::name": "eks-node-?"}, Image("a", "amd64", "", "eks-node-12", owner_alias="amazon"), False),
    ({"aws::name": "eks-*"}, Image("a", "amd64", "", "eks-x", owner_id="999", owner_alias="aws-marketplace"), False),
    ({"aws::name": "eks-*", "aws::owners": "999"}, Image("a", "amd64", "", "eks-x", owner_id="999"), True),
    ({"aws-ids": "ami-1, ami-2"}, Image("ami-2", "amd64", ""), True),
    ({"aws-ids": "ami-1"}, Image("ami-2", "amd64", ""), False),
    ({"team": "*"}, Image("a", "amd64", "", tags={"team": ""}), True),
    ({"team": "web,api"}, Image("a", "amd64", "", tags={"team": "api"}), True),
    ({"team": "web"}, Image("a", "amd64", "", tags={"team": "web"}, state="deregistered"), False),
])
def test_selector_matches_as_describe_images_filters(selector: dict[str, str], image: Image, selected: bool) -> None:
    assert selector_matches(selector, image) is selected


_images = st.lists(
    st.builds(Image, id=st.sampled_from([f"ami-{i}" for i in range(6)]),
              architecture=st.sampled_from(["amd64", "arm64"]),
              creation_date=st.sampled_from(["2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z",
                                             "2026-09-01T00:00:00Z"]),
              tags=st.fixed_dictionaries({}, optional={"team": st.sampled_from(["web", "platform"])})),
    max_size=8, unique_by=lambda i: i.id)


@deterministic(200)
@given(_images, st.randoms(use_true_random=False))
def test_the_mapped_image_is_selected_the_newest_of_its_architecture_and_order_free(
        images: list[Image], random: Any) -> None:
    """Whatever the images and their order in the file: the image an amd64 type gets is one the selector selects,
    of amd64, and no selected amd64 image is newer; shuffling the file changes nothing (deterministic output)."""
    m5 = load_catalog().get("m5.large")
    assert m5 is not None
    selector = {"team": "platform"}
    mapped = image_for(newest_first(i for i in images if selector_matches(selector, i)), m5)
    shuffled = list(images)
    random.shuffle(shuffled)
    assert image_for(newest_first(i for i in shuffled if selector_matches(selector, i)), m5) == mapped
    candidates = [i for i in images if i.tags.get("team") == "platform" and i.architecture == "amd64"]
    if mapped is None:
        assert candidates == []
    else:
        assert mapped in candidates
        assert all(i.creation_date <= mapped.creation_date for i in candidates)


# --- the CLI ---------------------------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> str:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "policies.yaml").write_text("---\n".join([provisioner(), template()]))
    return str(tmp_path / "repo")


def run(repo: str, tmp_path: Path, **options: Any) -> Any:
    snapshot = write(tmp_path / "snapshot.json", with_instance(node("n1")),
                     with_instance(node("n2"), "i-0bbbbbbbbbbbbbbb2"))
    result = plan_command(PlanOptions(snapshot=(snapshot,), start=START, output="json", base=repo, head=repo,
                                      consolidation_timeout="0s", **options), load_catalog())
    return result


def test_the_cli_drifts_the_node_on_another_ami_and_leaves_the_other(repo: str, tmp_path: Path) -> None:
    instances = dump(tmp_path, "instances.json", instances_json((INSTANCE, OTHER), ("i-0bbbbbbbbbbbbbbb2", VALID)))
    ssm = dump(tmp_path, "ssm.json", SSM)
    result = run(repo, tmp_path, instances=(instances,), ssm_parameters=(ssm,))
    assert result.stderr == ""
    plan = json.loads(result.stdout)
    nodes = {n["name"]: n for n in plan["nodes"]}
    assert nodes["n1"]["drifted"] and nodes["n1"]["reasons"][0].startswith(f"AMIDrift: its instance runs {OTHER}")
    assert not nodes["n2"]["drifted"]
    assert {"field": "AWSNodeTemplate default: AMIDrift", "nodes": 1} in plan["drift"] or any(
        "AMIDrift" in json.dumps(d) for d in plan["drift"]), plan["drift"]


def test_the_cli_without_the_files_plans_as_before(repo: str, tmp_path: Path) -> None:
    plan = json.loads(run(repo, tmp_path).stdout)
    assert not any(n["drifted"] for n in plan["nodes"])
    assert not any("AMI" in note for note in plan["notes"])


def test_the_cli_with_images_resolves_the_selector(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "policies.yaml").write_text("---\n".join([provisioner(), template(SELECTOR)]))
    instances = dump(tmp_path, "instances.json", instances_json((INSTANCE, VALID), ("i-0bbbbbbbbbbbbbbb2", NEWER)))
    result = run(str(tmp_path / "repo"), tmp_path, instances=(instances,),
                 images=(dump(tmp_path, "images.json", IMAGES),))
    nodes = {n["name"]: n for n in json.loads(result.stdout)["nodes"]}
    assert nodes["n1"]["drifted"] and NEWER in nodes["n1"]["reasons"][0]
    assert not nodes["n2"]["drifted"]


def test_redact_finds_the_drift_and_names_no_instance_or_ami(repo: str, tmp_path: Path) -> None:
    instances = dump(tmp_path, "instances.json", instances_json((INSTANCE, OTHER), ("i-0bbbbbbbbbbbbbbb2", VALID)))
    result = run(repo, tmp_path, instances=(instances,), ssm_parameters=(dump(tmp_path, "ssm.json", SSM),),
                 redact=True)
    plan = json.loads(result.stdout)
    assert sum(n["drifted"] for n in plan["nodes"]) == 1
    assert all(n["name"].startswith("node-") for n in plan["nodes"])
    for secret in (INSTANCE, "i-0bbbbbbbbbbbbbbb2", OTHER, VALID):
        assert secret not in result.stdout, secret


@pytest.mark.parametrize(("flag", "data", "message"), [
    ("instances", {"Reservations": [{"Instances": [{"InstanceId": INSTANCE, "ImageId": 7}]}]},
     "bad.json: Reservations[0].Instances[0].ImageId: not a string: 7"),
    ("instances", {"Instances": []}, "bad.json: not what `aws ec2 describe-instances --output json` prints "
     "(no Reservations list)"),
    ("images", {"Images": [{"ImageId": "ami-1", "Architecture": "x86_64", "Tags": {"team": "web"}}]},
     "bad.json: Images[0].Tags: not a list: {\"team\": \"web\"}"),
    ("ssm_parameters", {"Parameters": [{"Name": AL2_M5}]}, "bad.json: Parameters[0].Value: missing"),
])
def test_a_malformed_file_is_a_clear_error(repo: str, tmp_path: Path, flag: str, data: Any, message: str) -> None:
    result = run(repo, tmp_path, **{flag: (dump(tmp_path, "bad.json", data),)})
    assert result.exit_code == 2 and result.stdout == ""
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_file_that_is_not_json_is_a_clear_error(repo: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = run(repo, tmp_path, images=(str(bad),))
    assert result.exit_code == 2 and f"{bad}: not JSON:" in result.stderr


def test_the_command_line_takes_the_three_flags(repo: str, tmp_path: Path) -> None:
    snapshot = write(tmp_path / "snapshot.json", with_instance(node("n1")))
    instances = dump(tmp_path, "instances.json", instances_json((INSTANCE, OTHER)))
    result = CliRunner().invoke(main, [
        "plan", repo, repo, "--snapshot", snapshot, "--start", START, "--consolidation-timeout", "0s",
        "--instances", instances, "--images", dump(tmp_path, "images.json", {"Images": []}),
        "--ssm-parameters", dump(tmp_path, "ssm.json", SSM)])
    assert result.exit_code == 0, result.output
    assert "AWSNodeTemplate default: AMIDrift → 1 node drift" in result.output, result.output
