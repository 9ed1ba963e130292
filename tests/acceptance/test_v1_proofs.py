"""Acceptance: `karpenter-policy check` proves Karpenter v1 NodePools (issue #25, item 3), run as a subprocess.

* examples/v1/proofs/ — NodePools the API server and RuntimeValidate admit but that can never launch a node (a
  requirements conflict, `Gte` beyond the catalog, `minValues` the catalog cannot meet): each file's findings
  declared in its header as in examples/v1/negative (`# expect: <rule> line <N> column <C>`), the folder's text
  output `tests/data/v1-check-proofs.txt` word for word;
* examples/v1/positive/ — still 0 errors, each NodePool proven;
* examples/v1/mixed/ — a v1alpha5 Provisioner beside NodePools, workloads placed on both.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.acceptance.test_v1_examples import (
    ROOT,
    V1_DIR,
    describe,
    directory_report,
    placed,
    read_header,
    relative,
    run_cli,
)

PROOFS = sorted((V1_DIR / "proofs").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "data" / "v1-check-proofs.txt"
MIXED = V1_DIR / "mixed"


@pytest.mark.parametrize("path", PROOFS, ids=[p.name for p in PROOFS])
def test_each_proof_example_reports_exactly_its_findings(path: Path) -> None:
    errors, warnings = read_header(path)
    _, report = directory_report("check", relative(path.parent))
    findings = [f for f in report["findings"] if f["file"] == relative(path)]
    assert placed(findings, "error") == errors, describe(findings)
    assert placed(findings, "warning") == warnings, describe(findings)


def test_the_proof_examples_cover_the_new_rule_and_validate_passes_them() -> None:
    rules = {rule for path in PROOFS for rule, _, _ in read_header(path)[0]}
    assert {"min-values", "requirements-conflict", "no-instance-type"} <= rules
    code, report = directory_report("validate", relative(V1_DIR / "proofs"))
    assert code == 0, describe(report["findings"])  # only the solver finds them


def test_the_proof_folder_prints_its_golden_output() -> None:
    result = run_cli("check", relative(V1_DIR / "proofs"))
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout == GOLDEN.read_text(encoding="utf-8"), result.stdout


def test_the_positive_nodepools_are_proven_with_no_error() -> None:
    code, report = directory_report("check", relative(V1_DIR / "positive"))
    assert code == 0, describe(report["findings"])
    proven = {p["object"]: p for p in report["provisioners"]}
    assert set(proven) == {"NodePool/default", "NodePool/general-purpose", "NodePool/batch", "NodePool/windows2022"}
    assert all(p["verdict"] == "sat" and p["count"] > 0 for p in proven.values())


def test_a_mixed_repository_places_workloads_on_provisioners_and_nodepools_side_by_side() -> None:
    result = run_cli("check", relative(MIXED / "policies"), "--workloads", relative(MIXED / "apps"),
                     "--output", "json")
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert result.returncode == 0, describe(report["findings"])
    assert report["summary"]["kinds"]["NodePool"] == 2 and report["summary"]["kinds"]["Provisioner"] == 1
    assert sorted(p["object"] for p in report["provisioners"]) == [
        "NodePool/batch", "NodePool/default", "Provisioner/default"]
    landed = {w["object"]: w["provisioner"] for w in report["workloads"]}
    assert landed == {"Deployment/legacy": "default", "Deployment/report": "NodePool/batch",
                      "Deployment/web": "NodePool/default"}
    overlaps = Counter((f["rule"], f["object"]) for f in report["findings"] if f["rule"] == "overlap")
    assert overlaps == Counter({("overlap", "NodePool/default"): 1})
