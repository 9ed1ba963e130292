"""A Karpenter v1 duration the CRD's pattern admits but Go's `time.Duration` cannot hold is a `duration-overflow`
error at its field's line, in every duration field of a NodePool and a NodeClaim, at the edge (the last whole second
Go holds, one more); `compile` writes nothing for it (issue #27: it passed `check` and `compile` silently). The
parser's own edges are tests/api/v1/test_goduration.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import run_cli

from karpenter_policy.checks.findings import Report
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.validation.policies import check_document

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: web
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: al2023}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [spot]}}]
      expireAfter: {expire}
      terminationGracePeriod: {grace}
  disruption:
    consolidateAfter: {consolidate}
    budgets:
      - nodes: "1"
        schedule: "0 9 * * 1-5"
        duration: {window}
"""
CLASS = """\
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: al2023
spec:
  role: KarpenterNodeRole-prod
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
"""
#: The longest each pattern admits that Go still holds (a budget's duration takes hours and minutes only).
HELD = {"expire": "2562047h47m16s", "grace": "9223372036s", "consolidate": "2562047h47m16s", "window": "2562047h47m"}
#: One step past it.
PAST = {"expire": "2562047h47m17s", "grace": "9223372037s", "consolidate": "2562048h", "window": "2562047h48m"}
#: Each field's line in POOL and its path.
WHERE = {
    "expire": (10, "spec.template.spec.expireAfter"),
    "grace": (11, "spec.template.spec.terminationGracePeriod"),
    "consolidate": (13, "spec.disruption.consolidateAfter"),
    "window": (17, "spec.disruption.budgets[0].duration"),
}


def findings(**values: str) -> list[tuple[str, int, str]]:
    [doc] = parse("pool.yaml", POOL.format(**{**HELD, **values}))
    found, is_policy = check_document(doc, Report())
    assert is_policy
    return [(f.rule, f.line, f.message) for f in found]


def test_the_longest_durations_go_holds_pass() -> None:
    assert findings() == []


@pytest.mark.parametrize("field", sorted(PAST))
def test_one_second_past_what_go_holds_is_an_error_at_the_field(field: str) -> None:
    line, path = WHERE[field]
    [(rule, at, message)] = findings(**{field: PAST[field]})
    assert (rule, at) == ("duration-overflow", line)
    assert message.startswith(f'{path}: Karpenter cannot decode "{PAST[field]}": time.ParseDuration refuses it')
    assert "2562047h47m16.854775807s" in message
    assert message.endswith("; for no limit write Never") == (field in {"expire", "consolidate"})


def test_huge_digits_are_one_finding_with_the_value_shortened() -> None:
    [(rule, line, message)] = findings(expire="9" * 5000 + "h")
    assert (rule, line) == ("duration-overflow", 10)
    assert "(5001 characters)" in message and len(message) < 400


def test_never_is_no_duration() -> None:
    assert findings(expire="Never", consolidate="Never") == []


def test_a_nodeclaims_durations_are_checked_too() -> None:
    text = ("apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c}\nspec:\n"
            "  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: al2023}\n"
            "  requirements: []\n  expireAfter: 2562048h\n  terminationGracePeriod: 2562048h\n")
    [doc] = parse("claim.yaml", text)
    found, _ = check_document(doc, Report())
    assert [(f.rule, f.line) for f in found] == [("duration-overflow", 7), ("duration-overflow", 8)]


def test_check_fails_and_compile_writes_nothing(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "pool.yaml").write_text(POOL.format(**{**HELD, "consolidate": PAST["consolidate"]}) + CLASS)
    checked = run_cli("check", policies)
    assert checked.returncode == 1, checked.stderr
    assert f"{policies / 'pool.yaml'}:13:23: error: NodePool/web: spec.disruption.consolidateAfter" in checked.stdout
    assert "[duration-overflow]" in checked.stdout
    compiled = run_cli("compile", policies, "-o", tmp_path / "out")
    assert compiled.returncode == 1
    assert "[duration-overflow]" in compiled.stdout
    assert not (tmp_path / "out").exists()
