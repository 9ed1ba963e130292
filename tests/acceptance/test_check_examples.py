"""Acceptance: the installed `karpenter-policy check` CLI, run as a subprocess on examples/check/ and policies/.

Each example declares what `check` must report in its leading comment lines (the convention of
examples/negative, with optional related lines and, for positives, the exact instance types):

    # expect: <rule> line <N> [related <N>, <N>...]   one per error finding (a multiset)
    # warnings: <rule> line <N>                         one per warning finding
    # instance-types: <type>, <type>...                 a positive's exact list of instance types

A positive must report no errors, exactly its warnings, and prove every Provisioner satisfiable with a witness
among its instance types; a negative must report exactly its errors (rule, line, related lines) and warnings.
Each directory is checked by one CLI run (JSON), whose findings are then compared file by file; separate runs
check the exit codes, the text output and the flags.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK_DIR = ROOT / "examples" / "check"
POSITIVES = sorted((CHECK_DIR / "positive").glob("*.yaml"))
NEGATIVES = sorted((CHECK_DIR / "negative").glob("*.yaml"))

_EXPECT = re.compile(
    r"# expect: (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*)(?: related (?P<related>[1-9][0-9]*(?:, [1-9][0-9]*)*))?"
)
_WARNING = re.compile(r"# warnings: (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*)")
_TYPES = re.compile(r"# instance-types: (?P<types>[a-z0-9.-]+(?:, [a-z0-9.-]+)*)")

#: The conflict kinds of the issue, each with the example that shows it and the rule it must report.
CONFLICT_KINDS = {
    "In vs NotIn": ("conflict-in-vs-notin.yaml", "requirements-conflict"),
    "Gt vs Lt bounds": ("conflict-gt-vs-lt.yaml", "requirements-conflict"),
    "label vs requirement": ("conflict-label-vs-requirement.yaml", "requirements-conflict"),
    "arch vs family": ("conflict-arch-vs-family.yaml", "requirements-conflict"),
    "GPU requirement on a non-GPU family": ("conflict-gpu-on-non-gpu-family.yaml", "requirements-conflict"),
    "zone not in region": ("unknown-zone-not-in-region.yaml", "zone-outside-region"),
    "capacity-type value unknown": ("no-instance-type-capacity-type-unknown.yaml", "no-instance-type"),
    "misspelt instance type": ("unknown-instance-type-typo.yaml", "unknown-instance-type"),
    "consistent but no instance type": ("no-instance-type-too-many-cpus.yaml", "no-instance-type"),
}

Finding = tuple[str, int, tuple[int, ...]]


@dataclass(frozen=True)
class Header:
    errors: Counter[Finding]
    warnings: Counter[tuple[str, int]]
    instance_types: tuple[str, ...] | None = None
    related_declared: frozenset[tuple[str, int]] = field(default_factory=frozenset)


def read_header(path: Path) -> Header:
    errors: Counter[Finding] = Counter()
    warnings: Counter[tuple[str, int]] = Counter()
    declared: set[tuple[str, int]] = set()
    types: tuple[str, ...] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# expect"):
            match = _EXPECT.fullmatch(line)
            assert match, f"{path.name}: malformed header {line!r}; write '# expect: <rule> line <N> [related <N>]'"
            related = tuple(int(n) for n in match["related"].split(", ")) if match["related"] else ()
            errors[(match["rule"], int(match["line"]), related)] += 1
            if match["related"]:
                declared.add((match["rule"], int(match["line"])))
        elif line.startswith("# warning"):
            match = _WARNING.fullmatch(line)
            assert match, f"{path.name}: malformed header {line!r}; write '# warnings: <rule> line <N>'"
            warnings[(match["rule"], int(match["line"]))] += 1
        elif line.startswith("# instance-types"):
            match = _TYPES.fullmatch(line)
            assert match, f"{path.name}: malformed header {line!r}; write '# instance-types: <a>, <b>'"
            types = tuple(match["types"].split(", "))
    return Header(errors, warnings, types, frozenset(declared))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "check", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def directory_report(directory: str) -> tuple[int, dict[str, Any]]:
    """One `check DIR --output json` run per directory, shared by the per-file tests."""
    result = run_cli(directory, "--output", "json")
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def file_report(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    _, report = directory_report(relative(path.parent))
    file = relative(path)
    findings = [f for f in report["findings"] if f["file"] == file]
    provisioners = [p for p in report["provisioners"] if p["file"] == file]
    return findings, provisioners


def describe(findings: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"  {f['severity']} {f['rule']} line {f['line']} related {[r['line'] for r in f.get('related', [])]}: "
        f"{f['message']}"
        for f in findings
    )


def test_the_examples_exist_and_cover_every_conflict_kind() -> None:
    assert len(POSITIVES) >= 6, POSITIVES
    assert len(NEGATIVES) >= 12, NEGATIVES
    names = {p.name: p for p in NEGATIVES}
    for kind, (file, rule) in CONFLICT_KINDS.items():
        assert file in names, f"no example for {kind}: {file}"
        assert rule in {r for r, _, _ in read_header(names[file]).errors}, f"{file} must expect {rule} ({kind})"


@pytest.mark.parametrize("path", NEGATIVES, ids=[p.name for p in NEGATIVES])
def test_negative_example_reports_exactly_its_findings(path: Path) -> None:
    header = read_header(path)
    assert header.errors, f"{path.name}: a negative example needs '# expect:' headers"
    findings, provisioners = file_report(path)
    errors = [f for f in findings if f["severity"] == "error"]
    found: Counter[Finding] = Counter()
    for f in errors:
        related = tuple(r["line"] for r in f.get("related", []))
        # An expectation without `related` leaves the related lines open.
        if related and (f["rule"], f["line"]) not in header.related_declared:
            related = ()
        found[(f["rule"], f["line"], related)] += 1
    assert found == header.errors, (
        f"{path.name}\n  missing:    {sorted((header.errors - found).elements())}"
        f"\n  unexpected: {sorted((found - header.errors).elements())}\n{describe(findings)}"
    )
    warnings = Counter((f["rule"], f["line"]) for f in findings if f["severity"] == "warning")
    assert warnings == header.warnings, f"{path.name}: warnings differ\n{describe(findings)}"
    assert all(f["object"].startswith("Provisioner/") for f in errors)
    assert all(p["verdict"] == "unsat" and p["instance_types"] == [] for p in provisioners)


@pytest.mark.parametrize("path", POSITIVES, ids=[p.name for p in POSITIVES])
def test_positive_example_is_proven_with_its_instance_types(path: Path) -> None:
    header = read_header(path)
    assert not header.errors, f"{path.name}: a positive example cannot expect errors"
    findings, provisioners = file_report(path)
    assert [f for f in findings if f["severity"] == "error"] == [], describe(findings)
    warnings = Counter((f["rule"], f["line"]) for f in findings if f["severity"] == "warning")
    assert warnings == header.warnings, f"{path.name}: warnings differ\n{describe(findings)}"
    assert provisioners, f"{path.name}: no Provisioner was checked"
    for proven in provisioners:
        assert proven["verdict"] == "sat"
        types = proven["instance_types"]
        assert types == sorted(types) and proven["count"] == len(types) > 0
        witness = proven["witness"]
        assert witness["instance_type"] in types
        assert witness["zone"] in proven["zones"] and witness["capacity_type"] in proven["capacity_types"]
        if header.instance_types is not None:
            assert tuple(types) == header.instance_types


def test_directories_exit_with_the_right_codes() -> None:
    assert directory_report(relative(CHECK_DIR / "negative"))[0] == 1
    assert directory_report(relative(CHECK_DIR / "positive"))[0] == 0


def test_the_policy_repo_passes_check() -> None:
    result = run_cli("--output", "json")  # default PATHS: policies/
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    assert report["summary"]["errors"] == 0
    assert set(report) == {"findings", "summary", "provisioners"}
    assert {p["object"] for p in report["provisioners"]} >= {"Provisioner/default", "Provisioner/gpu"}
    assert all(p["verdict"] == "sat" and p["count"] > 0 for p in report["provisioners"])


def test_the_validate_positives_pass_check_too() -> None:
    result = run_cli("examples/positive", "--output", "json")
    report = json.loads(result.stdout)
    assert report["summary"]["errors"] == 0, describe(report["findings"])
    assert result.returncode == 0


def test_text_output_lists_each_provisioner_with_a_witness() -> None:
    result = run_cli(relative(CHECK_DIR / "positive" / "pinned-instance-types.yaml"))
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[-1].startswith(
        "checked 2 objects (1 AWSNodeTemplate, 1 Provisioner) in 1 file: 0 errors, 0 warnings"
    )
    assert re.fullmatch(
        r"examples/check/positive/pinned-instance-types\.yaml:6:9: info: Provisioner/pinned: 2 instance types, "
        r"e\.g\. m5\.(large|2xlarge) \(us-east-1[ab], (spot|on-demand)\)",
        lines[0],
    ), lines


def test_text_output_of_a_conflict_names_both_lines() -> None:
    result = run_cli(relative(CHECK_DIR / "negative" / "conflict-arch-vs-family.yaml"))
    assert result.returncode == 1
    assert (
        "conflict-arch-vs-family.yaml:12:7: error: Provisioner/graviton: kubernetes.io/arch In [arm64] conflicts with "
        "karpenter.k8s.aws/instance-family In [c5]: no c5 instance type is arm64 [requirements-conflict]"
    ) in result.stdout
    assert "    related: examples/check/negative/conflict-arch-vs-family.yaml:15:7" in result.stdout


def test_sarif_carries_the_related_lines() -> None:
    result = run_cli(relative(CHECK_DIR / "negative" / "conflict-gt-vs-lt.yaml"), "--output", "sarif")
    assert result.returncode == 1
    [finding] = json.loads(result.stdout)["runs"][0]["results"]
    assert finding["ruleId"] == "requirements-conflict"
    assert finding["locations"][0]["physicalLocation"]["region"]["startLine"] == 9
    assert finding["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 12


def test_warnings_fail_only_with_fail_on_warn() -> None:
    path = relative(CHECK_DIR / "positive" / "notin-unknown-type.yaml")
    assert run_cli(path).returncode == 0
    assert run_cli(path, "--fail-on-warn").returncode == 1


@pytest.mark.parametrize(
    "args",
    [
        ("examples/check/nope",),
        ("policies", "--region", "xx-nowhere-1"),
        ("policies", "--catalog", "examples/check/missing-catalog.json"),
        ("policies", "--timeout-ms", "0"),
        ("policies", "--output", "yaml"),
    ],
    ids=["missing-path", "unknown-region", "missing-catalog", "zero-timeout", "bad-output"],
)
def test_cannot_run_exits_2(args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
