"""Karpenter v1 objects in `validate` (in process, `checks/validation`): checked and placed at their line, the
nodeClassRef across files, and no object of a Karpenter group ever skipped (issue #25). The CLI on examples/v1/ is
tests/acceptance/test_v1_examples.py."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic
from pytest import MonkeyPatch

from karpenter_policy.checks import suppression
from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.validation.policies import check_document, validate_paths

CLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
spec:
  role: KarpenterNodeRole-prod
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: prod}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: prod}}}}]
"""

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: web
spec:
  template:
    spec:
      nodeClassRef:
        group: {group}
        kind: {kind}
        name: al2023
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: [spot]
"""


def run(tmp_path: Path, **files: str) -> Report:
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return validate_paths([str(tmp_path)])


def described(report: Report) -> list[tuple[str, str, int, int]]:
    return [(f.rule, f.severity, f.line, f.column) for f in report.sorted_findings()]


def test_a_nodepool_naming_a_class_that_is_not_checked_is_a_warning_at_the_name(tmp_path: Path) -> None:
    report = run(tmp_path, pool=POOL.format(group="karpenter.k8s.aws", kind="EC2NodeClass"))
    assert described(report) == [("unresolved-reference", "warning", 11, 15)]
    assert "EC2NodeClass 'al2023'" in report.findings[0].message
    assert report.kinds == {"NodePool": 1} and report.exit_code() == 0 and report.exit_code(fail_on_warn=True) == 1


def test_the_class_among_the_files_resolves_it_and_another_providers_class_is_an_error(tmp_path: Path) -> None:
    report = run(tmp_path, pool=POOL.format(group="karpenter.k8s.aws", kind="EC2NodeClass"),
                 cls=CLASS.format(name="al2023"))
    assert described(report) == [] and report.kinds == {"NodePool": 1, "EC2NodeClass": 1}
    other = tmp_path / "other"
    other.mkdir()
    # Karpenter's AWS provider never manages it (IsManaged): `foreign-node-class` at its group, no unresolved name
    assert described(run(other, pool=POOL.format(group="example.com", kind="OtherClass"))) == [
        ("foreign-node-class", "error", 9, 16)
    ]


def test_a_nodepool_without_a_name_is_refused_as_the_api_server_refuses_it(tmp_path: Path) -> None:
    text = CLASS.format(name="x").replace("metadata:\n  name: x\n", "metadata: {}\n")
    report = run(tmp_path, cls=text)
    assert described(report) == [("schema", "error", 3, 11)]
    assert report.findings[0].message == "metadata.name: Required value: name or generateName is required"


def test_findings_carry_the_field_name_and_karpenters_message_at_the_fields_line() -> None:
    text = POOL.format(group="karpenter.k8s.aws", kind="EC2NodeClass").replace(
        "karpenter.sh/capacity-type", "karpenter.sh/nodepool")
    [doc] = parse("pool.yaml", text)
    findings, is_policy = check_document(doc, Report())
    assert is_policy
    assert [(f.rule, f.line, f.column, f.message) for f in findings] == [
        ("cel-rule", 13, 16, 'spec.template.spec.requirements[0].key: label "karpenter.sh/nodepool" is restricted')]


def test_a_nodeclaim_is_checked_too() -> None:
    [doc] = parse("claim.yaml", "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c}\nspec: {}\n")
    report = Report()
    findings, _ = check_document(doc, report)
    assert report.kinds == {"NodeClaim": 1}
    assert {f.rule for f in findings} == {"schema"} and any("Required value" in f.message for f in findings)


def test_a_retired_version_names_what_is_checked() -> None:
    [doc] = parse("beta.yaml", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: b}\n")
    [finding] = check_document(doc, Report())[0]
    assert (finding.rule, finding.severity, finding.line, finding.column) == ("schema", "error", 1, 13)
    assert "v1beta1 was served by Karpenter v0.32 to v1.0 only" in finding.message
    assert "NodePool must have apiVersion karpenter.sh/v1" in finding.message
    assert "EC2NodeClass (karpenter.k8s.aws/v1)" in finding.message


def _finding_of(api_version: str, kind: str) -> tuple[list[Finding], Report]:
    text = f"apiVersion: {api_version!r}\nkind: {kind!r}\nmetadata: {{name: x}}\n"
    [doc] = parse("object.yaml", text)
    report = Report()
    findings, _ = check_document(doc, report)
    return findings, report


@given(
    group=st.sampled_from(["karpenter.sh", "karpenter.k8s.aws"]),
    version=st.text(alphabet="abcdefv0123456789", min_size=1, max_size=8),
    kind=st.one_of(st.sampled_from(["NodePool", "NodeClaim", "EC2NodeClass", "Machine", "NodePol"]),
                   st.text(alphabet="ABCNodePolcasx", min_size=1, max_size=12)),
)
@deterministic(200)
def test_no_object_of_a_karpenter_group_is_ever_skipped(group: str, version: str, kind: str) -> None:
    api_version = f"{group}/{version}"
    if (api_version, kind) in {("karpenter.sh/v1", "NodePool"), ("karpenter.sh/v1", "NodeClaim"),
                               ("karpenter.k8s.aws/v1", "EC2NodeClass")}:
        return  # checked for real (the tests above): CEL is not what this property is about
    findings, report = _finding_of(api_version, kind)
    assert not report.skipped, (api_version, kind)
    if (api_version, kind) not in {("karpenter.sh/v1alpha5", "Provisioner"),
                                   ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate")}:
        assert any(f.severity == "error" for f in findings), (api_version, kind)


def test_kinds_of_other_groups_are_still_skipped() -> None:
    findings, report = _finding_of("cluster.x-k8s.io/v1beta1", "NodePool")
    assert findings == [] and report.skipped == {"NodePool": 1}


def test_a_files_directives_come_from_the_text_the_run_read(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    """The unresolved nodeClassRef silenced by a comment: the directive is taken from the text `validate` read and
    checked, not from a second reading of the file when the finding is looked at (every NodePool of a repository
    whose classes live elsewhere has such a finding: a second read a file)."""
    silenced = POOL.format(group="karpenter.k8s.aws", kind="EC2NodeClass").replace(
        "name: al2023", "name: al2023  # karpenter-policy: disable=unresolved-reference")

    def second_read(file: str, max_bytes: int = 0) -> str:
        raise AssertionError(f"{file} read again")

    monkeypatch.setattr(suppression, "read_text", second_read)
    report = run(tmp_path, pool=silenced)
    assert [(f.rule, f.line) for f in report.findings] == [("unresolved-reference", 11)]  # found, and silenced:
    assert described(report) == [] and report.exit_code(fail_on_warn=True) == 0
