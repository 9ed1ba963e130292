"""Acceptance: the installed `karpenter-policy validate` CLI, run as a subprocess on every file in examples/.

Each example declares what the CLI must report in its leading comment lines:

    # expect: <rule> line <N>      one per error finding (negatives only; a multiset, so repeats count)
    # warnings: <rule> line <N>    one per warning finding (positives and negatives)

A positive must exit 0 with no errors and exactly its declared warnings; a negative must exit 1 with exactly
its declared errors (rule and 1-based line) and warnings. Nothing may be written to stderr and stdout must be
the JSON report.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
POSITIVE_DIR = ROOT / "examples" / "positive"
NEGATIVE_DIR = ROOT / "examples" / "negative"
POSITIVES = sorted(POSITIVE_DIR.glob("*.yaml"))
NEGATIVES = sorted(NEGATIVE_DIR.glob("*.yaml"))
POLICY_KINDS = ("Provisioner", "AWSNodeTemplate")

_EXPECT = re.compile(r"# expect: (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*)")
_WARNING = re.compile(r"# warnings: (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*)")

Expected = Counter[tuple[str, int]]


@dataclass(frozen=True)
class Header:
    """What an example declares: error and warning findings as (rule, line) multisets."""

    errors: Expected
    warnings: Expected


def read_header(path: Path) -> Header:
    """Parse the leading comment lines of an example; a malformed `# expect`/`# warnings` line is an error."""
    errors: Expected = Counter()
    warnings: Expected = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# expect"):
            match = _EXPECT.fullmatch(line)
            assert match, f"{path.name}: malformed header {line!r}; write '# expect: <rule> line <N>'"
            errors[(match["rule"], int(match["line"]))] += 1
        elif line.startswith("# warning"):
            match = _WARNING.fullmatch(line)
            assert match, f"{path.name}: malformed header {line!r}; write '# warnings: <rule> line <N>'"
            warnings[(match["rule"], int(match["line"]))] += 1
    return Header(errors, warnings)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`karpenter-policy validate ARGS` from the repository root, through the installed package."""
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "validate", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )


@functools.cache
def _json_run(path: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(relative(path), "--output", "json")


@pytest.fixture(scope="module", autouse=True)
def _run_selected_examples_in_parallel(request: pytest.FixtureRequest) -> None:
    """Each CLI run is a subprocess of about half a second: start those of the selected examples together. Not in
    a pytest-xdist worker: its session lists every test, so each worker would run every example (CI ran them all
    twice), and the other workers keep the cores busy; there each test runs its own example (`_json_run`)."""
    if hasattr(request.config, "workerinput"):
        return
    paths = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        path = callspec.params.get("path") if callspec is not None else None
        if isinstance(path, Path) and path.parent in (POSITIVE_DIR, NEGATIVE_DIR):
            paths.add(path)
    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 2)) as pool:
        list(pool.map(_json_run, sorted(paths)))


def run_json(path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The CLI's JSON report on `path` (a file run once per session, a directory each time)."""
    result = _json_run(path) if path.is_file() else run_cli(relative(path), "--output", "json")
    assert result.stderr == "", f"unexpected stderr:\n{result.stderr}"
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        pytest.fail(f"stdout is not JSON ({error}):\n{result.stdout[:2000]}")
    return result, report


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def found(report: dict[str, Any], severity: str) -> Expected:
    return Counter((f["rule"], f["line"]) for f in report["findings"] if f["severity"] == severity)


def describe(report: dict[str, Any]) -> str:
    return "\n".join(
        f"  {f['severity']} {f['rule']} line {f['line']}:{f['column']}: {f['message']}" for f in report["findings"]
    )


def test_the_examples_exist() -> None:
    assert len(POSITIVES) >= 10, POSITIVES
    assert len(NEGATIVES) >= 30, NEGATIVES


@pytest.mark.parametrize("path", POSITIVES, ids=[p.name for p in POSITIVES])
@pytest.mark.slow  # each example through the CLI; tests/webhook/test_admission_table.py decides them in process
def test_positive_example_is_valid(path: Path) -> None:
    header = read_header(path)
    assert not header.errors, f"{path.name}: a positive example cannot expect errors"

    result, report = run_json(path)

    assert found(report, "error") == Counter(), f"{path.name} has errors:\n{describe(report)}"
    assert found(report, "warning") == header.warnings, (
        f"{path.name}: warnings differ from its '# warnings:' header\n{describe(report)}"
    )
    assert result.returncode == 0
    assert report["summary"]["files"] == 1
    assert report["summary"]["objects"] >= 1, "a positive example must contain a policy object"
    assert {f["file"] for f in report["findings"]} <= {relative(path)}


@pytest.mark.parametrize("path", NEGATIVES, ids=[p.name for p in NEGATIVES])
@pytest.mark.slow  # as above
def test_negative_example_reports_exactly_its_expected_findings(path: Path) -> None:
    header = read_header(path)
    assert header.errors, f"{path.name}: a negative example needs '# expect: <rule> line <N>' headers"

    result, report = run_json(path)

    errors = found(report, "error")
    assert errors == header.errors, (
        f"{path.name}\n  missing:    {sorted((header.errors - errors).elements())}"
        f"\n  unexpected: {sorted((errors - header.errors).elements())}\n{describe(report)}"
    )
    assert found(report, "warning") == header.warnings, f"{path.name}: warnings differ\n{describe(report)}"
    assert result.returncode == 1
    assert report["summary"]["errors"] == sum(header.errors.values())
    assert {f["file"] for f in report["findings"]} == {relative(path)}


def test_every_rule_has_an_example() -> None:
    """Errors of every rule appear in some negative, and both warning rules in some positive."""
    error_rules = {rule for path in NEGATIVES for rule, _ in read_header(path).errors}
    warning_rules = {rule for path in POSITIVES for rule, _ in read_header(path).warnings}
    assert error_rules >= {
        "parse-error", "schema", "invalid-requirement", "restricted-label", "invalid-spec", "duplicate-name",
    }
    assert warning_rules >= {"deprecated-label", "unresolved-reference"}


def test_text_output_names_file_line_and_column_and_ends_with_a_summary() -> None:
    path = NEGATIVE_DIR / "invalid-spec-taint-effect.yaml"
    header = read_header(path)

    result = run_cli(relative(path))

    assert result.returncode == 1
    assert result.stderr == ""
    *finding_lines, summary = result.stdout.splitlines()
    pattern = re.compile(
        re.escape(relative(path)) + r":(?P<line>\d+):(?P<column>\d+): error: Provisioner/gpu: "
        r"taint effect '\w+' is not one of NoSchedule, PreferNoSchedule, NoExecute \[invalid-spec\]"
    )
    matches = [pattern.fullmatch(line) for line in finding_lines]
    assert all(matches), finding_lines
    assert Counter(("invalid-spec", int(m["line"])) for m in matches if m) == header.errors
    assert summary == "validated 2 objects (1 AWSNodeTemplate, 1 Provisioner) in 1 file: 2 errors, 0 warnings"


def _count_kinds(paths: list[Path]) -> tuple[Counter[str], Counter[str]]:
    """Policy kinds and other kinds in `paths`, counted independently of the CLI (items of a List count)."""
    policy: Counter[str] = Counter()
    other: Counter[str] = Counter()
    for path in paths:
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            items = document["items"] if document.get("kind") == "List" else [document]
            for item in items:
                (policy if item["kind"] in POLICY_KINDS else other)[item["kind"]] += 1
    return policy, other


def test_the_positive_folder_validates_as_one_policy_repository() -> None:
    """All positives at once: no duplicate names across files, and the summary counts every object."""
    policy, other = _count_kinds(POSITIVES)
    declared_warnings: Counter[tuple[str, str, int]] = Counter()
    for path in POSITIVES:
        for (rule, line), n in read_header(path).warnings.items():
            declared_warnings[(relative(path), rule, line)] += n

    result, report = run_json(POSITIVE_DIR)

    assert result.returncode == 0, describe(report)
    summary = report["summary"]
    assert summary["errors"] == 0
    assert summary["files"] == len(POSITIVES)
    assert summary["kinds"] == dict(policy)
    assert summary["objects"] == sum(policy.values())
    assert summary["skipped"] == dict(other)
    assert other, "the positives include other kinds (a Deployment and a ConfigMap) to be skipped"
    assert Counter((f["file"], f["rule"], f["line"]) for f in report["findings"]) == declared_warnings

    text = run_cli(relative(POSITIVE_DIR))
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(policy.items()))
    skipped = ", ".join(f"{kind}: {n}" for kind, n in sorted(other.items()))
    assert text.stdout.splitlines()[-1] == (
        f"validated {sum(policy.values())} objects ({kinds}) in {len(POSITIVES)} files; "
        f"skipped {sum(other.values())} of other kinds ({skipped}): 0 errors, {declared_warnings.total()} warnings"
    )
    assert text.returncode == 0
