"""PlacementTest expectations (`karpenter-policy test`, and `check --workloads`): each field holding and failing, at
the expectation's line, with the expected and planned values; an unknown workload; a malformed test file; the
command's exit codes and formats; the example under examples/workloads/tests."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.checks.findings import Location
from karpenter_policy.checks.options import PolicyOptions
from karpenter_policy.checks.proof.placementtests import Expectation, PlacementTest, failures_of
from karpenter_policy.commands.check import CheckRun, check_command, run_check
from karpenter_policy.commands.test import test_command as run_test_command

ROOT = Path(__file__).resolve().parents[3]

POLICIES = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: graviton-spot
spec:
  weight: 10
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
    - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
    - {key: kubernetes.io/arch, operator: In, values: [arm64]}
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6g, m6g]}
  provider:
    subnetSelector: {karpenter.sh/discovery: test}
    securityGroupSelector: {karpenter.sh/discovery: test}
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: steady
spec:
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
  provider:
    subnetSelector: {karpenter.sh/discovery: test}
    securityGroupSelector: {karpenter.sh/discovery: test}
"""

APPS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/arch: arm64}
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: db}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      nodeSelector: {karpenter.sh/provisioner-name: steady}
      containers: [{name: db, image: postgres, resources: {requests: {cpu: "1", memory: 2Gi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: huge}
spec:
  replicas: 1
  selector: {matchLabels: {app: huge}}
  template:
    metadata: {labels: {app: huge}}
    spec:
      containers: [{name: huge, image: x, resources: {requests: {cpu: "5000"}}}]
"""

#: name → (workload, expect): each field once holding (`ok-…`) and once not (`bad-…`).
CASES: dict[str, tuple[str, str]] = {
    "ok-provisioner": ("{kind: Deployment, name: web}", "{provisioner: graviton-spot}"),
    "bad-provisioner": ("{kind: Deployment, name: web}", "{provisioner: steady}"),
    "ok-nodepool": ("{kind: Deployment, name: db}", "{nodePool: steady}"),
    "bad-nodepool": ("{kind: Deployment, name: db}", "{nodePool: graviton-spot}"),
    "ok-capacity": ("{kind: Deployment, name: web, namespace: shop}", "{capacityTypes: [spot]}"),
    "bad-capacity": ("{kind: Deployment, name: web}", "{capacityTypes: [on-demand]}"),
    "ok-zones": ("{kind: Deployment, name: web}", "{zones: [us-east-1a, us-east-1b]}"),
    "bad-zones": ("{kind: Deployment, name: db}", "{zones: [us-east-1a]}"),
    "ok-arch": ("{kind: Deployment, name: web}", "{architectures: [arm64]}"),
    "bad-arch": ("{kind: Deployment, name: db}", "{architectures: [arm64]}"),
    "ok-families": ("{kind: Deployment, name: web}", "{instanceFamilies: [c6g, m6g, r6g]}"),
    "bad-families": ("{kind: Deployment, name: web}", "{instanceFamilies: [c6g]}"),
    "ok-unschedulable": ("{kind: Deployment, name: huge}", "{unschedulable: true, reason: 5000 vCPU}"),
    "bad-unschedulable": ("{kind: Deployment, name: web}", "{unschedulable: true}"),
    "bad-reason": ("{kind: Deployment, name: huge}", "{unschedulable: true, reason: no such words}"),
    "bad-schedulable": ("{kind: Deployment, name: huge}", "{provisioner: steady}"),
    "ok-cost": ("{kind: Deployment, name: db}", "{maxMonthlyCost: 1000}"),
    "bad-cost": ("{kind: Deployment, name: db}", "{maxMonthlyCost: 1}"),
    "bad-unknown-workload": ("{kind: Deployment, name: ghost}", "{zones: [us-east-1a]}"),
    "bad-wrong-namespace": ("{kind: Deployment, name: web, namespace: default}", "{zones: [us-east-1a]}"),
}

#: name → what the failure message says after `expected`
FAILURES = {
    "bad-provisioner": "expected provisioner steady, planned [graviton-spot]",
    "bad-nodepool": "expected nodePool graviton-spot, planned [steady]",
    "bad-capacity": "expected capacity types [on-demand], planned [spot]",
    "bad-zones": "expected zones [us-east-1a], planned [us-east-1a, us-east-1b,",
    "bad-arch": "expected architectures [arm64], planned [amd64]",
    "bad-families": "expected instance families [c6g], planned [c6g, m6g]",
    "bad-unschedulable": "expected unschedulable, planned Provisioner/graviton-spot",
    "bad-reason": "expected reason containing 'no such words', planned",
    "bad-schedulable": "expected every replica placed, planned unschedulable:",
    "bad-cost": "expected at most $1.00 a month, planned $",
    "bad-unknown-workload": "Deployment/ghost: the reference matches no workload among the --workloads paths",
    "bad-wrong-namespace": "the reference matches no workload",
}


def _tests_yaml(cases: dict[str, tuple[str, str]]) -> str:
    lines = [
        "apiVersion: karpenter-policy.dev/v1alpha1",
        "kind: PlacementTest",
        "metadata: {name: expectations}",
        "spec:",
        "  tests:",
    ]
    for name, (workload, expect) in cases.items():
        lines += [f"    - name: {name}", f"      workload: {workload}", f"      expect: {expect}"]
    return "\n".join(lines) + "\n"


def _write(tmp_path: Path, tests: str) -> tuple[Path, Path, Path]:
    policies, apps, suite = tmp_path / "policies", tmp_path / "apps", tmp_path / "tests"
    for directory in (policies, apps, suite):
        directory.mkdir()
    (policies / "p.yaml").write_text(POLICIES)
    (apps / "a.yaml").write_text(APPS)
    (suite / "placement.yaml").write_text(tests)
    return policies, apps, suite / "placement.yaml"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    """`test` over every case at once (one plan), JSON output: exit code, report, the tests file."""
    tmp_path = tmp_path_factory.mktemp("placement")
    policies, apps, suite = _write(tmp_path, _tests_yaml(CASES))
    result = run_test_command([str(policies), str(suite)], PolicyOptions(workload_paths=(str(apps),)), "json")
    return result.exit_code, json.loads(result.stdout), suite


def _line_of_test(suite: Path, name: str) -> int:
    """The line of the test's `expect:` (its expectations are written inline there)."""
    lines = suite.read_text().splitlines()
    start = lines.index(f"    - name: {name}")
    return start + 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_expectation_holds_or_fails_at_its_line(ran: tuple[int, dict[str, Any], Path], name: str) -> None:
    code, report, suite = ran
    mine = [f for f in report["findings"] if f["message"].startswith(f"test {name}:")]
    if name.startswith("ok-"):
        assert mine == []
        return
    assert len(mine) == 1, mine
    finding = mine[0]
    assert finding["rule"] == "placement-test-failed" and finding["severity"] == "error"
    assert FAILURES[name] in finding["message"]
    assert finding["file"] == str(suite)
    expected_line = _line_of_test(suite, name) - (1 if name in ("bad-unknown-workload", "bad-wrong-namespace") else 0)
    assert finding["line"] == expected_line
    assert finding["object"] == "PlacementTest/expectations"


def test_the_summary_counts_the_tests(ran: tuple[int, dict[str, Any], Path]) -> None:
    code, report, _ = ran
    failed = sum(1 for name in CASES if name.startswith("bad-"))
    assert code == 1
    assert report["placement_tests"] == {"tests": len(CASES), "passed": len(CASES) - failed, "failed": failed}


def test_a_malformed_test_file_is_an_error_at_its_line(tmp_path: Path) -> None:
    tests = (
        "apiVersion: karpenter-policy.dev/v1alpha1\n"
        "kind: PlacementTest\n"
        "metadata: {name: typo}\n"
        "spec:\n"
        "  tests:\n"
        "    - name: t\n"
        "      workload: {kind: Deployment, name: web}\n"
        "      expect:\n"
        "        zone: [us-east-1a]\n"
    )
    policies, apps, suite = _write(tmp_path, tests)
    result = run_test_command([str(policies), str(suite)], PolicyOptions(workload_paths=(str(apps),)), "json")
    assert result.exit_code == 1 and result.stderr == ""
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["rule"] == "schema" and (finding["file"], finding["line"]) == (str(suite), 9)
    assert "did you mean zones?" in finding["message"]


def test_check_runs_the_tests_with_workloads_and_says_so(tmp_path: Path) -> None:
    policies, apps, suite = _write(tmp_path, _tests_yaml({k: CASES[k] for k in ("ok-arch", "bad-arch")}))
    result = check_command([str(policies), str(suite)], options=PolicyOptions(workload_paths=(str(apps),)))
    assert result.exit_code == 1
    assert f"{suite}:11:" in result.stdout and "test bad-arch: Deployment/db: expected architectures" in result.stdout
    assert "placement tests: 1 of 2 hold (1 failed)\n" in result.stdout
    without = check_command([str(policies), str(suite)])
    assert without.exit_code == 0 and "placement tests" not in without.stdout


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "test", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_cli_fails_with_file_and_line_and_writes_junit(tmp_path: Path) -> None:
    policies, apps, suite = _write(tmp_path, _tests_yaml({k: CASES[k] for k in ("ok-zones", "bad-capacity")}))
    failed = _cli(str(policies), str(suite), "--workloads", str(apps))
    assert failed.returncode == 1, failed.stderr
    assert f"{suite}:11:" in failed.stdout and "expected capacity types [on-demand]" in failed.stdout
    assert "placement tests: 1 of 2 hold (1 failed)" in failed.stdout
    junit = _cli(str(policies), str(suite), "--workloads", str(apps), "--output", "junit")
    assert junit.returncode == 1
    suite_xml = ET.fromstring(junit.stdout)
    (case,) = suite_xml.findall("testcase")
    assert case.get("name") == str(suite) and case.find("failure") is not None


def test_cli_passes_on_the_example_and_refuses_to_test_nothing() -> None:
    held = _cli("examples/workloads/policies", "examples/workloads/tests", "--workloads", "examples/workloads/apps")
    assert held.returncode == 0, held.stdout + held.stderr
    assert "placement tests: 3 of 3 hold" in held.stdout
    nothing = _cli("examples/workloads/policies", "--workloads", "examples/workloads/apps")
    assert nothing.returncode == 2 and "no PlacementTest" in nothing.stderr


def test_markdown_is_a_comment_headed_by_the_verdict(tmp_path: Path) -> None:
    policies, apps, suite = _write(tmp_path, _tests_yaml({k: CASES[k] for k in ("ok-arch", "bad-cost")}))
    result = run_test_command([str(policies), str(suite)], PolicyOptions(workload_paths=(str(apps),)), "markdown")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "### ❌ karpenter-policy test: 1 of 2 placement tests hold"
    (failure,) = [line for line in lines if line.startswith("- ")]
    assert "`placement-test-failed`" in failure and "test bad-cost: Deployment/db: expected at most" in failure


ZONES = [f"us-east-1{letter}" for letter in "abcdef"]
FAMILIES = ["c6g", "m6g", "m5", "r6g"]


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> CheckRun:
    """The plan of the test policies and workloads (no PlacementTest): what the property below tests against."""
    policies, apps, _ = _write(tmp_path_factory.mktemp("property"), "")
    run = run_check([str(policies)], PolicyOptions(workload_paths=(str(apps),)))
    assert isinstance(run, CheckRun) and run.workloads is not None
    return run


def _holds(run: CheckRun, workload: str, key: str, values: list[str]) -> tuple[bool, str]:
    test = PlacementTest("p", "t", "Deployment", workload, None, Expectation({key: values}), Location("t.yaml", 1))
    assert run.workloads is not None
    failures = failures_of(test, run.workloads)
    return not failures, failures[0].message if failures else ""


@deterministic(60)
@given(
    workload=st.sampled_from(["web", "db"]),
    field=st.sampled_from([("zones", ZONES), ("capacityTypes", ["spot", "on-demand"]), ("instanceFamilies", FAMILIES)]),
    data=st.data(),
)
def test_an_expectation_is_a_superset_of_what_is_planned(
    planned: CheckRun, workload: str, field: tuple[str, list[str]], data: st.DataObject
) -> None:
    """Whatever set is expected: it holds for every superset of a set that holds, and a failure names a planned set
    that is not within the expected one and that itself holds."""
    key, universe = field
    expected = data.draw(st.lists(st.sampled_from(universe), min_size=1, unique=True))
    holds, message = _holds(planned, workload, key, expected)
    if holds:
        assert _holds(planned, workload, key, universe)[0]
        return
    shown = message.split(", planned [", 1)[1].rstrip("]")
    named = shown.split(", ")
    assert not set(named) <= set(expected)
    assert _holds(planned, workload, key, named)[0]
