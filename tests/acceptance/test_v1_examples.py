"""Acceptance: `karpenter-policy validate` and `check`, run as subprocesses on examples/v1/ — Karpenter v1
NodePools, NodeClaims and EC2NodeClasses checked as Karpenter v1.14.1 admits them (issue #25), never skipped.

Each example declares its findings in its leading comment lines, at line and column:

    # expect: <rule> line <N> column <C>      one per error finding (a multiset)
    # warnings: <rule> line <N> column <C>    one per warning finding

The positives (some of aws/karpenter-provider-aws v1.14.1 `examples/v1/`, unchanged, and a NodePool whose class
lives elsewhere) must pass with exactly their warnings; each negative must report exactly its findings, and the
text output of the negative folder is `tests/data/v1-validate-negative.txt`, word for word.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
V1_DIR = ROOT / "examples" / "v1"
POSITIVES = sorted((V1_DIR / "positive").glob("*.yaml"))
NEGATIVES = sorted((V1_DIR / "negative").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "data" / "v1-validate-negative.txt"

_HEADER = re.compile(
    r"# (?P<word>expect|warnings): (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*) column (?P<column>[1-9][0-9]*)"
)

Placed = tuple[str, int, int]


def read_header(path: Path) -> tuple[Counter[Placed], Counter[Placed]]:
    errors: Counter[Placed] = Counter()
    warnings: Counter[Placed] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# expect") and not line.startswith("# warning"):
            if line.startswith("#"):
                continue
            break
        match = _HEADER.fullmatch(line)
        assert match, f"{path.name}: malformed header {line!r}; write '# expect: <rule> line <N> column <C>'"
        target = errors if match["word"] == "expect" else warnings
        target[(match["rule"], int(match["line"]), int(match["column"]))] += 1
    return errors, warnings


def run_cli(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", command, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def directory_report(command: str, directory: str) -> tuple[int, dict[str, Any]]:
    """One `COMMAND DIR --output json` run per directory, shared by the per-file tests."""
    result = run_cli(command, directory, "--output", "json")
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def placed(findings: list[dict[str, Any]], severity: str) -> Counter[Placed]:
    return Counter((f["rule"], f["line"], f["column"]) for f in findings if f["severity"] == severity)


def describe(findings: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {f['severity']} {f['rule']} {f['line']}:{f['column']}: {f['message']}" for f in findings)


def test_the_examples_cover_each_v1_rule() -> None:
    rules = {rule for path in NEGATIVES for rule, _, _ in read_header(path)[0]}
    assert rules >= {"schema", "cel-rule", "runtime-validation"}
    assert len(POSITIVES) >= 4


@pytest.mark.parametrize("path", NEGATIVES, ids=[p.name for p in NEGATIVES])
def test_negative_v1_example_reports_exactly_its_findings(path: Path) -> None:
    errors, warnings = read_header(path)
    assert errors, f"{path.name}: a negative example needs '# expect:' headers"
    _, report = directory_report("validate", relative(path.parent))
    findings = [f for f in report["findings"] if f["file"] == relative(path)]
    assert placed(findings, "error") == errors, describe(findings)
    assert placed(findings, "warning") == warnings, describe(findings)


@pytest.mark.parametrize("path", POSITIVES, ids=[p.name for p in POSITIVES])
def test_positive_v1_example_passes_with_its_warnings(path: Path) -> None:
    errors, warnings = read_header(path)
    assert not errors, f"{path.name}: a positive example cannot expect errors"
    _, report = directory_report("validate", relative(path.parent))
    findings = [f for f in report["findings"] if f["file"] == relative(path)]
    assert placed(findings, "error") == Counter(), describe(findings)
    assert placed(findings, "warning") == warnings, describe(findings)


def test_v1_objects_are_counted_as_checked_and_exit_codes_are_as_for_v1alpha5() -> None:
    code, report = directory_report("validate", relative(V1_DIR / "positive"))
    assert code == 0, describe(report["findings"])
    summary = report["summary"]
    assert summary["kinds"] == {"EC2NodeClass": 3, "NodePool": 4}
    assert summary["skipped"] == {}
    code, report = directory_report("validate", relative(V1_DIR / "negative"))
    assert code == 1 and report["summary"]["errors"] > 0
    strict = run_cli("validate", relative(V1_DIR / "positive"), "--strict", "-q")
    assert strict.returncode == 1, strict.stdout  # the unresolved nodeClassRef is a warning


def test_the_negative_folder_prints_file_line_column_rule_and_karpenters_message() -> None:
    result = run_cli("validate", relative(V1_DIR / "negative"))
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout == GOLDEN.read_text(encoding="utf-8"), result.stdout


def test_check_checks_v1_objects_too() -> None:
    code, report = directory_report("check", relative(V1_DIR / "negative"))
    assert code == 1
    by_rule = Counter(f["rule"] for f in report["findings"] if f["severity"] == "error")
    assert by_rule["cel-rule"] and by_rule["runtime-validation"] and by_rule["schema"]
    assert report["provisioners"] == []
    code, report = directory_report("check", relative(V1_DIR / "positive"))
    assert code == 0, describe(report["findings"])
    assert report["summary"]["kinds"] == {"EC2NodeClass": 3, "NodePool": 4}


@pytest.mark.slow
def test_what_compile_api_v1_writes_validates_with_every_object_checked(tmp_path: Path) -> None:
    """The issue's report: `validate` on `compile --api v1`'s output said "checked 0 objects" and exited 0."""
    compiled = run_cli("compile", "policies", "-o", str(tmp_path / "out"), "--api", "v1",
                       "--node-role", "KarpenterNodeRole")
    assert compiled.returncode == 0, compiled.stderr
    result = run_cli("validate", str(tmp_path / "out"), "--output", "json")
    report = json.loads(result.stdout)
    assert result.returncode == 0, describe(report["findings"])
    kinds = report["summary"]["kinds"]
    assert kinds["NodePool"] >= 4 and kinds["EC2NodeClass"] >= 1
    assert "NodePool" not in report["summary"]["skipped"] and "EC2NodeClass" not in report["summary"]["skipped"]
