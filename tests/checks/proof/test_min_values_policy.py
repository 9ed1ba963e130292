"""`--min-values-policy` (Karpenter v1.14.1's operator flag): `check --workloads` and `diff` pack NodePools keeping
their minValues — Strict by default, so a pod that would leave a node fewer distinct values than minValues asks gets
no node, with Karpenter's words; BestEffort places it on a node whose minValues is lowered, and the verdict (text and
JSON) says so. Through the CLI on examples/v1/min-values."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "v1" / "min-values"
POLICIES, APPS = "examples/v1/min-values/policies", "examples/v1/min-values/apps"
KARPENTER_WORDS = "minValues requirement is not met for label(s) (label(s)=[karpenter.k8s.aws/instance-family])"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def test_strict_is_the_default_and_refuses_the_pod_that_narrows_the_families_in_karpenters_words() -> None:
    done = cli("check", POLICIES, "--workloads", APPS, "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "examples/v1/min-values/apps/apps.yaml:31:3: error: Deployment/pinned: no NodePool can launch a node for "
        "it: [workload-unschedulable]"
    )
    assert lines[1].startswith(f"    NodePool/diverse: {KARPENTER_WORDS}: ")
    assert "carry only 1 karpenter.k8s.aws/instance-family (minValues 3)" in lines[1]
    assert len(lines) == 2  # `web`, free to use any c family, is placed
    explicit = cli("check", POLICIES, "--workloads", APPS, "-q", "--min-values-policy", "Strict")
    assert explicit.stdout == done.stdout


def test_best_effort_places_it_and_says_minvalues_was_relaxed_in_text_and_json() -> None:
    done = cli("check", POLICIES, "--workloads", APPS, "--min-values-policy", "BestEffort")
    assert done.returncode == 0, done.stdout + done.stderr
    pinned = next(line for line in done.stdout.splitlines() if "Deployment/pinned" in line)
    assert "Deployment/pinned → NodePool/diverse" in pinned
    assert (
        "(relaxed as Karpenter does: lowered the NodePool's minValues (karpenter.k8s.aws/instance-family 3 → 1) under "
        "the BestEffort policy (karpenter.sh/nodeclaim-min-values-relaxed))"
    ) in pinned
    web = next(line for line in done.stdout.splitlines() if "Deployment/web" in line)
    assert "relaxed" not in web
    report = json.loads(cli("check", POLICIES, "--workloads", APPS, "--min-values-policy", "BestEffort",
                            "--output", "json").stdout)
    text = json.dumps(report)
    assert "karpenter.sh/nodeclaim-min-values-relaxed" in text


def test_an_unknown_policy_is_a_usage_error() -> None:
    done = cli("check", POLICIES, "--workloads", APPS, "--min-values-policy", "Lenient")
    assert done.returncode == 2
    assert "'Lenient' is not one of 'Strict', 'BestEffort'" in done.stderr


@pytest.mark.parametrize(("policy", "moved"), [("Strict", True), ("BestEffort", False)])
def test_diff_reads_the_policy_lowering_minvalues_places_the_pod_only_under_strict(
    tmp_path: Path, policy: str, moved: bool
) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    shutil.copytree(EXAMPLE, base)
    shutil.copytree(EXAMPLE, head)
    pools = head / "policies" / "nodepools.yaml"
    pools.write_text(pools.read_text().replace("minValues: 3", "minValues: 1"))
    done = cli("diff", str(base), str(head), "policies", "--workloads", APPS, "--output", "json",
               "--min-values-policy", policy)
    assert done.returncode == 0, done.stdout + done.stderr
    workloads = json.loads(done.stdout).get("workloads") or []
    assert any("pinned" in json.dumps(w) for w in workloads) is moved, done.stdout


PROOFS = ("examples/v1/proofs/min-values.yaml", "examples/v1/proofs/node-class.yaml")
CATEGORIES = (
    "examples/v1/proofs/min-values.yaml:21:22: {severity}: NodePool/too-few-categories: "
    "karpenter.k8s.aws/instance-category minValues 3: the 18 instance types the NodePool admits carry only 2 (c, m): "
)


def test_the_static_rule_is_an_error_under_strict_the_default() -> None:
    """docs/rules/min-values.md: Karpenter v1.14.1's Truncate refuses the types, nothing launches."""
    for extra in ((), ("--min-values-policy", "Strict")):
        done = cli("check", *PROOFS, *extra)
        assert done.returncode == 1, done.stdout + done.stderr
        assert CATEGORIES.format(severity="error") + (
            "under the Strict minValues policy (Karpenter's default) no node is ever launched for it; lower minValues "
            "or widen the requirements [min-values]"
        ) in done.stdout.splitlines()
        assert "2 errors, 1 warning" in done.stdout


def test_the_static_rule_is_a_warning_naming_the_policy_under_best_effort() -> None:
    """Under BestEffort Karpenter launches the nodes with minValues lowered to what remains (nodeclaim.go CanAdd):
    the finding is a warning that says so, and check passes."""
    done = cli("check", *PROOFS, "--min-values-policy", "BestEffort")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert CATEGORIES.format(severity="warning") + (
        "under the BestEffort minValues policy (--min-values-policy BestEffort) Karpenter launches its nodes with "
        "minValues lowered to 2 (karpenter.sh/nodeclaim-min-values-relaxed), without the flexibility asked for; lower "
        "minValues or widen the requirements [min-values]"
    ) in lines
    team = next(line for line in lines if "team minValues 1" in line)
    assert ": warning: " in team and "lowered to 0" in team and "no instance type carries the label team" in team
    assert "0 errors, 3 warnings" in done.stdout
    strict = cli("check", *PROOFS, "--min-values-policy", "BestEffort", "--strict")
    assert strict.returncode == 1  # --strict still fails the warning



def _proof_sides(tmp_path: Path) -> tuple[Path, Path]:
    """BASE: the node class alone; HEAD: the NodePools whose minValues the types cannot meet, beside it."""
    base, head = tmp_path / "base", tmp_path / "head"
    for side in (base, head):
        side.mkdir()
        shutil.copy(ROOT / PROOFS[1], side / "node-class.yaml")
    shutil.copy(ROOT / PROOFS[0], head / "min-values.yaml")
    return base, head


@pytest.mark.parametrize(("policy", "code", "severity"), [("Strict", 1, "error"), ("BestEffort", 0, "warning")])
def test_diff_judges_the_static_rule_under_the_policy(tmp_path: Path, policy: str, code: int, severity: str) -> None:
    base, head = _proof_sides(tmp_path)
    done = cli("diff", str(base), str(head), "--output", "json", "--min-values-policy", policy)
    assert done.returncode == code, done.stdout + done.stderr
    findings = [f for f in json.loads(done.stdout)["head"]["findings"] if f["rule"] == "min-values"]
    assert findings and {f["severity"] for f in findings} == {severity}
    assert all(f"under the {policy} minValues policy" in f["message"] for f in findings
               if "instance-category" in f["message"])


def test_plan_refuses_a_head_with_unmet_min_values_only_under_strict(tmp_path: Path) -> None:
    base, head = _proof_sides(tmp_path)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a"}},
        "spec": {}, "status": {}}
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    args = ("plan", str(base), str(head), "--snapshot", str(snapshot), "--start", "2026-11-30T09:00:00Z")
    strict = cli(*args)
    assert strict.returncode == 1 and strict.stdout == ""
    assert "has 2 error(s); fix them first" in strict.stderr and "[min-values]" not in strict.stderr
    assert "min-values: karpenter.k8s.aws/instance-category minValues 3" in strict.stderr
    best_effort = cli(*args, "--min-values-policy", "BestEffort", "--output", "json")
    assert best_effort.returncode == 0, best_effort.stdout + best_effort.stderr
    assert json.loads(best_effort.stdout)["nodes"][0]["name"] == "n1"
