"""`check_paths` / `check_command`: which rule, at which line, with which related lines and which words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpenter_policy.catalog import Catalog, catalog_to_json, load_catalog
from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.options import PolicyOptions
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.repository import check_paths, load_repository
from karpenter_policy.commands.check import check_command, render_check
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.spelling import nearest_name

#: Every Provisioner `write` writes names this node template (`node_template` writes it where a test needs it).
PROVIDER = """\
  providerRef:
    name: prod
"""


def write(tmp_path: Path, spec: str, name: str = "p", file: str = "p.yaml") -> Path:
    path = tmp_path / file
    body = spec.rstrip() + "\n" if spec.strip() else ""
    head = f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n"
    path.write_text(head + body + PROVIDER)
    return path


def node_template(tmp_path: Path, file: str = "prod.yaml") -> Path:
    """The AWSNodeTemplate `prod` the Provisioners of `write` name in providerRef."""
    path = tmp_path / file
    path.write_text(
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: prod\nspec:\n"
        "  subnetSelector: {karpenter.sh/discovery: prod}\n  securityGroupSelector: {karpenter.sh/discovery: prod}\n"
    )
    return path


def requirements(*terms: str) -> str:
    """`key Op v1,v2` strings as a requirements block (spec-level indentation)."""
    lines = ["  requirements:"]
    for term in terms:
        key, operator, *rest = term.split()
        lines += [f"    - key: {key}", f"      operator: {operator}"]
        if rest:
            lines.append(f"      values: [{', '.join(repr(v) for v in rest[0].split(','))}]")
    return "\n".join(lines) + "\n"


def solver_findings(path: Path, catalog: Catalog | None = None) -> list[Finding]:
    report, _ = check_paths([str(path)], catalog)
    return [f for f in report.sorted_findings() if f.rule not in ("unresolved-reference",)]


def test_arch_vs_family_in_domain_words(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("kubernetes.io/arch In arm64", "karpenter.k8s.aws/instance-family In c5"))
    [finding] = solver_findings(path)
    assert (finding.rule, finding.severity, finding.line, finding.column) == ("requirements-conflict", "error", 7, 7)
    assert [r.line for r in finding.related] == [10]
    assert finding.message == (
        "kubernetes.io/arch In [arm64] conflicts with karpenter.k8s.aws/instance-family In [c5]: "
        "no c5 instance type is arm64"
    )
    assert finding.object_ref == "Provisioner/p"


@pytest.mark.parametrize(
    ("terms", "labels", "words"),
    [
        (["karpenter.k8s.aws/instance-family In c5,m5", "karpenter.k8s.aws/instance-family NotIn m5,c5"], "",
         "NotIn excludes every value In allows (c5 and m5)"),
        (["karpenter.k8s.aws/instance-cpu Gt 16", "karpenter.k8s.aws/instance-cpu Lt 8"], "",
         "no integer is greater than 16 and less than 8"),
        (["karpenter.k8s.aws/instance-family In c5", "karpenter.k8s.aws/instance-gpu-count Gt 0"], "",
         "no c5 instance type has a GPU"),
        (["karpenter.k8s.aws/instance-family In c5", "topology.kubernetes.io/zone In us-east-1e"], "",
         "no c5 instance type is offered in us-east-1e"),
        (["example.com/pool DoesNotExist", "example.com/pool In blue"], "",
         "example.com/pool cannot be both absent and present"),
    ],
    ids=["in-notin", "gt-lt", "gpu-family", "zone-family", "custom-absent"],
)
def test_conflicts_between_two_requirements(tmp_path: Path, terms: list[str], labels: str, words: str) -> None:
    path = write(tmp_path, requirements(*terms) + labels)
    items = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("    - key:")]
    [finding] = solver_findings(path)
    assert finding.rule == "requirements-conflict"
    assert (finding.line, [r.line for r in finding.related]) == (items[0], items[1:])
    assert finding.message.endswith(": " + words), finding.message


def test_label_vs_requirement_points_at_the_label(tmp_path: Path) -> None:
    path = write(tmp_path, "  labels:\n    team: payments\n" + requirements("team In search"))
    [finding] = solver_findings(path)
    assert finding.rule == "requirements-conflict"
    assert (finding.line, finding.column, [r.line for r in finding.related]) == (7, 5, [9])
    assert finding.message == (
        "label team=payments conflicts with team In [search]: "
        "the label sets team to payments, which team In [search] does not allow"
    )


def test_a_karpenter_default_in_the_core_points_at_the_requirements_key(tmp_path: Path) -> None:
    path = write(tmp_path, "  weight: 5\n" + requirements("karpenter.k8s.aws/instance-family In c7g"))
    [finding] = solver_findings(path)
    assert (finding.line, [r.line for r in finding.related]) == (8, [7])  # the family, then `requirements:`
    assert "kubernetes.io/arch In [amd64] (Karpenter default)" in finding.message
    assert "no c7g instance type is amd64" in finding.message
    assert "Karpenter adds kubernetes.io/arch In [amd64] when the requirements do not mention" in finding.message


def test_a_default_without_a_requirements_list_points_at_spec(tmp_path: Path) -> None:
    arm_only = Catalog("arm-1", (InstanceType("c7g.large", 2, 4096, ("arm64",), hypervisor="nitro",
                                              offerings=(Offering("arm-1a", "on-demand", 0.1),)),))
    path = write(tmp_path, "")
    [finding] = solver_findings(path, arm_only)
    assert (finding.rule, finding.line) == ("no-instance-type", 5)
    assert finding.message.startswith("kubernetes.io/arch In [amd64] (Karpenter default): no instance type in arm-1 is")


def test_single_requirement_no_instance_type(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("karpenter.sh/capacity-type In spot-ish"))
    [finding] = solver_findings(path)
    assert (finding.rule, finding.line, finding.related) == ("no-instance-type", 7, ())
    assert finding.message == (
        "karpenter.sh/capacity-type In [spot-ish]: no instance type in us-east-1 is offered as spot-ish "
        "(capacity types are on-demand and spot; did you mean spot?)"
    )


def test_too_many_cpus(tmp_path: Path) -> None:
    path = write(
        tmp_path, requirements("node.kubernetes.io/instance-type NotIn x", "karpenter.k8s.aws/instance-cpu Gt 1000")
    )
    findings = solver_findings(path)
    [finding] = [f for f in findings if f.severity == "error"]
    assert (finding.rule, finding.line) == ("no-instance-type", 10)
    assert finding.message.endswith("has more than 1000 vCPUs (the most is 896)")


def test_unknown_instance_type_suggests_the_nearest(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("node.kubernetes.io/instance-type In m5d.x2large"))
    [finding] = solver_findings(path)  # the solver's verdict on the same term is not repeated
    assert (finding.rule, finding.severity, finding.line, finding.column) == ("unknown-instance-type", "error", 9, 16)
    assert finding.message == (
        "node.kubernetes.io/instance-type m5d.x2large: there is no instance type m5d.x2large in us-east-1 "
        "(not in the EC2 types of 2026-07), did you mean m5d.2xlarge?"
    )


@pytest.mark.parametrize(
    ("values", "region", "severity"),
    [
        ("m6i.x2large", "us-east-1", "error"),  # the only type does not exist: nothing can launch
        ("p4de.24xlarge", "eu-west-3", "error"),  # the only type is not offered in the region
        ("m6i.x2large,m5.large", "us-east-1", "warning"),  # a typo among several: the others still launch
        ("p4de.24xlarge,m5.large", "eu-west-3", "warning"),
    ],
)
def test_a_requirement_that_leaves_no_existing_or_offered_type_is_an_error(
    tmp_path: Path, values: str, region: str, severity: str
) -> None:
    """#27: a PR gate must fail on a provisioner that can never launch, whatever the flags."""
    path = write(tmp_path, requirements(f"node.kubernetes.io/instance-type In {values}"))
    findings = [f for f in solver_findings(path, load_catalog(region=region)) if f.rule == "unknown-instance-type"]
    assert [f.severity for f in findings] == [severity]
    report, _ = check_paths([str(path)], load_catalog(region=region))
    assert (report.exit_code() == 1) == (severity == "error")


def test_unknown_zone_for_the_region(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("topology.kubernetes.io/zone In us-west-2a"))
    [finding] = solver_findings(path)
    assert (finding.rule, finding.severity, finding.line) == ("zone-outside-region", "error", 9)
    assert finding.message.startswith("topology.kubernetes.io/zone us-west-2a: us-west-2a is a zone of us-west-2, ")
    assert "did you mean" not in finding.message


def test_unknown_names_next_to_known_ones_or_excluded_are_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("karpenter.k8s.aws/instance-family In g5,p3",
                                        "karpenter.k8s.aws/instance-size NotIn metl"))
    report, checked = check_paths([str(path), str(node_template(tmp_path))])
    assert report.errors == 0
    assert [(f.rule, f.severity, f.line) for f in report.sorted_findings()] == [
        ("previous-generation", "warning", 9), ("unknown-instance-type", "warning", 12)]
    # p3 is a previous-generation family (not a typo of p3dn): named as such, with the flag that acknowledges it.
    assert "p3 is a previous-generation family" in report.sorted_findings()[0].message
    assert "did you mean" not in report.sorted_findings()[0].message
    assert report.sorted_findings()[1].message.endswith("did you mean metal? This NotIn excludes nothing.")
    assert checked[0].verdict == Verdict.SAT


def test_unknown_name_and_a_real_conflict_are_both_reported(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("karpenter.k8s.aws/instance-family In c5,c5x", "kubernetes.io/arch In arm64"))
    findings = solver_findings(path)
    assert [(f.rule, f.severity, f.line) for f in findings] == [
        ("requirements-conflict", "error", 7), ("unknown-instance-type", "warning", 9)]


def test_satisfiable_provisioners_are_listed(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("node.kubernetes.io/instance-type In m5.large,m5.2xlarge",
                                        "karpenter.sh/capacity-type In spot"))
    report, [checked] = check_paths([str(path)])
    assert report.errors == 0
    assert checked.verdict == Verdict.SAT and checked.instance_types == ("m5.2xlarge", "m5.large")
    assert checked.witness is not None and checked.witness.capacity_type == "spot"
    assert checked.capacity_types == ("spot",)
    assert (checked.file, checked.line, checked.object_ref) == (str(path), 4, "Provisioner/p")
    assert checked.provisioner.name == "p"
    assert checked.summary().startswith("Provisioner/p: 2 instance types, e.g. m5.")


def test_invalid_provisioners_are_not_solved(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("kubernetes.io/arch Within arm64"))
    report, checked = check_paths([str(path)])
    assert [f.rule for f in report.findings if f.severity == "error"] == ["invalid-requirement"]
    assert checked == []


def test_the_repository_keeps_every_valid_policy_document(tmp_path: Path) -> None:
    write(tmp_path, "", name="a", file="a.yaml")
    (tmp_path / "t.yaml").write_text(
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: t\nspec:\n"
        "  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n"
    )
    repository = load_repository([str(tmp_path)], prove=True)
    assert list(repository.provisioners) == ["a"] and list(repository.node_templates) == ["t"]
    assert [c.name for c in repository.checked] == ["a"]


def test_render_check_text_and_json(tmp_path: Path) -> None:
    write(tmp_path, requirements("node.kubernetes.io/instance-type In m5.large"), name="ok", file="a.yaml")
    write(tmp_path, requirements("kubernetes.io/arch In arm64", "karpenter.k8s.aws/instance-family In c5"),
          name="bad", file="b.yaml")
    report, checked = check_paths([str(tmp_path)])
    text = render_check(report, checked, "text").splitlines()
    assert text[-2].endswith("info: Provisioner/ok: 1 instance type, e.g. m5.large (us-east-1a, on-demand)")
    assert text[-1].startswith("checked 2 objects (2 Provisioner) in 2 files: 1 error")
    document = json.loads(render_check(report, checked, "json"))
    assert set(document) == {"findings", "summary", "provisioners"}
    assert [(p["object"], p["verdict"], p["count"]) for p in document["provisioners"]] == [
        ("Provisioner/ok", "sat", 1), ("Provisioner/bad", "unsat", 0)]
    assert document["provisioners"][0]["witness"]["instance_type"] == "m5.large"
    assert "witness" not in document["provisioners"][1]
    assert render_check(report, checked, "sarif") == render_check(report, checked, "sarif")


def test_the_json_report_keeps_its_shape_without_provisioners() -> None:
    document = json.loads(render_check(Report(), [], "json"))
    assert document["provisioners"] == [] and document["findings"] == []


def test_check_command_catalog_and_region(tmp_path: Path) -> None:
    path = write(tmp_path, requirements("node.kubernetes.io/instance-type In m5.large"))
    small = tmp_path / "catalog.json"
    full = load_catalog()
    small.write_text(catalog_to_json(Catalog(full.region, tuple(it for it in full if it.family == "m5"))))
    ok = check_command([str(path)], "json", PolicyOptions(catalog_file=str(small)))
    assert ok.exit_code == 0 and json.loads(ok.stdout)["provisioners"][0]["count"] == 1
    mismatch = check_command([str(path)], options=PolicyOptions(catalog_file=str(small), region="eu-west-1"))
    assert mismatch.exit_code == 2 and "does not match" in mismatch.stderr and mismatch.stdout == ""
    unknown = check_command([str(path)], options=PolicyOptions(region="eu-nowhere-1"))
    assert unknown.exit_code == 2 and "no embedded catalog" in unknown.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert check_command([str(path)], options=PolicyOptions(catalog_file=str(broken))).exit_code == 2
    values = tmp_path / "values.yaml"
    values.write_text("a: [")
    assert check_command([str(path)], options=PolicyOptions(values_file=str(values))).exit_code == 2


def test_check_command_exit_codes(tmp_path: Path) -> None:
    good = write(tmp_path, requirements("karpenter.k8s.aws/instance-size NotIn metl"), file="good.yaml")
    assert check_command([str(good)]).exit_code == 0
    assert check_command([str(good)], fail_on_warn=True).exit_code == 1
    bad = write(tmp_path, requirements("karpenter.k8s.aws/instance-cpu Gt 1000"), file="bad.yaml")
    assert check_command([str(bad)]).exit_code == 1
    assert check_command([str(tmp_path / "missing")]).exit_code == 2


@pytest.mark.parametrize(
    ("value", "candidates", "expected"),
    [
        ("m5d.x2large", load_catalog().names(), "m5d.2xlarge"),
        ("m5.lage", load_catalog().names(), "m5.large"),
        ("us-east1a", ("us-east-1a", "us-east-1b"), "us-east-1a"),
        ("us-west-2a", ("us-east-1a", "us-east-1b"), None),
        ("us-east-1g", ("us-east-1a", "us-east-1b"), None),  # a tie: no guess
        ("spot-ish", ("on-demand", "spot"), "spot"),
        ("zzz", ("on-demand", "spot"), None),
    ],
)
def test_suggest(value: str, candidates: tuple[str, ...], expected: str | None) -> None:
    assert nearest_name(value, candidates) == expected


WINDOWS = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: win}
spec:
  requirements: [{key: kubernetes.io/os, operator: In, values: [windows]}]
  providerRef: {name: win}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: win}
spec:
  amiFamily: FAMILY
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def test_the_node_templates_ami_family_decides_the_os(tmp_path: Path) -> None:
    """Windows AMI families launch `windows` nodes: os In [windows] is satisfiable only with one of them."""
    windows = tmp_path / "windows.yaml"
    windows.write_text(WINDOWS.replace("FAMILY", "Windows2022"))
    linux = tmp_path / "linux.yaml"
    linux.write_text(WINDOWS.replace("FAMILY", "AL2"))
    report, (checked,) = check_paths([str(windows)])
    assert report.errors == 0 and checked.instance_types
    report, _ = check_paths([str(linux)])
    assert [(f.rule, f.line) for f in report.findings if f.severity == "error"] == [("no-instance-type", 5)]
