"""Acceptance: `karpenter-policy check POLICIES --workloads PATHS`, the installed CLI run as a subprocess on
examples/workloads/.

Each example file declares what the run must report about it in its leading comment lines (the convention of
examples/negative and examples/check):

    # expect: <rule> line <N>      one per error finding of the file (a multiset)
    # warnings: <rule> line <N>    one per warning finding of the file
    # provisioner: <name>          one per workload of the file, in order: the provisioner that takes it

Runs: the policies with the apps (every app placed as declared, no finding), the policies with the negative
workloads (each file exactly its errors), and every scenario directory on itself (policies and workloads in one
place: overlap, shadowed, limits, DaemonSet overhead, relaxation).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workloads"
POLICIES = EXAMPLES / "policies"
APPS = sorted((EXAMPLES / "apps").glob("*.yaml"))
NEGATIVES = sorted((EXAMPLES / "negative").glob("*.yaml"))
SCENARIOS = sorted(p for p in (EXAMPLES / "scenarios").iterdir() if p.is_dir())

_EXPECT = re.compile(r"# expect: (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*)")
_WARNING = re.compile(r"# warnings: (?P<rule>[a-z-]+) line (?P<line>[1-9][0-9]*)")
_PROVISIONER = re.compile(r"# provisioner: (?P<name>[a-z0-9-]+)")

#: The reasons of the issue, in the words the CLI must use, and the example that shows each.
ISSUE_REASONS = {
    "arm64-on-amd64-only.yaml": "provisioner default: kubernetes.io/arch In [arm64] not in [amd64]",
    "gpu-without-toleration.yaml": (
        "no provisioner can launch a node for it:\n  provisioner gpu: taint nvidia.com/gpu=true:NoSchedule not "
        'tolerated\n    fix: add tolerations: [{key: nvidia.com/gpu, operator: Equal, value: "true", effect: '
        "NoSchedule}] to the pod spec (and nodeSelector: {accelerator: nvidia} to keep it on these nodes); this "
        "provisioner then takes it\n"
    ),
    "label-without-known-values.yaml": (
        'provisioner batch: the pod requires label team, which its nodes never have (Karpenter: "label team does not '
        'have known values")'
    ),
    "label-value-typo.yaml": (
        "provisioner batch: workload In [batchs] not in [batch] (did you mean workload: batch?)\n"
        "    fix: set nodeSelector: {workload: batch} in the pod spec; this provisioner then takes it"
    ),
    "gpu-too-large.yaml": (
        "provisioner gpu: no instance type has 96 vCPU and 2 GPUs under karpenter.k8s.aws/instance-size In "
        "[2xlarge, 4xlarge]"
    ),
}


@dataclass(frozen=True)
class Header:
    errors: Counter[tuple[str, int]]
    warnings: Counter[tuple[str, int]]
    provisioners: tuple[str, ...]


def read_header(path: Path) -> Header:
    errors: Counter[tuple[str, int]] = Counter()
    warnings: Counter[tuple[str, int]] = Counter()
    provisioners: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        for pattern, into in ((_EXPECT, errors), (_WARNING, warnings)):
            match = pattern.fullmatch(line)
            if match:
                into[(match["rule"], int(match["line"]))] += 1
        if line.startswith(("# expect", "# warning")):
            assert _EXPECT.fullmatch(line) or _WARNING.fullmatch(line), f"{path.name}: malformed header {line!r}"
        match = _PROVISIONER.fullmatch(line)
        if match:
            provisioners.append(match["name"])
    return Header(errors, warnings, tuple(provisioners))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def json_report(policies: str, workloads: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(policies, "--workloads", workloads, "--output", "json")
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def of_file(report: dict[str, Any], path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    file = relative(path)
    return (
        [f for f in report["findings"] if f["file"] == file],
        [w for w in report["workloads"] if w["file"] == file],
    )


def describe(findings: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {f['severity']} {f['rule']} line {f['line']}: {f['message']}" for f in findings)


def assert_matches_header(path: Path, report: dict[str, Any]) -> None:
    header = read_header(path)
    findings, workloads = of_file(report, path)
    errors = Counter((f["rule"], f["line"]) for f in findings if f["severity"] == "error")
    warnings = Counter((f["rule"], f["line"]) for f in findings if f["severity"] == "warning")
    assert errors == header.errors, f"{path.name}: errors differ\n{describe(findings)}"
    assert warnings == header.warnings, f"{path.name}: warnings differ\n{describe(findings)}"
    placed = tuple(w["provisioner"] for w in workloads if w["schedulable"])
    assert placed == header.provisioners, f"{path.name}: placed on {placed}, expected {header.provisioners}"


def test_the_examples_exist() -> None:
    assert len(APPS) >= 7 and len(NEGATIVES) >= 5
    assert {p.name for p in SCENARIOS} >= {"overlap", "shadowed", "limits", "daemonset-overhead"}
    names = {p.name for p in APPS}
    assert {"inflate.yaml", "spark-driver-pod-template.yaml", "spark-executor-pod-template.yaml"} <= names
    assert all(read_header(p).errors for p in NEGATIVES)


@pytest.mark.parametrize("path", APPS, ids=[p.name for p in APPS])
def test_each_app_lands_where_its_header_says(path: Path) -> None:
    code, report = json_report(relative(POLICIES), relative(EXAMPLES / "apps"))
    assert code == 0, describe(report["findings"])
    assert_matches_header(path, report)


def test_the_apps_run_is_clean_and_places_every_workload() -> None:
    code, report = json_report(relative(POLICIES), relative(EXAMPLES / "apps"))
    assert code == 0 and report["findings"] == []
    assert {"findings", "summary", "provisioners", "workloads", "capacity"} == set(report)
    assert all(w["schedulable"] and w["count"] == len(w["instance_types"]) > 0 for w in report["workloads"])
    capacity = report["capacity"]  # every replica on new nodes of the provisioners that take them, priced
    replicas = {w["object"]: w["replicas"] for w in report["workloads"]}
    assert replicas["Deployment/inflate"] == 0 and replicas["StatefulSet/orders-db"] == 1
    assert capacity["pods"] == sum(replicas.values()) and capacity["unscheduled"] == {}
    assert capacity["node_count"] == len(capacity["nodes"]) > 0 and capacity["estimated"] is True
    assert capacity["cost_per_hour"] == pytest.approx(sum(n["price"] for n in capacity["nodes"]))
    placed = {w: sum(n["workloads"].get(w, 0) for n in capacity["nodes"]) for w in replicas}
    assert placed == replicas
    assert all(0 < n["cpu_utilisation"] <= 1 and n["provisioner"] in {"default", "kspark", "gpu", "batch"}
               for n in capacity["nodes"])
    assert report["summary"]["kinds"]["DaemonSet"] == 1 and report["summary"]["errors"] == 0
    inflate = next(w for w in report["workloads"] if w["object"] == "Deployment/inflate")
    assert inflate["provisioner"] == "default" and inflate["requests"] == {"cpu": "1"}
    assert inflate["launch"]["capacity_type"] == "spot"
    assert inflate["daemonsets"] == ["node-agent"] and inflate["daemonset_overhead"] == {
        "cpu": "200m",
        "memory": "256Mi",
        "pods": "1",
    }
    assert inflate["refused_by"] == {"gpu": "taint", "batch": "taint"}


@pytest.mark.parametrize("path", NEGATIVES, ids=[p.name for p in NEGATIVES])
def test_each_negative_reports_exactly_its_errors(path: Path) -> None:
    code, report = json_report(relative(POLICIES), relative(EXAMPLES / "negative"))
    assert code == 1
    assert_matches_header(path, report)
    findings, workloads = of_file(report, path)
    for finding in findings:
        assert finding["object"].split("/")[0] in {"Deployment", "Job", "Pod", "StatefulSet", "CronJob"}
        if finding["rule"] == "workload-unschedulable":
            header, *lines = finding["message"].split("\n")
            assert header == "no provisioner can launch a node for it:"
            reasons = [line for line in lines if line.startswith("  provisioner ")]
            assert len(reasons) == 4, finding["message"]  # one line per provisioner
            assert all(line.startswith(("  provisioner ", "    fix: ")) for line in lines), finding["message"]
    for workload in workloads:
        assert not workload["schedulable"] and workload["provisioner"] is None
        assert set(workload["reasons"]) == {"default", "kspark", "gpu", "batch"}


@pytest.mark.parametrize(("file", "reason"), sorted(ISSUE_REASONS.items()))
def test_the_reasons_of_the_issue_in_plain_words(file: str, reason: str) -> None:
    _, report = json_report(relative(POLICIES), relative(EXAMPLES / "negative"))
    findings, _ = of_file(report, EXAMPLES / "negative" / file)
    assert any(reason in f["message"] for f in findings), describe(findings)


@pytest.mark.parametrize("directory", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_each_scenario_reports_exactly_its_findings(directory: Path) -> None:
    code, report = json_report(relative(directory), relative(directory))
    files = sorted(directory.glob("*.yaml"))
    for path in files:
        assert_matches_header(path, report)
    listed = {f["file"] for f in report["findings"]}
    assert listed <= {relative(p) for p in files}
    assert code == (1 if any(f["severity"] == "error" for f in report["findings"]) else 0)


def test_text_output_places_the_seed_workloads() -> None:
    result = run_cli(relative(POLICIES), "--workloads", relative(EXAMPLES / "apps"))
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert any(
        re.fullmatch(
            r"examples/workloads/apps/inflate\.yaml:13:3: info: Deployment/inflate → Provisioner/default: \d+ "
            r"instance types, e\.g\. \S+ \(us-east-1\w, spot\)",
            line,
        )
        for line in lines
    ), lines
    assert any(
        line.startswith(
            "examples/workloads/apps/spark-driver-pod-template.yaml:9:1: info: Pod/spark-driver-pod-template → "
            "Provisioner/kspark: 18 instance types"
        )
        for line in lines
    ), lines
    assert lines[-1].startswith("checked 17 objects (4 AWSNodeTemplate, ")
    assert lines[-1].endswith(": 0 errors, 0 warnings")


def test_text_output_of_an_unschedulable_workload() -> None:
    result = run_cli(relative(POLICIES), "--workloads", relative(EXAMPLES / "negative" / "arm64-on-amd64-only.yaml"))
    assert result.returncode == 1
    # the provisioners whose taints the pod accepts first (#27: the one the user meant leads), then the tainted ones;
    # one reason per line under the finding, the rule id on its first line
    assert (
        "examples/workloads/negative/arm64-on-amd64-only.yaml:13:3: error: Deployment/graviton-api: no provisioner "
        "can launch a node for it: [workload-unschedulable]\n"
        "    provisioner default: kubernetes.io/arch In [arm64] not in [amd64]\n"
        "    provisioner kspark: kubernetes.io/arch In [arm64] not in [amd64]\n"
        "    provisioner gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated\n"
        "    provisioner batch: taint workload=batch:NoSchedule not tolerated\n"
    ) in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) < 160


def test_the_text_placement_line_says_where_the_plan_puts_the_pods() -> None:
    """#27: `Deployment/web → Provisioner/default` contradicted the plan, which packs web's pod onto a kspark node
    launched for the Spark pods; the line names the plan's provisioner, and the one the pod alone would take."""
    result = run_cli(relative(POLICIES), "--workloads", relative(EXAMPLES / "apps"))
    _, report = json_report(relative(POLICIES), relative(EXAMPLES / "apps"))
    web_nodes = {n["provisioner"] for n in report["capacity"]["nodes"] if "Deployment/web" in n["workloads"]}
    assert web_nodes == {"kspark"}
    (line,) = [line for line in result.stdout.splitlines() if "info: Deployment/web " in line]
    assert re.search(
        r"info: Deployment/web → Provisioner/kspark \(1 pod\) in the plan, next to other workloads' pods: \S+ "
        r"\(us-east-1\w, (spot|on-demand)\); alone it would go to Provisioner/default: \d+ instance types",
        line,
    ), line


def test_a_workload_without_an_architecture_on_a_mixed_pool_is_warned() -> None:
    """#27: a workload that names no kubernetes.io/arch, on a pool of m7g (arm64) and m7i (amd64) types: a
    `multi-arch` warning naming both architectures and the nodeSelector that pins one; the one that pins amd64 has
    none."""
    scenario = relative(EXAMPLES / "scenarios" / "multi-arch")
    _, report = json_report(scenario, scenario)
    (warning,) = [f for f in report["findings"] if f["rule"] == "multi-arch"]
    assert warning["object"] == "Deployment/web-frontend" and warning["severity"] == "warning"
    assert "amd64 (m7i." in warning["message"] and "arm64 (m7g." in warning["message"]
    assert warning["message"].endswith("nodeSelector: {kubernetes.io/arch: amd64}")
    assert run_cli(scenario, "--workloads", scenario, "--strict").returncode == 1


def test_the_json_output_keeps_karpenters_words_and_the_fix() -> None:
    _, report = json_report(relative(POLICIES), relative(EXAMPLES / "negative"))
    workloads = {w["object"]: w for w in report["workloads"]}
    team = workloads["Job/feature-backfill"]["reasons"]["batch"]
    assert team["karpenter"] == "label team does not have known values" and "fix" not in team
    gpu = workloads["Pod/cuda-smoke-test"]["reasons"]["gpu"]
    assert gpu["kind"] == "taint" and gpu["fix"].startswith("add tolerations: [{key: nvidia.com/gpu, operator: Equal")
    assert "karpenter" not in gpu
    typo = workloads["Job/nightly-compaction"]["reasons"]["batch"]
    assert typo["fix"] == "set nodeSelector: {workload: batch} in the pod spec; this provisioner then takes it"


def test_sarif_and_github_carry_the_workload_findings() -> None:
    negative = relative(EXAMPLES / "negative" / "gpu-without-toleration.yaml")
    sarif = json.loads(run_cli(relative(POLICIES), "--workloads", negative, "--output", "sarif").stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "workload-unschedulable" and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 9
    rules = {r["id"]: r["shortDescription"]["text"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert {"workload-unschedulable", "overlap", "shadowed", "limits"} <= set(rules)
    github = run_cli(relative(POLICIES), "--workloads", negative, "--output", "github").stdout
    assert github.startswith("::error file=examples/workloads/negative/gpu-without-toleration.yaml,line=9,")


def test_warnings_fail_only_with_fail_on_warn() -> None:
    overlap = relative(EXAMPLES / "scenarios" / "overlap")
    assert run_cli(overlap, "--workloads", overlap).returncode == 0
    assert run_cli(overlap, "--workloads", overlap, "--fail-on-warn").returncode == 1


def test_without_workloads_nothing_changes() -> None:
    result = run_cli(relative(POLICIES), "--output", "json")
    assert result.returncode == 0
    assert set(json.loads(result.stdout)) == {"findings", "summary", "provisioners"}


def test_several_workload_paths_and_a_policy_dir_given_as_workloads_too() -> None:
    shadowed = relative(EXAMPLES / "scenarios" / "shadowed")
    result = run_cli(
        shadowed,
        "--workloads",
        shadowed,
        "--workloads",
        relative(EXAMPLES / "apps" / "inflate.yaml"),
        "--output",
        "json",
    )
    report = json.loads(result.stdout)
    assert [w["object"] for w in report["workloads"]] == ["Deployment/inflate", "Deployment/frontend", "Job/encode"]
    assert report["summary"]["skipped"] == {}  # the Deployments of the policy dir are counted as workloads
    assert report["summary"]["files"] == 3


def test_a_missing_workload_path_cannot_run() -> None:
    result = run_cli(relative(POLICIES), "--workloads", "examples/workloads/nope")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no such file or directory: examples/workloads/nope" in result.stdout
    assert "Traceback" not in result.stderr


def test_an_unreadable_workload_file_is_a_parse_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: apps/v1\nkind: Deployment\nspec: [oops\n")
    result = run_cli(relative(POLICIES), "--workloads", str(bad), "--output", "json")
    assert result.returncode == 1
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["rule"] == "parse-error" and finding["file"] == str(bad)
