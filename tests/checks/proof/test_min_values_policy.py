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
        "examples/v1/min-values/apps/apps.yaml:31:3: error: Deployment/pinned: no provisioner can launch a node for "
        "it: [workload-unschedulable]"
    )
    assert lines[1].startswith(f"    provisioner NodePool/diverse: {KARPENTER_WORDS}: ")
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
